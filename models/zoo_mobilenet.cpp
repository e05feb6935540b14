// SPDX-License-Identifier: Apache-2.0
// MobileNet v1 (Howard et al. 2017, width multiplier 1.0): a 3x3 stem, then 13 depthwise separable convolutions,
// each a depthwise 3x3 (groups = channels) and a pointwise 1x1, both followed by BatchNorm and ReLU.
// Convolutions have no bias (BatchNorm follows); every layer keeps PyTorch's default initialisation.
#include <array>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "layers/batch_norm.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "models/zoo.hpp"
#include "models/zoo_common.hpp"

namespace dtnn::models {
namespace {

using detail::classes_or;

struct Separable {
  int out;
  int stride;
};

// The paper's Table 1 after the stem: output channels and stride of the depthwise convolution. kuangliu's CIFAR
// variant uses the same table.
constexpr std::array<Separable, 13> kLayers = {{{64, 1},
                                                        {128, 2},
                                                        {128, 1},
                                                        {256, 2},
                                                        {256, 1},
                                                        {512, 2},
                                                        {512, 1},
                                                        {512, 1},
                                                        {512, 1},
                                                        {512, 1},
                                                        {512, 1},
                                                        {1024, 2},
                                                        {1024, 1}}};

Conv2dOptions depthwise(int channels, int stride) {
  return Conv2dOptions(channels, channels, 3).stride(stride).padding(1).groups(channels).bias(false);
}

Conv2dOptions pointwise(int in, int out) { return Conv2dOptions(in, out, 1).bias(false); }

std::unique_ptr<BatchNorm2d> bn(int channels) { return std::make_unique<BatchNorm2d>(BatchNorm2dOptions(channels)); }

}  // namespace

// Names as the common PyTorch port (model.<i>.<j> for nn.Sequential(conv_bn, conv_dw, ..., AvgPool2d(7)), then
// fc), e.g. wjc852456/pytorch-mobilenet-v1; its AvgPool2d(7) over the 7x7 maps is the global average here.
Sequential mobilenetv1(const ModelOptions& options) {
  const int classes = classes_or(options, 1000, "mobilenetv1");
  Sequential m;
  m.add_as<Conv2d>("model.0.0", Conv2dOptions(3, 32, 3).stride(2).padding(1).bias(false))
      .add("model.0.1", bn(32))
      .add_as<ReLU>("model.0.2");
  int channels = 32;
  for (std::size_t i = 0; i < kLayers.size(); ++i) {
    const auto [out, stride] = kLayers[i];
    const std::string p = fmt::format("model.{}.", i + 1);
    m.add_as<Conv2d>(p + "0", depthwise(channels, stride))
        .add(p + "1", bn(channels))
        .add_as<ReLU>(p + "2")
        .add_as<Conv2d>(p + "3", pointwise(channels, out))
        .add(p + "4", bn(out))
        .add_as<ReLU>(p + "5");
    channels = out;
  }
  m.add_as<GlobalAvgPool2d>(fmt::format("model.{}", kLayers.size() + 1))
      .add_as<Dense>("fc", DenseOptions(channels, classes));
  return m;
}

// kuangliu's MobileNet: the same table after a stride-1 stem, so 32x32 inputs end at 2x2 (its F.avg_pool2d(out, 2)
// is the global average).
Sequential mobilenetv1_cifar10(const ModelOptions& options) {
  const int classes = classes_or(options, 10, "mobilenetv1_cifar10");
  Sequential m;
  m.add_as<Conv2d>("conv1", Conv2dOptions(3, 32, 3).padding(1).bias(false)).add("bn1", bn(32)).add_as<ReLU>("relu");
  int channels = 32;
  for (std::size_t i = 0; i < kLayers.size(); ++i) {
    const auto [out, stride] = kLayers[i];
    const std::string p = fmt::format("layers.{}.", i);
    m.add_as<Conv2d>(p + "conv1", depthwise(channels, stride))
        .add(p + "bn1", bn(channels))
        .add_as<ReLU>(p + "relu1")
        .add_as<Conv2d>(p + "conv2", pointwise(channels, out))
        .add(p + "bn2", bn(out))
        .add_as<ReLU>(p + "relu2");
    channels = out;
  }
  m.add_as<GlobalAvgPool2d>("avgpool").add_as<Dense>("linear", DenseOptions(channels, classes));
  return m;
}

}  // namespace dtnn::models
