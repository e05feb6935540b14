// SPDX-License-Identifier: Apache-2.0
// DenseNet-121: torchvision's for ImageNet, kuangliu/pytorch-cifar's for CIFAR-10.
//
// Each dense layer is a Concat Block of the identity and a BN-ReLU-conv1x1-BN-ReLU-conv3x3 path of `growth`
// channels, so a dense block's output is its input followed by every layer's new features, as torch.cat of the
// running list in torchvision (kuangliu puts the new features first). Initialisation as torchvision's DenseNet:
// convolutions He normal with fan_in (kaiming_normal_'s default mode), BatchNorm weight 1 and bias 0, classifier
// bias 0.
#include <array>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "layers/batch_norm.hpp"
#include "layers/block.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "models/zoo.hpp"
#include "models/zoo_common.hpp"

namespace dtnn::models {
namespace {

using detail::classes_or;
using detail::FanMode;
using detail::KaimingConv2d;
using detail::ZeroBiasDense;

constexpr std::array<int, 4> kDenseNet121Blocks = {6, 12, 24, 16};
constexpr int kGrowth = 32;
constexpr int kBottleneckWidth = 4 * kGrowth;

std::unique_ptr<KaimingConv2d> he_conv(int in, int out, int kernel, int stride = 1) {
  return std::make_unique<KaimingConv2d>(Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false),
                                         FanMode::kFanIn);
}

std::unique_ptr<BatchNorm2d> bn(int channels) { return std::make_unique<BatchNorm2d>(BatchNorm2dOptions(channels)); }

// Layer names of one dense layer: torchvision's (norm1, relu1, conv1, norm2, relu2, conv2) or kuangliu's.
struct DenseLayerNames {
  const char* norm1;
  const char* conv1;
  const char* norm2;
  const char* conv2;
};

enum class NewFeatures { kLast, kFirst };

std::unique_ptr<Block> dense_layer(int in, const DenseLayerNames& n, NewFeatures order) {
  Path features("");
  features.add(n.norm1, bn(in))
      .add("relu1", std::make_unique<ReLU>())
      .add(n.conv1, he_conv(in, kBottleneckWidth, 1))
      .add(n.norm2, bn(kBottleneckWidth))
      .add("relu2", std::make_unique<ReLU>())
      .add(n.conv2, he_conv(kBottleneckWidth, kGrowth, 3));
  auto block = std::make_unique<Block>(Merge::kConcat);
  if (order == NewFeatures::kLast) {
    block->add_path(Path()).add_path(std::move(features));
  } else {
    block->add_path(std::move(features)).add_path(Path());
  }
  return block;
}

}  // namespace

Sequential densenet121_imagenet(const ModelOptions& options) {
  const int classes = classes_or(options, 1000, "densenet121_imagenet");
  const DenseLayerNames names{"norm1", "conv1", "norm2", "conv2"};
  Sequential m;
  int channels = 2 * kGrowth;
  m.add("features.conv0", he_conv(3, channels, 7, 2))
      .add("features.norm0", bn(channels))
      .add_as<ReLU>("features.relu0")
      .add_as<MaxPool2d>("features.pool0", MaxPool2dOptions(3).stride(2).padding(1));
  for (std::size_t b = 0; b < kDenseNet121Blocks.size(); ++b) {
    for (int l = 0; l < kDenseNet121Blocks[b]; ++l) {
      m.add(fmt::format("features.denseblock{}.denselayer{}", b + 1, l + 1),
            dense_layer(channels, names, NewFeatures::kLast));
      channels += kGrowth;
    }
    if (b + 1 < kDenseNet121Blocks.size()) {
      const std::string t = fmt::format("features.transition{}", b + 1);
      m.add(t + ".norm", bn(channels))
          .add_as<ReLU>(t + ".relu")
          .add(t + ".conv", he_conv(channels, channels / 2, 1))
          .add_as<AvgPool2d>(t + ".pool", AvgPool2dOptions(2));
      channels /= 2;
    }
  }
  m.add("features.norm5", bn(channels))
      .add_as<ReLU>("features.relu5")
      .add_as<GlobalAvgPool2d>("avgpool")
      .add_as<ZeroBiasDense>("classifier", DenseOptions(channels, classes));
  return m;
}

// kuangliu's transition halves the channels with floor(channels * 0.5) and pools with F.avg_pool2d(out, 2); its
// final F.avg_pool2d(out, 4) over the 4x4 maps is the global average.
Sequential densenet121_cifar10(const ModelOptions& options) {
  const int classes = classes_or(options, 10, "densenet121_cifar10");
  const DenseLayerNames names{"bn1", "conv1", "bn2", "conv2"};
  Sequential m;
  int channels = 2 * kGrowth;
  m.add("conv1", he_conv(3, channels, 3));
  for (std::size_t b = 0; b < kDenseNet121Blocks.size(); ++b) {
    for (int l = 0; l < kDenseNet121Blocks[b]; ++l) {
      m.add(fmt::format("dense{}.{}", b + 1, l), dense_layer(channels, names, NewFeatures::kFirst));
      channels += kGrowth;
    }
    if (b + 1 < kDenseNet121Blocks.size()) {
      const std::string t = fmt::format("trans{}", b + 1);
      m.add(t + ".bn", bn(channels))
          .add_as<ReLU>(t + ".relu")
          .add(t + ".conv", he_conv(channels, channels / 2, 1))
          .add_as<AvgPool2d>(t + ".pool", AvgPool2dOptions(2));
      channels /= 2;
    }
  }
  m.add("bn", bn(channels))
      .add_as<ReLU>("relu")
      .add_as<GlobalAvgPool2d>("avgpool")
      .add_as<ZeroBiasDense>("linear", DenseOptions(channels, classes));
  return m;
}

}  // namespace dtnn::models
