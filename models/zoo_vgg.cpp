// SPDX-License-Identifier: Apache-2.0
// AlexNet and VGG: plain stacks of convolutions and max pooling, then a classifier.
#include <memory>
#include <span>

#include <fmt/format.h>

#include "layers/batch_norm.hpp"
#include "layers/dropout.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "models/zoo.hpp"
#include "models/zoo_common.hpp"

namespace dtnn::models {

using detail::classes_or;
using detail::FanMode;
using detail::KaimingConv2d;
using detail::NormalDense;

Sequential alexnet_cifar10(const ModelOptions& options) {
  Sequential m;
  m.add<Conv2d>(Conv2dOptions(3, 64, 3).stride(2).padding(1))
      .add<ReLU>()
      .add<MaxPool2d>(MaxPool2dOptions(2))
      .add<Conv2d>(Conv2dOptions(64, 192, 3).padding(1))
      .add<ReLU>()
      .add<MaxPool2d>(MaxPool2dOptions(2))
      .add<Conv2d>(Conv2dOptions(192, 384, 3).padding(1))
      .add<ReLU>()
      .add<Conv2d>(Conv2dOptions(384, 256, 3).padding(1))
      .add<ReLU>()
      .add<Conv2d>(Conv2dOptions(256, 256, 3).padding(1))
      .add<ReLU>()
      .add<MaxPool2d>(MaxPool2dOptions(2))
      .add<Flatten>()
      .add<Dense>(DenseOptions(256 * 2 * 2, 4096))
      .add<ReLU>()
      .add<Dropout>(DropoutOptions(0.5))
      .add<Dense>(DenseOptions(4096, 4096))
      .add<ReLU>()
      .add<Dropout>(DropoutOptions(0.5))
      .add<Dense>(DenseOptions(4096, classes_or(options, 10, "alexnet_cifar10")));
  return m;
}

// torchvision's AdaptiveAvgPool2d((6, 6)) before the classifier is the identity at 224x224 (and 227x227), where the
// features are 6x6 already, so it is left out; the Dense layers read the feature maps as flattened.
Sequential alexnet_imagenet(const ModelOptions& options) {
  Sequential m;
  m.add_as<Conv2d>("features.0", Conv2dOptions(3, 64, 11).stride(4).padding(2))
      .add_as<ReLU>("features.1")
      .add_as<MaxPool2d>("features.2", MaxPool2dOptions(3).stride(2))
      .add_as<Conv2d>("features.3", Conv2dOptions(64, 192, 5).padding(2))
      .add_as<ReLU>("features.4")
      .add_as<MaxPool2d>("features.5", MaxPool2dOptions(3).stride(2))
      .add_as<Conv2d>("features.6", Conv2dOptions(192, 384, 3).padding(1))
      .add_as<ReLU>("features.7")
      .add_as<Conv2d>("features.8", Conv2dOptions(384, 256, 3).padding(1))
      .add_as<ReLU>("features.9")
      .add_as<Conv2d>("features.10", Conv2dOptions(256, 256, 3).padding(1))
      .add_as<ReLU>("features.11")
      .add_as<MaxPool2d>("features.12", MaxPool2dOptions(3).stride(2))
      .add_as<Dropout>("classifier.0", DropoutOptions(0.5))
      .add_as<Dense>("classifier.1", DenseOptions(256 * 6 * 6, 4096))
      .add_as<ReLU>("classifier.2")
      .add_as<Dropout>("classifier.3", DropoutOptions(0.5))
      .add_as<Dense>("classifier.4", DenseOptions(4096, 4096))
      .add_as<ReLU>("classifier.5")
      .add_as<Dense>("classifier.6", DenseOptions(4096, classes_or(options, 1000, "alexnet_imagenet")));
  return m;
}

namespace {

enum class Norm { kNone, kBatchNorm };

// Channels of the 3x3 convolutions; 0 is a 2x2 max pooling.
constexpr int kVgg11[] = {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
constexpr int kVgg16[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
constexpr int kVgg19[] = {64,  64,  0,   128, 128, 0,   256, 256, 256, 256, 0,
                          512, 512, 512, 512, 0,   512, 512, 512, 512, 0};

// torchvision's make_layers: "features.<i>", i counting every layer as nn.Sequential does. Convolutions are
// initialised as torchvision's VGG: He normal with fan_out, bias 0.
void vgg_features(Sequential& m, std::span<const int> config, Norm norm) {
  int index = 0;
  auto next = [&index] { return fmt::format("features.{}", index++); };
  int channels = 3;
  for (int v : config) {
    if (v == 0) {
      m.add(next(), std::make_unique<MaxPool2d>(MaxPool2dOptions(2)));
      continue;
    }
    m.add(next(), std::make_unique<KaimingConv2d>(Conv2dOptions(channels, v, 3).padding(1), FanMode::kFanOut));
    if (norm == Norm::kBatchNorm) {
      m.add(next(), std::make_unique<BatchNorm2d>(BatchNorm2dOptions(v)));
    }
    m.add(next(), std::make_unique<ReLU>());
    channels = v;
  }
}

// kuangliu/pytorch-cifar's VGG: the features end at 1x1x512 (its AvgPool2d(1, 1) is the identity and left out),
// then one Linear. The classifier is initialised as torchvision's: N(0, 0.01^2), bias 0.
Sequential vgg_cifar10(std::span<const int> config, Norm norm, int classes) {
  Sequential m;
  vgg_features(m, config, norm);
  m.add_as<NormalDense>("classifier", DenseOptions(512, classes), 0.01f);
  return m;
}

// torchvision's VGG. Its AdaptiveAvgPool2d((7, 7)) is the identity at 224x224 and left out.
Sequential vgg_imagenet(std::span<const int> config, Norm norm, int classes) {
  Sequential m;
  vgg_features(m, config, norm);
  m.add_as<NormalDense>("classifier.0", DenseOptions(512 * 7 * 7, 4096), 0.01f)
      .add_as<ReLU>("classifier.1")
      .add_as<Dropout>("classifier.2", DropoutOptions(0.5))
      .add_as<NormalDense>("classifier.3", DenseOptions(4096, 4096), 0.01f)
      .add_as<ReLU>("classifier.4")
      .add_as<Dropout>("classifier.5", DropoutOptions(0.5))
      .add_as<NormalDense>("classifier.6", DenseOptions(4096, classes), 0.01f);
  return m;
}

}  // namespace

Sequential vgg11_cifar10(const ModelOptions& o) {
  return vgg_cifar10(kVgg11, Norm::kNone, classes_or(o, 10, "vgg11_cifar10"));
}
Sequential vgg11bn_cifar10(const ModelOptions& o) {
  return vgg_cifar10(kVgg11, Norm::kBatchNorm, classes_or(o, 10, "vgg11bn_cifar10"));
}
Sequential vgg16_cifar10(const ModelOptions& o) {
  return vgg_cifar10(kVgg16, Norm::kNone, classes_or(o, 10, "vgg16_cifar10"));
}
Sequential vgg16bn_cifar10(const ModelOptions& o) {
  return vgg_cifar10(kVgg16, Norm::kBatchNorm, classes_or(o, 10, "vgg16bn_cifar10"));
}
Sequential vgg19_cifar10(const ModelOptions& o) {
  return vgg_cifar10(kVgg19, Norm::kNone, classes_or(o, 10, "vgg19_cifar10"));
}
Sequential vgg19bn_cifar10(const ModelOptions& o) {
  return vgg_cifar10(kVgg19, Norm::kBatchNorm, classes_or(o, 10, "vgg19bn_cifar10"));
}
Sequential vgg11_imagenet(const ModelOptions& o) {
  return vgg_imagenet(kVgg11, Norm::kNone, classes_or(o, 1000, "vgg11_imagenet"));
}
Sequential vgg11bn_imagenet(const ModelOptions& o) {
  return vgg_imagenet(kVgg11, Norm::kBatchNorm, classes_or(o, 1000, "vgg11bn_imagenet"));
}
Sequential vgg16_imagenet(const ModelOptions& o) {
  return vgg_imagenet(kVgg16, Norm::kNone, classes_or(o, 1000, "vgg16_imagenet"));
}
Sequential vgg16bn_imagenet(const ModelOptions& o) {
  return vgg_imagenet(kVgg16, Norm::kBatchNorm, classes_or(o, 1000, "vgg16bn_imagenet"));
}
Sequential vgg19_imagenet(const ModelOptions& o) {
  return vgg_imagenet(kVgg19, Norm::kNone, classes_or(o, 1000, "vgg19_imagenet"));
}
Sequential vgg19bn_imagenet(const ModelOptions& o) {
  return vgg_imagenet(kVgg19, Norm::kBatchNorm, classes_or(o, 1000, "vgg19bn_imagenet"));
}

}  // namespace dtnn::models
