// SPDX-License-Identifier: Apache-2.0
// GoogLeNet and Inception v3 as torchvision defines them (without the auxiliary classifiers, which only train).
//
// An Inception module is a Concat Block whose paths hold torchvision's branches with their own names directly under
// the module ("inception3a.branch2.1.conv", "Mixed_5b.branch5x5_2.bn"). torchvision's BasicConv2d (convolution
// without bias, BatchNorm with eps 0.001, ReLU) becomes three layers "<name>.conv", "<name>.bn", "<name>.relu".
// Every layer keeps PyTorch's default initialisation (torchvision draws truncated normals instead).
#include <memory>
#include <string>

#include "layers/batch_norm.hpp"
#include "layers/block.hpp"
#include "layers/dropout.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "models/zoo.hpp"
#include "models/zoo_common.hpp"

namespace dtnn::models {
namespace {

using detail::classes_or;

// Appends torchvision's BasicConv2d to a Path or a Sequential.
template <class Container>
Container& basic_conv(Container& c, const std::string& name, Conv2dOptions options) {
  const int out = options.out_;
  c.add(name + ".conv", std::make_unique<Conv2d>(options.bias(false)));
  c.add(name + ".bn", std::make_unique<BatchNorm2d>(BatchNorm2dOptions(out).eps(0.001)));
  c.add(name + ".relu", std::make_unique<ReLU>());
  return c;
}

Conv2dOptions conv(int in, int out, int kernel) { return Conv2dOptions(in, out, kernel).padding(kernel / 2); }
Conv2dOptions conv_1x7(int in, int out) { return Conv2dOptions(in, out, 1).kernel(1, 7).padding(0, 3); }
Conv2dOptions conv_7x1(int in, int out) { return Conv2dOptions(in, out, 1).kernel(7, 1).padding(3, 0); }
Conv2dOptions conv_1x3(int in, int out) { return Conv2dOptions(in, out, 1).kernel(1, 3).padding(0, 1); }
Conv2dOptions conv_3x1(int in, int out) { return Conv2dOptions(in, out, 1).kernel(3, 1).padding(1, 0); }
// The grid reductions: 3x3, stride 2, no padding.
Conv2dOptions reduce(int in, int out) { return Conv2dOptions(in, out, 3).stride(2); }

// ---- GoogLeNet ----

// torchvision's Inception module; its branch3 uses a 3x3 convolution where the paper has 5x5 (torchvision kept it
// for its pretrained weights).
std::unique_ptr<Block> inception(int in, int c1, int c3_reduce, int c3, int c5_reduce, int c5, int pool_proj) {
  Path b1(""), b2(""), b3(""), b4("");
  basic_conv(b1, "branch1", conv(in, c1, 1));
  basic_conv(b2, "branch2.0", conv(in, c3_reduce, 1));
  basic_conv(b2, "branch2.1", conv(c3_reduce, c3, 3));
  basic_conv(b3, "branch3.0", conv(in, c5_reduce, 1));
  basic_conv(b3, "branch3.1", conv(c5_reduce, c5, 3));
  // ceil_mode=True changes nothing at stride 1.
  b4.add("branch4.0", std::make_unique<MaxPool2d>(MaxPool2dOptions(3).stride(1).padding(1).ceil_mode(true)));
  basic_conv(b4, "branch4.1", conv(in, pool_proj, 1));
  auto block = std::make_unique<Block>(Merge::kConcat);
  block->add_path(std::move(b1)).add_path(std::move(b2)).add_path(std::move(b3)).add_path(std::move(b4));
  return block;
}

// ---- Inception v3 ----

std::unique_ptr<AvgPool2d> pool_3x3_same() {
  return std::make_unique<AvgPool2d>(AvgPool2dOptions(3).stride(1).padding(1).count_include_pad(true));
}

std::unique_ptr<Block> concat(Path a, Path b) {
  auto block = std::make_unique<Block>(Merge::kConcat);
  block->add_path(std::move(a)).add_path(std::move(b));
  return block;
}

std::unique_ptr<Block> concat(Path a, Path b, Path c, Path d) {
  auto block = std::make_unique<Block>(Merge::kConcat);
  block->add_path(std::move(a)).add_path(std::move(b)).add_path(std::move(c)).add_path(std::move(d));
  return block;
}

// 35x35 module: 64 + 64 + 96 + pool_features channels.
std::unique_ptr<Block> inception_a(int in, int pool_features) {
  Path b1(""), b5(""), b3(""), bp("");
  basic_conv(b1, "branch1x1", conv(in, 64, 1));
  basic_conv(b5, "branch5x5_1", conv(in, 48, 1));
  basic_conv(b5, "branch5x5_2", conv(48, 64, 5));
  basic_conv(b3, "branch3x3dbl_1", conv(in, 64, 1));
  basic_conv(b3, "branch3x3dbl_2", conv(64, 96, 3));
  basic_conv(b3, "branch3x3dbl_3", conv(96, 96, 3));
  bp.add("pool", pool_3x3_same());
  basic_conv(bp, "branch_pool", conv(in, pool_features, 1));
  return concat(std::move(b1), std::move(b5), std::move(b3), std::move(bp));
}

// 35x35 -> 17x17: 384 + 96 + in channels.
std::unique_ptr<Block> inception_b(int in) {
  Path b3(""), bd(""), bp("");
  basic_conv(b3, "branch3x3", reduce(in, 384));
  basic_conv(bd, "branch3x3dbl_1", conv(in, 64, 1));
  basic_conv(bd, "branch3x3dbl_2", conv(64, 96, 3));
  basic_conv(bd, "branch3x3dbl_3", reduce(96, 96));
  bp.add("pool", std::make_unique<MaxPool2d>(MaxPool2dOptions(3).stride(2)));
  auto block = std::make_unique<Block>(Merge::kConcat);
  block->add_path(std::move(b3)).add_path(std::move(bd)).add_path(std::move(bp));
  return block;
}

// 17x17 module with factorised 7x7 convolutions (1x7 and 7x1): 4 x 192 channels.
std::unique_ptr<Block> inception_c(int in, int c7) {
  Path b1(""), b7(""), bd(""), bp("");
  basic_conv(b1, "branch1x1", conv(in, 192, 1));
  basic_conv(b7, "branch7x7_1", conv(in, c7, 1));
  basic_conv(b7, "branch7x7_2", conv_1x7(c7, c7));
  basic_conv(b7, "branch7x7_3", conv_7x1(c7, 192));
  basic_conv(bd, "branch7x7dbl_1", conv(in, c7, 1));
  basic_conv(bd, "branch7x7dbl_2", conv_7x1(c7, c7));
  basic_conv(bd, "branch7x7dbl_3", conv_1x7(c7, c7));
  basic_conv(bd, "branch7x7dbl_4", conv_7x1(c7, c7));
  basic_conv(bd, "branch7x7dbl_5", conv_1x7(c7, 192));
  bp.add("pool", pool_3x3_same());
  basic_conv(bp, "branch_pool", conv(in, 192, 1));
  return concat(std::move(b1), std::move(b7), std::move(bd), std::move(bp));
}

// 17x17 -> 8x8: 320 + 192 + in channels.
std::unique_ptr<Block> inception_d(int in) {
  Path b3(""), b7(""), bp("");
  basic_conv(b3, "branch3x3_1", conv(in, 192, 1));
  basic_conv(b3, "branch3x3_2", reduce(192, 320));
  basic_conv(b7, "branch7x7x3_1", conv(in, 192, 1));
  basic_conv(b7, "branch7x7x3_2", conv_1x7(192, 192));
  basic_conv(b7, "branch7x7x3_3", conv_7x1(192, 192));
  basic_conv(b7, "branch7x7x3_4", reduce(192, 192));
  bp.add("pool", std::make_unique<MaxPool2d>(MaxPool2dOptions(3).stride(2)));
  auto block = std::make_unique<Block>(Merge::kConcat);
  block->add_path(std::move(b3)).add_path(std::move(b7)).add_path(std::move(bp));
  return block;
}

// The 1x3 and 3x1 convolutions of one input, concatenated: a nested Concat named like its parent (empty local
// name), so that its layers keep torchvision's names ("Mixed_7b.branch3x3_2a.conv").
std::unique_ptr<Block> split_1x3_3x1(const std::string& a, const std::string& b) {
  Path pa(""), pb("");
  basic_conv(pa, a, conv_1x3(384, 384));
  basic_conv(pb, b, conv_3x1(384, 384));
  return concat(std::move(pa), std::move(pb));
}

// 8x8 module with expanded filter banks: 320 + 768 + 768 + 192 = 2048 channels.
std::unique_ptr<Block> inception_e(int in) {
  Path b1(""), b3(""), bd(""), bp("");
  basic_conv(b1, "branch1x1", conv(in, 320, 1));
  basic_conv(b3, "branch3x3_1", conv(in, 384, 1));
  b3.add("", split_1x3_3x1("branch3x3_2a", "branch3x3_2b"));
  basic_conv(bd, "branch3x3dbl_1", conv(in, 448, 1));
  basic_conv(bd, "branch3x3dbl_2", conv(448, 384, 3));
  bd.add("", split_1x3_3x1("branch3x3dbl_3a", "branch3x3dbl_3b"));
  bp.add("pool", pool_3x3_same());
  basic_conv(bp, "branch_pool", conv(in, 192, 1));
  return concat(std::move(b1), std::move(b3), std::move(bd), std::move(bp));
}

}  // namespace

// torchvision's max poolings with ceil_mode=True (3x3, stride 2) are floor-mode poolings with padding 1 here, which
// gives the same output sizes (112 -> 56 -> 28 -> 14) but windows one cell earlier: MaxPool2d has no ceil mode yet.
Sequential googlenet(const ModelOptions& options) {
  const int classes = classes_or(options, 1000, "googlenet");
  Sequential m;
  basic_conv(m, "conv1", Conv2dOptions(3, 64, 7).stride(2).padding(3));
  m.add_as<MaxPool2d>("maxpool1", MaxPool2dOptions(3).stride(2).ceil_mode(true));
  basic_conv(m, "conv2", conv(64, 64, 1));
  basic_conv(m, "conv3", conv(64, 192, 3));
  m.add_as<MaxPool2d>("maxpool2", MaxPool2dOptions(3).stride(2).ceil_mode(true))
      .add("inception3a", inception(192, 64, 96, 128, 16, 32, 32))
      .add("inception3b", inception(256, 128, 128, 192, 32, 96, 64))
      .add_as<MaxPool2d>("maxpool3", MaxPool2dOptions(3).stride(2).ceil_mode(true))
      .add("inception4a", inception(480, 192, 96, 208, 16, 48, 64))
      .add("inception4b", inception(512, 160, 112, 224, 24, 64, 64))
      .add("inception4c", inception(512, 128, 128, 256, 24, 64, 64))
      .add("inception4d", inception(512, 112, 144, 288, 32, 64, 64))
      .add("inception4e", inception(528, 256, 160, 320, 32, 128, 128))
      .add_as<MaxPool2d>("maxpool4", MaxPool2dOptions(2).ceil_mode(true))
      .add("inception5a", inception(832, 256, 160, 320, 32, 128, 128))
      .add("inception5b", inception(832, 384, 192, 384, 48, 128, 128))
      .add_as<GlobalAvgPool2d>("avgpool")
      .add_as<Dropout>("dropout", DropoutOptions(0.2))
      .add_as<Dense>("fc", DenseOptions(1024, classes));
  return m;
}

Sequential inceptionv3(const ModelOptions& options) {
  const int classes = classes_or(options, 1000, "inceptionv3");
  Sequential m;
  basic_conv(m, "Conv2d_1a_3x3", reduce(3, 32));
  basic_conv(m, "Conv2d_2a_3x3", Conv2dOptions(32, 32, 3));
  basic_conv(m, "Conv2d_2b_3x3", conv(32, 64, 3));
  m.add_as<MaxPool2d>("maxpool1", MaxPool2dOptions(3).stride(2));
  basic_conv(m, "Conv2d_3b_1x1", conv(64, 80, 1));
  basic_conv(m, "Conv2d_4a_3x3", Conv2dOptions(80, 192, 3));
  m.add_as<MaxPool2d>("maxpool2", MaxPool2dOptions(3).stride(2))
      .add("Mixed_5b", inception_a(192, 32))
      .add("Mixed_5c", inception_a(256, 64))
      .add("Mixed_5d", inception_a(288, 64))
      .add("Mixed_6a", inception_b(288))
      .add("Mixed_6b", inception_c(768, 128))
      .add("Mixed_6c", inception_c(768, 160))
      .add("Mixed_6d", inception_c(768, 160))
      .add("Mixed_6e", inception_c(768, 192))
      .add("Mixed_7a", inception_d(768))
      .add("Mixed_7b", inception_e(1280))
      .add("Mixed_7c", inception_e(2048))
      .add_as<GlobalAvgPool2d>("avgpool")
      .add_as<Dropout>("dropout", DropoutOptions(0.5))
      .add_as<Dense>("fc", DenseOptions(2048, classes));
  return m;
}

}  // namespace dtnn::models
