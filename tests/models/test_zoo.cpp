// SPDX-License-Identifier: Apache-2.0
// The model zoo: names, options and initialisation; the graphs of residual, dense and inception blocks train. That
// every registered model builds as its reference does (classes, parameter count, state_dict names) is checked by
// tests/zoo, which builds each one anyway for its step.
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
