// SPDX-License-Identifier: Apache-2.0
#include "models/zoo.hpp"

#include <fmt/format.h>

#include "layers/activations.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "models/zoo_common.hpp"
#include "core/errors.hpp"

namespace dtnn::models {

using detail::classes_or;

Sequential simplemlp(const ModelOptions& options) {
  Sequential m;
  m.add<Flatten>()
      .add<Dense>(DenseOptions(784, 512))
      .add<ReLU>()
      .add<Dense>(DenseOptions(512, 512))
      .add<ReLU>()
      .add<Dense>(DenseOptions(512, 512))
      .add<ReLU>()
      .add<Dense>(DenseOptions(512, classes_or(options, 10, "simplemlp")));
  return m;
}

Sequential simplecnn(const ModelOptions& options) {
  Sequential m;
  m.add<Conv2d>(Conv2dOptions(1, 32, 3).padding(1))
      .add<ReLU>()
      .add<MaxPool2d>(MaxPool2dOptions(2))
      .add<Conv2d>(Conv2dOptions(32, 64, 3).padding(1))
      .add<ReLU>()
      .add<MaxPool2d>(MaxPool2dOptions(2))
      .add<Flatten>()
      .add<Dense>(DenseOptions(64 * 7 * 7, 128))
      .add<ReLU>()
      .add<Dense>(DenseOptions(128, classes_or(options, 10, "simplecnn")));
  return m;
}

Sequential lenet5(const ModelOptions& options) {
  Sequential m;
  m.add<Conv2d>(Conv2dOptions(1, 6, 5).padding(2))
      .add<Tanh>()
      .add<AvgPool2d>(AvgPool2dOptions(2))
      .add<Conv2d>(Conv2dOptions(6, 16, 5))
      .add<Tanh>()
      .add<AvgPool2d>(AvgPool2dOptions(2))
      .add<Flatten>()
      .add<Dense>(DenseOptions(16 * 5 * 5, 120))
      .add<Tanh>()
      .add<Dense>(DenseOptions(120, 84))
      .add<Tanh>()
      .add<Dense>(DenseOptions(84, classes_or(options, 10, "lenet5")));
  return m;
}

namespace {

// The registry holds nullary factories (the program builds every model with its own classes).
template <Sequential (*Make)(const ModelOptions&)>
Sequential with_defaults() {
  return Make(ModelOptions());
}

constexpr int kCifar = 10;
constexpr int kImageNet = 1000;

}  // namespace

const std::vector<ModelInfo>& registry() {
  const Shape kMnistInput = {1, 28, 28};
  const Shape kCifarInput = {3, 32, 32};
  const Shape kImageNetInput = {3, 224, 224};
  static const std::vector<ModelInfo> models = {
      {"simplecnn", "2 x (conv3x3 + ReLU + maxpool) + dense 128 + dense 10", kMnistInput, 10,
       with_defaults<simplecnn>},
      {"simplemlp", "784-512-512-512-10 perceptron", kMnistInput, 10, with_defaults<simplemlp>},
      {"lenet5", "LeNet-5: 2 x (conv5x5 + tanh + avgpool) + 120-84-10, tanh", kMnistInput, 10,
       with_defaults<lenet5>},
      {"alexnet_cifar10", "AlexNet for 32x32 (PyDTNN): 5 conv3x3, 3 maxpool, 4096-4096-10", kCifarInput, kCifar,
       with_defaults<alexnet_cifar10>},
      {"alexnet_imagenet", "AlexNet (torchvision)", kImageNetInput, kImageNet, with_defaults<alexnet_imagenet>},
      {"vgg11_cifar10", "VGG-11 for CIFAR-10 (kuangliu, without BatchNorm)", kCifarInput, kCifar,
       with_defaults<vgg11_cifar10>},
      {"vgg11bn_cifar10", "VGG-11 with BatchNorm for CIFAR-10 (kuangliu)", kCifarInput, kCifar,
       with_defaults<vgg11bn_cifar10>},
      {"vgg16_cifar10", "VGG-16 for CIFAR-10 (kuangliu, without BatchNorm)", kCifarInput, kCifar,
       with_defaults<vgg16_cifar10>},
      {"vgg16bn_cifar10", "VGG-16 with BatchNorm for CIFAR-10 (kuangliu)", kCifarInput, kCifar,
       with_defaults<vgg16bn_cifar10>},
      {"vgg19_cifar10", "VGG-19 for CIFAR-10 (kuangliu, without BatchNorm)", kCifarInput, kCifar,
       with_defaults<vgg19_cifar10>},
      {"vgg19bn_cifar10", "VGG-19 with BatchNorm for CIFAR-10 (kuangliu)", kCifarInput, kCifar,
       with_defaults<vgg19bn_cifar10>},
      {"vgg11_imagenet", "VGG-11 (torchvision vgg11)", kImageNetInput, kImageNet, with_defaults<vgg11_imagenet>},
      {"vgg11bn_imagenet", "VGG-11 with BatchNorm (torchvision vgg11_bn)", kImageNetInput, kImageNet,
       with_defaults<vgg11bn_imagenet>},
      {"vgg16_imagenet", "VGG-16 (torchvision vgg16)", kImageNetInput, kImageNet, with_defaults<vgg16_imagenet>},
      {"vgg16bn_imagenet", "VGG-16 with BatchNorm (torchvision vgg16_bn)", kImageNetInput, kImageNet,
       with_defaults<vgg16bn_imagenet>},
      {"vgg19_imagenet", "VGG-19 (torchvision vgg19)", kImageNetInput, kImageNet, with_defaults<vgg19_imagenet>},
      {"vgg19bn_imagenet", "VGG-19 with BatchNorm (torchvision vgg19_bn)", kImageNetInput, kImageNet,
       with_defaults<vgg19bn_imagenet>},
      {"resnet18_cifar10", "ResNet-18 for CIFAR-10 (kuangliu)", kCifarInput, kCifar,
       with_defaults<resnet18_cifar10>},
      {"resnet34_cifar10", "ResNet-34 for CIFAR-10 (kuangliu)", kCifarInput, kCifar,
       with_defaults<resnet34_cifar10>},
      {"resnet50_cifar10", "ResNet-50 for CIFAR-10 (kuangliu)", kCifarInput, kCifar,
       with_defaults<resnet50_cifar10>},
      {"resnet101_cifar10", "ResNet-101 for CIFAR-10 (kuangliu)", kCifarInput, kCifar,
       with_defaults<resnet101_cifar10>},
      {"resnet152_cifar10", "ResNet-152 for CIFAR-10 (kuangliu)", kCifarInput, kCifar,
       with_defaults<resnet152_cifar10>},
      {"resnet20_cifar10", "ResNet-20, He et al. 2016 CIFAR net with option-A shortcuts", kCifarInput, kCifar,
       with_defaults<resnet20_cifar10>},
      {"resnet32_cifar10", "ResNet-32, He et al. 2016 CIFAR net with option-A shortcuts", kCifarInput, kCifar,
       with_defaults<resnet32_cifar10>},
      {"resnet44_cifar10", "ResNet-44, He et al. 2016 CIFAR net with option-A shortcuts", kCifarInput, kCifar,
       with_defaults<resnet44_cifar10>},
      {"resnet56_cifar10", "ResNet-56, He et al. 2016 CIFAR net with option-A shortcuts", kCifarInput, kCifar,
       with_defaults<resnet56_cifar10>},
      {"resnet110_cifar10", "ResNet-110, He et al. 2016 CIFAR net with option-A shortcuts", kCifarInput, kCifar,
       with_defaults<resnet110_cifar10>},
      {"resnet1202_cifar10", "ResNet-1202, He et al. 2016 CIFAR net with option-A shortcuts", kCifarInput, kCifar,
       with_defaults<resnet1202_cifar10>},
      {"resnet18_imagenet", "ResNet-18 (torchvision resnet18)", kImageNetInput, kImageNet,
       with_defaults<resnet18_imagenet>},
      {"resnet34_imagenet", "ResNet-34 (torchvision resnet34)", kImageNetInput, kImageNet,
       with_defaults<resnet34_imagenet>},
      {"resnet50_imagenet", "ResNet-50 v1.5: stride on the 3x3 convolution (torchvision resnet50)", kImageNetInput,
       kImageNet, with_defaults<resnet50_imagenet>},
      {"resnet101_imagenet", "ResNet-101 v1.5 (torchvision resnet101)", kImageNetInput, kImageNet,
       with_defaults<resnet101_imagenet>},
      {"resnet152_imagenet", "ResNet-152 v1.5 (torchvision resnet152)", kImageNetInput, kImageNet,
       with_defaults<resnet152_imagenet>},
      {"densenet121_cifar10", "DenseNet-121 for CIFAR-10 (kuangliu)", kCifarInput, kCifar,
       with_defaults<densenet121_cifar10>},
      {"densenet121_imagenet", "DenseNet-121 (torchvision densenet121)", kImageNetInput, kImageNet,
       with_defaults<densenet121_imagenet>},
      {"googlenet", "GoogLeNet with BatchNorm, no auxiliary classifiers (torchvision googlenet)", kImageNetInput,
       kImageNet, with_defaults<googlenet>},
      {"inceptionv3", "Inception v3, no auxiliary classifier (torchvision inception_v3)", {3, 299, 299}, kImageNet,
       with_defaults<inceptionv3>},
      {"mobilenetv1", "MobileNet v1, width 1.0 (Howard et al. 2017)", kImageNetInput, kImageNet,
       with_defaults<mobilenetv1>},
      {"mobilenetv1_cifar10", "MobileNet v1 for CIFAR-10 (kuangliu)", kCifarInput, kCifar,
       with_defaults<mobilenetv1_cifar10>},
      {"gpt_tiny", "2-layer pre-LN GPT for the tests (d_model 32, 2 heads, context 16, bytes, tied head)", {16}, 256,
       with_defaults<gpt_tiny>},
      {"gpt_char", "character-level GPT: 4 pre-LN layers, d_model 256, 4 heads, context 256, bytes", {256}, 256,
       with_defaults<gpt_char>},
      {"gpt2_small", "GPT-2 small (124M): 12 layers, d_model 768, 12 heads, context 1024, tied head", {1024}, 50257,
       with_defaults<gpt2_small>},
      {"bert_medium", "BERT-medium (PyDTNN's sizes): 8 post-LN layers, d_model 512, 8 heads, context 512", {512},
       30522, with_defaults<bert_medium>},
  };
  return models;
}

const ModelInfo& find(std::string_view name) {
  std::string known;
  for (const auto& m : registry()) {
    if (m.name == name) {
      return m;
    }
    known += known.empty() ? m.name : ", " + m.name;
  }
  throw InvalidArgument(fmt::format("--model: unknown model '{}', expected one of {}", name, known));
}

}  // namespace dtnn::models
