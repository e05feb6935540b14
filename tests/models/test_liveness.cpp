// SPDX-License-Identifier: Apache-2.0
// Liveness-based memory: a step's activations and gradients are transient (released at their last use in the step's
// graph, runtime/host_memory.hpp serving them again), with the results of tensors kept for the slot's whole life.
#include <gtest/gtest.h>

#include <bit>
#include <numeric>
#include <span>
#include <cstdint>
#include <string>
#include <vector>

#include "io/dataset.hpp"
#include "layers/batch_norm.hpp"
#include "layers/block.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/dropout.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "models/optimizers.hpp"
#include "models/train_step.hpp"
#include "models/training.hpp"
#include "runtime/engine.hpp"
#include "runtime/host_memory.hpp"
#include "support/blocks.hpp"
#include "support/tensor_checks.hpp"

namespace dtnn {
namespace {

using test_support::bitwise_equal;

// Every kind of lifetime the containers release: a fused stem, residual blocks with an identity and a projection
// shortcut (BatchNorm + Add + ReLU fused), a concatenation with an identity path, a convolution and a dense layer
// with a fused ReLU (their masked gradients), dropout (its mask), pooling.
Sequential liveness_net(int fusion) {
  auto concat = std::make_unique<Block>(Merge::kConcat);
  concat->add_path(Path().add<Conv2d>(Conv2dOptions(6, 2, 3).padding(1)).add<ReLU>());
  concat->add_path(Path());
  Sequential m;
  m.fusion(fusion);
  m.add_as<Conv2d>("conv1", Conv2dOptions(2, 4, 3).padding(1).bias(false))
      .add_as<BatchNorm2d>("bn1", BatchNorm2dOptions(4))
      .add_as<ReLU>("relu")
      .add("layer1.0", test_support::basic_block(4, 4, 1))
      .add_as<ReLU>("layer1.0.relu")
      .add("layer2.0", test_support::basic_block(4, 6, 2))
      .add_as<ReLU>("layer2.0.relu")
      .add("mix", std::move(concat))
      .add_as<Conv2d>("head", Conv2dOptions(8, 8, 3).padding(1))
      .add_as<ReLU>("head.relu")
      .add_as<Dropout>("drop", DropoutOptions(0.25))
      .add_as<MaxPool2d>("pool", MaxPool2dOptions(2))
      .add_as<Flatten>("flatten")
      .add_as<Dense>("fc1", DenseOptions(8 * 2 * 2, 10))
      .add_as<ReLU>("fc1.relu")
      .add_as<Dense>("fc2", DenseOptions(10, 3));
  return m;
}

struct TrainedRun {
  std::vector<std::pair<std::string, std::vector<float>>> state;  // parameters and buffers by name
  std::vector<float> predictions;
  double validation_loss = 0;
  std::size_t peak_in_use = 0;  // StarPU's host buffers during fit
};

TrainedRun train(Storage storage, int fusion, int tiles) {
  const io::Dataset data = io::synthetic_dataset(40, 2, 8, 8, 3, 5);
  Sequential model = liveness_net(fusion);
  model.build({2, 8, 8}, 6);
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  runtime::Engine::current()->wait_all();
  runtime::reset_host_memory_peaks();
  TrainedRun r;
  // The last batch is short (its own slots), validation runs the evaluation graph after each epoch.
  const History h = fit(model, sgd, data,
                        FitOptions().epochs(2).batch_size(12).tiles(tiles).activations(storage).verbose(false), &data);
  r.peak_in_use = runtime::host_memory_stats().peak_in_use - runtime::host_memory_stats().in_use;
  r.validation_loss = h.epochs.back().val_loss;
  for (const auto& p : model.named_parameters()) r.state.emplace_back(p.name, p.parameter->value.to_vector());
  for (const auto& b : model.named_buffers()) r.state.emplace_back(b.name, b.buffer->value.to_vector());
  r.predictions = predict(model, data, EvalOptions().batch_size(16).tiles(tiles).activations(storage));
  return r;
}

TEST(LivenessTest, TransientActivationsTrainBitwiseToKeptOnes) {
  for (int fusion : {1, 0}) {
    for (int tiles : {1, 3}) {
      SCOPED_TRACE(::testing::Message() << "fusion " << fusion << ", " << tiles << " tiles");
      const TrainedRun kept = train(Storage::kOwned, fusion, tiles);
      const TrainedRun released = train(Storage::kTransient, fusion, tiles);
      ASSERT_EQ(released.state.size(), kept.state.size());
      for (std::size_t i = 0; i < kept.state.size(); ++i) {
        EXPECT_TRUE(bitwise_equal(released.state[i].second, kept.state[i].second)) << kept.state[i].first;
      }
      EXPECT_TRUE(bitwise_equal(released.predictions, kept.predictions));
      EXPECT_EQ(released.validation_loss, kept.validation_loss);
      EXPECT_GT(released.peak_in_use, kept.peak_in_use);  // kept: only the tile partials of the weight gradients
    }
  }
}

// A chain of equal convolutions: the memory in use follows the tensors alive at a time. A training step holds at most
// its activations and gradients and gives every one of them back by its end; evaluation holds only the tensors around
// the layers running. Kept tensors would hold two slots of every activation (and gradient) for good.
TEST(LivenessTest, MemoryInUseFollowsTheLiveTensors) {
  constexpr int kDepth = 8;
  constexpr std::int64_t kBatch = 8;
  Sequential model;
  for (int i = 0; i < kDepth; ++i) model.add<Conv2d>(Conv2dOptions(4, 4, 3).padding(1).bias(false));
  model.add<Flatten>().add<Dense>(DenseOptions(4 * 8 * 8, 3));
  model.build({4, 8, 8}, 2);
  const std::size_t act = kBatch * 4 * 8 * 8 * sizeof(float);  // every tensor between the convolutions
  const std::size_t partials = 16 * 1024;                       // the weight gradients' tile partials, at most
  const io::Dataset data = io::synthetic_dataset(4 * kBatch, 4, 8, 8, 3, 7);
  Sgd sgd(SgdOptions(0.01f).momentum(0.9f));
  runtime::Engine& engine = *runtime::Engine::current();
  engine.wait_all();
  const std::size_t before = runtime::host_memory_stats().in_use;
  runtime::reset_host_memory_peaks();
  TrainStep steps(model, sgd, TrainStepOptions().tiles(2));
  std::vector<std::int64_t> order(static_cast<std::size_t>(data.size()));
  std::iota(order.begin(), order.end(), 0);
  for (std::int64_t step = 0; step < 4; ++step) {
    StepSlot& s = steps.slot(kBatch, step);
    const auto rows = std::span(order).subspan(static_cast<std::size_t>(step * kBatch), kBatch);
    steps.submit(s, StepBatch{&data, rows, kBatch, step, 0});
    engine.wait_all();
    // Without the releases the slot would still hold its 9 activations and 9 gradients.
    EXPECT_EQ(runtime::host_memory_stats().in_use, before) << "after step " << step;
  }
  // The 9 outputs (the convolutions' and Flatten's) are all alive at the end of the forward pass.
  const std::size_t training = runtime::host_memory_stats().peak_in_use - before;
  EXPECT_GE(training, 9 * act);
  EXPECT_LE(training, 18 * act + partials) << training << " bytes, " << act << " per activation";

  runtime::reset_host_memory_peaks();
  const auto p = predict(model, data, EvalOptions().batch_size(kBatch).tiles(1));
  const std::size_t evaluation = runtime::host_memory_stats().peak_in_use - before;
  // Two batches in flight, each with the input and the output of the layers running (the first input and the
  // logits are the slot's own); 18 without the releases.
  EXPECT_LE(evaluation, 8 * act) << evaluation << " bytes, " << act << " per activation";
  EXPECT_EQ(runtime::host_memory_stats().in_use, before);
  EXPECT_EQ(p.size(), static_cast<std::size_t>(4 * kBatch * 3));
}

}  // namespace
}  // namespace dtnn
