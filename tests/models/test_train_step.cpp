// SPDX-License-Identifier: Apache-2.0
// The step builder on its own (models/train_step.hpp): steps submitted without reading a tensor train the model
// exactly as fit does.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "core/errors.hpp"
#include "io/dataset.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "models/optimizers.hpp"
#include "models/train_step.hpp"
#include "models/training.hpp"
#include "runtime/engine.hpp"

namespace dtnn {
namespace {

Sequential small_cnn() {
  Sequential m;
  m.add<Conv2d>(Conv2dOptions(2, 4, 3).padding(1))
      .add<ReLU>()
      .add<MaxPool2d>(MaxPool2dOptions(2))
      .add<Flatten>()
      .add<Dense>(DenseOptions(4 * 5 * 5, 6))
      .add<ReLU>()
      .add<Dense>(DenseOptions(6, 3));
  return m;
}

// Three steps of 7 rows in data order with flips and crops, the last one short: what fit does with shuffle(0) on
// 17 samples.
constexpr std::int64_t kBatch = 7;
constexpr std::int64_t kSamples = 17;
const AugmentOptions kAugment{1, 1};

FitOptions fit_options() {
  return FitOptions().batch_size(kBatch).tiles(3).shuffle(false).seed(9).augment(kAugment).verbose(false);
}

TEST(TrainStepTest, StepsSubmittedWithoutReadingATensorEqualFit) {
  const io::Dataset data = io::synthetic_dataset(static_cast<int>(kSamples), 2, 10, 10, 3, 13);
  Sequential fitted = small_cnn();
  fitted.build({2, 10, 10}, 4);
  Sgd sgd(SgdOptions(0.1f).momentum(0.9f));
  const History history = fit(fitted, sgd, data, fit_options());

  Sequential stepped = small_cnn();
  stepped.build({2, 10, 10}, 4);
  Sgd sgd2(SgdOptions(0.1f).momentum(0.9f));
  TrainStep steps(stepped, sgd2, TrainStepOptions().tiles(3).seed(9).augment(kAugment));
  std::vector<std::int64_t> order(static_cast<std::size_t>(kSamples));
  std::iota(order.begin(), order.end(), 0);
  std::vector<StepSlot*> submitted;
  for (std::int64_t step = 0; step * kBatch < kSamples; ++step) {
    const std::int64_t rows = std::min(kBatch, kSamples - step * kBatch);
    StepSlot& s = steps.slot(rows, step);
    const auto indices = std::span(order).subspan(static_cast<std::size_t>(step * kBatch), static_cast<std::size_t>(rows));
    steps.submit(s, StepBatch{&data, indices, rows, step, 0});
    submitted.push_back(&s);
  }
  // Nothing was read while submitting: three steps in flight at once, as a simulation would submit them.
  runtime::Engine::current()->wait_all();
  EXPECT_EQ(stepped.weights_checksum(), fitted.weights_checksum());

  // Each step had a slot of its own (two of 7 rows, one of 3), so all three statistics are still there: fit's.
  StepStats last = steps.collect(*submitted[2]);
  EXPECT_EQ(last.rows, kSamples - 2 * kBatch);
  StepStats all = steps.collect(*submitted[0]);
  all += steps.collect(*submitted[1]);
  all += last;
  ASSERT_EQ(history.epochs.size(), 1u);
  EXPECT_EQ(all.rows, history.epochs[0].images);
  EXPECT_EQ(all.mean(kLossSum), history.epochs[0].loss);
  EXPECT_EQ(all.mean(kCorrect), history.epochs[0].accuracy);
}

TEST(TrainStepTest, RejectsABatchThatDoesNotFitItsSlot) {
  const io::Dataset data = io::synthetic_dataset(8, 2, 10, 10, 3, 1);
  Sequential model = small_cnn();
  model.build({2, 10, 10}, 1);
  Sgd sgd(SgdOptions(0.1f));
  TrainStep steps(model, sgd, TrainStepOptions().tiles(2));
  std::vector<std::int64_t> indices{0, 1, 2};
  StepSlot& s = steps.slot(4, 0);
  try {
    steps.submit(s, StepBatch{&data, indices, 3, 0, 0});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("a batch of 3 samples (3 over the ranks) for a slot of 4 rows"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(TrainStep(model, sgd, TrainStepOptions().label_smoothing(1.0f)), InvalidArgument);
}

}  // namespace
}  // namespace dtnn
