// SPDX-License-Identifier: Apache-2.0
// The model zoo: every registered model builds for its input, outputs its classes and has the published number of
// parameters, under the reference's state_dict names; the graphs of residual, dense and inception blocks train.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/dataset.hpp"
#include "layers/batch_norm.hpp"
#include "layers/block.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "models/optimizers.hpp"
#include "models/training.hpp"
#include "models/zoo.hpp"
#include "core/errors.hpp"

namespace dtnn {
namespace {

struct Expected {
  const char* model;
  std::int64_t parameters;
  std::size_t state_dict_entries;  // parameter and buffer tensors
  std::vector<const char*> names;  // a few of the reference's state_dict names
};

// Sources: torchvision = sum(p.numel() for p in torchvision.models.<name>().parameters()), the figures of
// torchvision's documentation; kuangliu = github.com/kuangliu/pytorch-cifar models/*.py, where "no BN" is the same
// network without its BatchNorm layers; akamaster = github.com/akamaster/pytorch_resnet_cifar10 resnet.py (its README:
// 0.27M, 0.46M, 0.66M, 0.85M, 1.7M, 19.4M); PyDTNN = hpca-uji/PyDTNN pydtnn/models/<name>.py. Every figure was also
// recomputed from a plain torch.nn transcription of the reference, whose state_dict names all match.
const std::vector<Expected>& expected() {
  static const std::vector<Expected> table = {
      {"simplecnn", 421'642, 8, {"0.weight", "9.bias"}},  // by hand: 320 + 18,496 + 401,536 + 1,290
      {"simplemlp", 932'362, 8, {"1.weight", "7.bias"}},  // PyDTNN simplemlp: 401,920 + 2 x 262,656 + 5,130
      {"lenet5", 61'706, 10, {"0.weight", "11.bias"}},    // LeCun 1998, full C3: 156 + 2,416 + 48,120 + 10,164 + 850
      {"alexnet_cifar10", 23'272'266, 16, {"0.weight", "20.bias"}},                      // PyDTNN alexnet_cifar10
      {"alexnet_imagenet", 61'100'840, 16, {"features.0.weight", "classifier.6.bias"}},  // torchvision alexnet
      // kuangliu VGG('VGG11'), no BN
      {"vgg11_cifar10", 9'225'610, 18, {"features.0.weight", "features.18.bias", "classifier.weight"}},
      {"vgg11bn_cifar10", 9'231'114, 58, {"features.26.bias", "classifier.weight"}},  // kuangliu VGG('VGG11')
      {"vgg16_cifar10", 14'719'818, 28, {"features.28.weight", "classifier.bias"}},   // kuangliu VGG('VGG16'), no BN
      {"vgg16bn_cifar10", 14'728'266, 93, {"features.1.running_mean", "features.41.running_var"}},  // kuangliu
      {"vgg19_cifar10", 20'029'514, 34, {"features.34.weight"}},                  // kuangliu VGG('VGG19'), no BN
      {"vgg19bn_cifar10", 20'040'522, 114, {"features.50.num_batches_tracked"}},  // kuangliu VGG('VGG19')
      // torchvision vgg11, vgg11_bn, vgg16, vgg16_bn, vgg19, vgg19_bn
      {"vgg11_imagenet", 132'863'336, 22, {"features.18.weight", "classifier.0.weight", "classifier.6.bias"}},
      {"vgg11bn_imagenet", 132'868'840, 62, {"features.26.weight", "classifier.3.weight"}},
      {"vgg16_imagenet", 138'357'544, 32, {"features.28.weight", "classifier.6.weight"}},
      {"vgg16bn_imagenet", 138'365'992, 97, {"features.41.running_mean", "classifier.0.bias"}},
      {"vgg19_imagenet", 143'667'240, 38, {"features.34.bias"}},
      {"vgg19bn_imagenet", 143'678'248, 118, {"features.49.weight", "features.50.running_var"}},
      // kuangliu ResNet18, ResNet34, ResNet50, ResNet101, ResNet152
      {"resnet18_cifar10", 11'173'962, 122,
       {"layer2.0.shortcut.0.weight", "layer2.0.shortcut.1.running_mean", "linear.weight"}},
      {"resnet34_cifar10", 21'282'122, 218, {"layer4.2.bn2.bias"}},
      {"resnet50_cifar10", 23'520'842, 320, {"layer1.0.shortcut.0.weight", "layer4.2.conv3.weight"}},
      {"resnet101_cifar10", 42'512'970, 626, {"layer3.22.bn3.running_var"}},
      {"resnet152_cifar10", 58'156'618, 932, {"layer2.7.conv2.weight", "layer3.35.bn1.bias"}},
      // akamaster resnet20, resnet32, resnet44, resnet56, resnet110, resnet1202
      {"resnet20_cifar10", 269'722, 116, {"conv1.weight", "layer3.2.bn2.running_mean", "linear.bias"}},
      {"resnet32_cifar10", 464'154, 188, {"layer1.4.conv2.weight"}},
      {"resnet44_cifar10", 658'586, 260, {"layer2.6.conv1.weight"}},
      {"resnet56_cifar10", 853'018, 332, {"layer3.8.bn2.weight"}},
      {"resnet110_cifar10", 1'727'962, 656, {"layer2.17.conv2.weight"}},
      {"resnet1202_cifar10", 19'421'274, 7208, {"layer3.199.bn2.num_batches_tracked"}},
      // torchvision resnet18, resnet34, resnet50, resnet101, resnet152
      {"resnet18_imagenet", 11'689'512, 122,
       {"conv1.weight", "bn1.running_var", "layer1.0.conv1.weight", "layer1.0.bn1.running_mean",
        "layer2.0.downsample.0.weight", "layer2.0.downsample.1.weight", "layer4.1.bn2.num_batches_tracked",
        "fc.weight", "fc.bias"}},
      {"resnet34_imagenet", 21'797'672, 218, {"layer3.5.conv2.weight"}},
      {"resnet50_imagenet", 25'557'032, 320, {"layer1.0.downsample.0.weight", "layer4.2.bn3.running_mean"}},
      {"resnet101_imagenet", 44'549'160, 626, {"layer3.22.conv3.weight"}},
      {"resnet152_imagenet", 60'192'808, 932, {"layer3.35.conv2.weight"}},
      // kuangliu DenseNet121
      {"densenet121_cifar10", 6'956'298, 722,
       {"conv1.weight", "dense1.0.bn1.running_mean", "trans3.conv.weight", "dense4.15.conv2.weight", "bn.bias",
        "linear.weight"}},
      // torchvision densenet121
      {"densenet121_imagenet", 7'978'856, 727,
       {"features.conv0.weight", "features.denseblock1.denselayer1.norm1.weight", "features.transition3.conv.weight",
        "features.denseblock4.denselayer16.conv2.weight", "features.norm5.running_var", "classifier.bias"}},
      // torchvision googlenet(aux_logits=False); 13,004,888 with the two auxiliary classifiers.
      {"googlenet", 6'624'904, 344,
       {"conv1.conv.weight", "conv3.bn.running_mean", "inception3a.branch1.conv.weight",
        "inception4e.branch2.1.bn.bias", "inception5b.branch4.1.conv.weight", "fc.weight"}},
      // torchvision inception_v3(aux_logits=False): 27,161,264 minus AuxLogits' 3,326,696.
      {"inceptionv3", 23'834'568, 566,
       {"Conv2d_1a_3x3.conv.weight", "Mixed_5b.branch_pool.bn.running_var", "Mixed_6e.branch7x7dbl_5.conv.weight",
        "Mixed_7b.branch3x3_2a.conv.weight", "Mixed_7c.branch3x3dbl_3b.bn.weight", "fc.bias"}},
      // Howard et al. 2017 (the paper's 4.2M), e.g. wjc852456/pytorch-mobilenet-v1.
      {"mobilenetv1", 4'231'976, 164, {"model.0.0.weight", "model.1.0.weight", "model.13.4.running_var", "fc.weight"}},
      // kuangliu MobileNet
      {"mobilenetv1_cifar10", 3'217'226, 164, {"layers.0.conv1.weight", "layers.12.bn2.bias", "linear.weight"}},
  };
  return table;
}

TEST(ZooTest, EveryRegisteredModelHasAnExpectedParameterCount) {
  std::set<std::string> registered;
  for (const auto& info : models::registry()) registered.insert(info.name);
  std::set<std::string> listed;
  for (const auto& e : expected()) listed.insert(e.model);
  EXPECT_EQ(registered, listed);
}

class ZooModelTest : public ::testing::TestWithParam<Expected> {};

TEST_P(ZooModelTest, BuildsWithTheReferenceParameterCountAndNames) {
  const Expected& e = GetParam();
  const models::ModelInfo& info = models::find(e.model);
  Sequential model = info.make();
  model.build(info.input, 0);
  EXPECT_EQ(model.output_shape(), (Shape{info.classes}));
  EXPECT_EQ(model.parameter_count(), e.parameters);
  std::set<std::string> names;
  for (const auto& p : model.named_parameters()) names.insert(p.name);
  for (const auto& b : model.named_buffers()) names.insert(b.name);
  EXPECT_EQ(names.size(), e.state_dict_entries);
  for (const char* name : e.names) EXPECT_TRUE(names.count(name)) << e.model << " has no '" << name << "'";
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooModelTest, ::testing::ValuesIn(expected()),
                         [](const auto& info) { return std::string(info.param.model); });

TEST(ZooTest, UnknownNameListsTheKnownOnes) {
  try {
    models::find("resnet19");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown model 'resnet19'"), std::string::npos) << what;
    for (const char* name : {"simplemlp", "resnet20_cifar10", "resnet50_imagenet", "inceptionv3", "mobilenetv1"}) {
      EXPECT_NE(what.find(name), std::string::npos) << what;
    }
  }
}

TEST(ZooTest, ClassesOptionSizesTheClassifier) {
  Sequential model = models::resnet20_cifar10(models::ModelOptions().classes(100));
  model.build({3, 32, 32}, 0);
  EXPECT_EQ(model.output_shape(), (Shape{100}));
  EXPECT_EQ(model.parameter_count(), 269'722 + 90 * 64 + 90);
  try {
    models::densenet121_cifar10(models::ModelOptions().classes(-1));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("densenet121_cifar10: classes=-1, expected >= 1"), std::string::npos)
        << e.what();
  }
}

// torchvision's initialisation of ResNet convolutions: He normal with fan_out, so layer3.0.conv2 (64 x 64 x 3 x 3)
// has variance 2 / (64 * 9); BatchNorm starts as the identity.
TEST(ZooTest, ResNetConvolutionsAreHeInitialised) {
  Sequential model = models::resnet20_cifar10();
  model.build({3, 32, 32}, 3);
  int checked = 0;
  for (const auto& p : model.named_parameters()) {
    const auto v = p.parameter->value.to_vector();
    if (p.name == "layer3.0.conv2.weight") {
      double sum = 0.0, squares = 0.0;
      for (float x : v) sum += x, squares += static_cast<double>(x) * x;
      const double mean = sum / static_cast<double>(v.size());
      const double variance = squares / static_cast<double>(v.size()) - mean * mean;
      EXPECT_NEAR(variance, 2.0 / (64 * 9), 0.05 * 2.0 / (64 * 9));
      EXPECT_NEAR(mean, 0.0, 5.0 * std::sqrt(variance / static_cast<double>(v.size())));
      ++checked;
    } else if (p.name == "layer3.0.bn2.weight") {
      EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float x) { return x == 1.0f; }));
      ++checked;
    } else if (p.name == "layer3.0.bn2.bias") {
      EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; }));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3);
}

double train_one_step(Sequential& model, const Shape& input, int classes) {
  const io::Dataset data = io::synthetic_dataset(2, static_cast<int>(input[0]), static_cast<int>(input[1]),
                                                 static_cast<int>(input[2]), classes, 11);
  const std::uint64_t before = model.weights_checksum();
  Sgd sgd(SgdOptions(0.01f).momentum(0.9f));
  const History h = fit(model, sgd, data, FitOptions().batch_size(2).tiles(2).steps_per_epoch(1).verbose(false));
  EXPECT_NE(model.weights_checksum(), before) << "one step changed no weight";
  return h.epochs.at(0).loss;
}

TEST(ZooTest, ResNet20TrainsOneStep) {
  Sequential model = models::resnet20_cifar10();
  model.build({3, 32, 32}, 1);
  const double loss = train_one_step(model, {3, 32, 32}, 10);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_GT(loss, 0.0);
}

// One dense layer (DenseNet), one Inception module with a max pooling branch (GoogLeNet) and a nested 1x3 | 3x1
// concatenation (Inception v3 module E): the zoo's block shapes in one small graph.
TEST(ZooTest, DenseAndInceptionBlocksTrainOneStep) {
  auto conv = [](int in, int out, int kh, int kw) {
    return std::make_unique<Conv2d>(Conv2dOptions(in, out, 1).kernel(kh, kw).padding(kh / 2, kw / 2).bias(false));
  };
  auto dense_layer = std::make_unique<Block>(Merge::kConcat);
  dense_layer->add_path(Path())
      .add_path(Path("")
                    .add("norm1", std::make_unique<BatchNorm2d>(BatchNorm2dOptions(4)))
                    .add("relu1", std::make_unique<ReLU>())
                    .add("conv1", conv(4, 8, 1, 1))
                    .add("norm2", std::make_unique<BatchNorm2d>(BatchNorm2dOptions(8)))
                    .add("relu2", std::make_unique<ReLU>())
                    .add("conv2", conv(8, 3, 3, 3)));
  auto split = std::make_unique<Block>(Merge::kConcat);
  split->add_path(Path("").add("branch_a", conv(2, 2, 1, 3))).add_path(Path("").add("branch_b", conv(2, 2, 3, 1)));
  auto module = std::make_unique<Block>(Merge::kConcat);
  module->add_path(Path("branch1").add(conv(7, 2, 1, 1)))
      .add_path(Path("branch2").add(conv(7, 2, 1, 1)).add(std::make_unique<ReLU>()).add(conv(2, 3, 3, 3)))
      .add_path(Path("").add("branch3", conv(7, 2, 1, 1)).add("", std::move(split)))
      .add_path(Path("branch4")
                    .add(std::make_unique<MaxPool2d>(MaxPool2dOptions(3).stride(1).padding(1)))
                    .add(conv(7, 2, 1, 1)));
  Sequential model;
  model.add("conv0", conv(3, 4, 3, 3))
      .add("denselayer1", std::move(dense_layer))
      .add("inception", std::move(module))
      .add_as<BatchNorm2d>("norm", BatchNorm2dOptions(11))
      .add_as<ReLU>("relu")
      .add_as<GlobalAvgPool2d>("avgpool")
      .add_as<Dense>("fc", DenseOptions(11, 5));
  model.build({3, 8, 8}, 2);
  EXPECT_EQ(model.layer(2).output_shape(), (Shape{2 + 3 + 4 + 2, 8, 8}));
  const double loss = train_one_step(model, {3, 8, 8}, 5);
  EXPECT_TRUE(std::isfinite(loss));
}

}  // namespace
}  // namespace dtnn
