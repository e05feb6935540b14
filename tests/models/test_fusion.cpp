// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "io/dataset.hpp"
#include "layers/batch_norm.hpp"
#include "layers/block.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "models/fusion.hpp"
#include "models/optimizers.hpp"
#include "models/training.hpp"
#include "models/zoo.hpp"
#include "core/errors.hpp"
#include "support/blocks.hpp"
#include "support/tensor_checks.hpp"

namespace dtnn {
namespace {

using test_support::bitwise_equal;

Sequential conv_bn_net() {
  Sequential m;
  m.add<Conv2d>(Conv2dOptions(2, 4, 3).padding(1).bias(false)).add<BatchNorm2d>(BatchNorm2dOptions(4)).add<ReLU>();
  auto block = std::make_unique<Block>(Merge::kAdd);
  block->add_path(Path().add<Conv2d>(Conv2dOptions(4, 4, 3).padding(1)).add<BatchNorm2d>(BatchNorm2dOptions(4)));
  block->add_path(Path());
  m.add(std::move(block)).add<GlobalAvgPool2d>().add<Flatten>().add<Dense>(DenseOptions(4, 3));
  return m;
}

TEST(FusionTest, FoldedBatchNormGivesTheSamePredictions) {
  const io::Dataset data = io::synthetic_dataset(48, 2, 6, 6, 3, 3);
  Sequential model = conv_bn_net();
  model.build({2, 6, 6}, 4);
  Sgd sgd(SgdOptions(0.1f).momentum(0.9f));
  fit(model, sgd, data, FitOptions().epochs(2).batch_size(8).verbose(false));  // non-trivial running statistics
  const auto before = predict(model, data);
  EXPECT_EQ(fold_batchnorm(model), 2);
  EXPECT_EQ(fold_batchnorm(model), 0);  // already folded
  const auto after = predict(model, data);
  ASSERT_EQ(before.size(), after.size());
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_NEAR(before[i], after[i], 1e-5) << i;
  EXPECT_THROW(fit(model, sgd, data, FitOptions().batch_size(8).verbose(false)), InvalidArgument);
}

// A small network with every fusion: the stem's BatchNorm + ReLU, a residual block with an identity shortcut and one
// with a projection (BatchNorm + Add + ReLU in one pass; BatchNorm + ReLU inside the branch), an Add block without
// BatchNorm (Add + ReLU), a convolution with bias + ReLU, a dense layer + ReLU, and a ReLU that stays (after
// pooling).
Sequential every_fusion_net() {
  Sequential m;
  m.add_as<Conv2d>("conv1", Conv2dOptions(2, 4, 3).padding(1).bias(false))
      .add_as<BatchNorm2d>("bn1", BatchNorm2dOptions(4))
      .add_as<ReLU>("relu")
      .add("layer1.0", test_support::basic_block(4, 4, 1))
      .add_as<ReLU>("layer1.0.relu")
      .add("layer2.0", test_support::basic_block(4, 6, 2))
      .add_as<ReLU>("layer2.0.relu");
  auto plain = std::make_unique<Block>(Merge::kAdd);
  plain->add_path(Path().add<Conv2d>(Conv2dOptions(6, 6, 3).padding(1)));
  plain->add_path(Path());
  m.add("plain", std::move(plain))
      .add_as<ReLU>("plain.relu")
      .add_as<Conv2d>("head", Conv2dOptions(6, 8, 3).padding(1))
      .add_as<ReLU>("head.relu")
      .add_as<MaxPool2d>("pool", MaxPool2dOptions(2))
      .add_as<ReLU>("pool.relu")
      .add_as<Flatten>("flatten")
      .add_as<Dense>("fc1", DenseOptions(8 * 2 * 2, 10))
      .add_as<ReLU>("fc1.relu")
      .add_as<Dense>("fc2", DenseOptions(10, 3));
  return m;
}

struct Trained {
  std::vector<std::pair<std::string, std::vector<float>>> state;  // parameters and buffers by name
  std::vector<float> predictions;                                  // evaluation mode, running statistics
};

Trained train_every_fusion_net(int fusion, int tiles) {
  const io::Dataset data = io::synthetic_dataset(36, 2, 8, 8, 3, 5);
  Sequential model = every_fusion_net();
  model.fusion(fusion);
  model.build({2, 8, 8}, 6);
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  fit(model, sgd, data, FitOptions().batch_size(12).tiles(tiles).steps_per_epoch(3).verbose(false));
  Trained t;
  for (const auto& p : model.named_parameters()) t.state.emplace_back(p.name, p.parameter->value.to_vector());
  for (const auto& b : model.named_buffers()) t.state.emplace_back(b.name, b.buffer->value.to_vector());
  t.predictions = predict(model, data);
  return t;
}

TEST(FusionTest, EveryFusionIsFoundWhenTheModelIsBuilt) {
  Sequential model = every_fusion_net();
  model.build({2, 8, 8}, 1);
  int absorbed = 0;
  std::vector<std::string> kept;
  for (std::size_t i = 0; i < model.size(); ++i) {
    if (model.layer(i).type() == "ReLU" && !model.layer(i).absorbed()) kept.push_back(model.layer(i).name());
    absorbed += model.layer(i).absorbed();
  }
  // relu, layer1.0.relu, layer2.0.relu, plain.relu, head.relu, fc1.relu; pool.relu follows a max pooling.
  EXPECT_EQ(absorbed, 6);
  EXPECT_EQ(kept, std::vector<std::string>{"pool.relu"});
  EXPECT_EQ(dynamic_cast<Block&>(model.layer(3)).fused_path(), 0);
  EXPECT_EQ(dynamic_cast<Block&>(model.layer(5)).fused_path(), 0);
  EXPECT_EQ(dynamic_cast<Block&>(model.layer(7)).fused_path(), -1);
  const std::string summary = model.summary();
  EXPECT_NE(summary.find("fused BN+Add+ReLU"), std::string::npos) << summary;
  EXPECT_NE(summary.find("fused Add+ReLU"), std::string::npos) << summary;
  EXPECT_NE(summary.find("fused into the layer before"), std::string::npos) << summary;
  // Fusing again finds nothing left, and fusion(0) leaves every layer its own passes.
  const FusionCounts again = fuse_passes(model);
  EXPECT_EQ(again.relus + again.merges, 0);
  Sequential unfused = every_fusion_net();
  unfused.fusion(false).build({2, 8, 8}, 1);
  for (std::size_t i = 0; i < unfused.size(); ++i) EXPECT_EQ(unfused.layer(i).absorbed(), 0) << i;
  EXPECT_THROW(unfused.fusion(true), InvalidArgument);  // after build
}

// Fused passes round every operation as the separate ones: training gives bitwise the unfused weights, BatchNorm
// statistics and evaluation-mode predictions, for one tile, four and eleven (BatchNorm reduction chains).
TEST(FusionTest, FusedModelTrainsBitwiseToTheUnfusedWeights) {
  for (int tiles : {1, 4, 11}) {
    SCOPED_TRACE(::testing::Message() << tiles << " tiles");
    const Trained unfused = train_every_fusion_net(0, tiles);
    const Trained fused = train_every_fusion_net(1, tiles);
    ASSERT_EQ(fused.state.size(), unfused.state.size());
    for (std::size_t i = 0; i < fused.state.size(); ++i) {
      EXPECT_EQ(fused.state[i].first, unfused.state[i].first);  // checkpoint names
      EXPECT_TRUE(bitwise_equal(fused.state[i].second, unfused.state[i].second)) << fused.state[i].first;
    }
    EXPECT_TRUE(bitwise_equal(fused.predictions, unfused.predictions));
  }
}

// Every ReLU of these zoo models runs inside the layer before it, and the names (the checkpoint schema) stay the
// unfused model's, PyTorch's.
TEST(FusionTest, ZooModelsFuseEveryReluAndKeepTheirNames) {
  struct Case {
    const char* model;
    int relus;
    int merges;
  };
  // resnet18: the stem, relu1 and the block's ReLU in each of 8 basic blocks; resnet50: the stem, relu1 and relu2
  // in each of 16 bottlenecks and their 16 block ReLUs; vgg11bn: 8 BatchNorms; densenet121: BatchNorm + ReLU
  // before each of its 120 convolutions but the stem's.
  for (const Case& c : {Case{"resnet18_cifar10", 17, 8}, Case{"resnet50_cifar10", 49, 16},
                        Case{"vgg11bn_cifar10", 8, 0}, Case{"densenet121_cifar10", 120, 0}}) {
    SCOPED_TRACE(c.model);
    const models::ModelInfo& info = models::find(c.model);
    Sequential model = info.make();
    model.fusion(false).build(info.input, 0);
    auto names = [&model] {
      std::vector<std::string> out;
      for (const auto& p : model.named_parameters()) out.push_back(p.name);
      for (const auto& b : model.named_buffers()) out.push_back(b.name);
      return out;
    };
    const std::vector<std::string> unfused = names();
    const FusionCounts counts = fuse_passes(model);
    EXPECT_EQ(counts.relus, c.relus);
    EXPECT_EQ(counts.merges, c.merges);
    EXPECT_EQ(names(), unfused);
    std::vector<Layer*> layers;
    for (std::size_t i = 0; i < model.size(); ++i) layers.push_back(&model.layer(i));
    int relus = 0;
    while (!layers.empty()) {
      Layer* l = layers.back();
      layers.pop_back();
      for (Layer* child : l->children()) layers.push_back(child);
      if (l->type() != "ReLU") continue;
      ++relus;
      EXPECT_TRUE(l->absorbed()) << l->name();
    }
    EXPECT_EQ(relus, c.relus);
  }
}

// The fused ReLU's input (the layer's own output) and its gradient are never allocated.
TEST(FusionTest, FusedModelAllocatesFewerTensors) {
  auto elements = [](int fusion) {
    Sequential model = every_fusion_net();
    model.fusion(fusion).build({2, 8, 8}, 1);
    std::vector<Tensor> acts, grads;
    model.allocate(4, 2, acts, &grads);
    std::int64_t total = 0;
    for (const Tensor& t : acts) total += t.defined() ? t.numel() : 0;
    for (const Tensor& t : grads) total += t.defined() ? t.numel() : 0;
    return total;
  };
  // Six activations (and gradients) of 4 samples: 4x8x8 (stem), 4x8x8, 6x4x4 (two blocks), 6x4x4 (plain), 8x4x4
  // (head), 10 (fc1).
  const std::int64_t saved = 2 * 4 * (4 * 64 + 4 * 64 + 6 * 16 + 6 * 16 + 8 * 16 + 10);
  EXPECT_EQ(elements(0) - elements(1), saved);
}

TEST(FusionTest, FoldingAFusedModelGivesTheSamePredictions) {
  const io::Dataset data = io::synthetic_dataset(36, 2, 8, 8, 3, 5);
  Sequential model = every_fusion_net();
  model.build({2, 8, 8}, 4);
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  fit(model, sgd, data, FitOptions().epochs(2).batch_size(12).verbose(false));
  const auto before = predict(model, data);
  // The stem and each block's conv1 -> bn1 and conv2 -> bn2 (the fused one writing the sum), and the projection.
  EXPECT_EQ(fold_batchnorm(model), 1 + 2 + 2 + 1);
  const auto after = predict(model, data);
  ASSERT_EQ(before.size(), after.size());
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_NEAR(before[i], after[i], 1e-5) << i;
}

}  // namespace
}  // namespace dtnn
