// SPDX-License-Identifier: Apache-2.0
// Learning-rate schedules and training callbacks: the lr sequence of each schedule and of combinations, driven
// through the callbacks in fit()'s order with made-up epoch metrics; early stopping and stop-at-loss decisions;
// option checks; and end-to-end runs of fit() checking the recorded lr and the restored best weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "io/dataset.hpp"
#include "layers/dense.hpp"
#include "layers/simple.hpp"
#include "models/optimizers.hpp"
#include "models/recipe.hpp"
#include "models/schedules.hpp"
#include "models/training.hpp"
#include "core/errors.hpp"

namespace dtnn {
namespace {

using Callbacks = std::vector<std::shared_ptr<Callback>>;
using Metrics = std::function<EpochRecord(int epoch)>;  // epoch 0-based; epoch and learning_rate are filled in

// Calls the callbacks as fit() does, without a model or tasks, and records the lr of every step.
struct Driver {
  Sequential model;
  Sgd optimizer;
  History history;
  std::vector<float> lrs;

  explicit Driver(float lr) : optimizer(SgdOptions(lr)) {}

  void run(const Callbacks& callbacks, int epochs, std::int64_t steps_per_epoch, const Metrics& metrics) {
    TrainState state{model, optimizer, history, 0, epochs, 0, steps_per_epoch, false, false, {}};
    for (const auto& c : callbacks) c->on_train_begin(state);
    std::int64_t step = 0;
    for (int e = 0; e < epochs && !state.stop; ++e) {
      state.epoch = e;
      for (const auto& c : callbacks) c->on_epoch_begin(state);
      for (std::int64_t s = 0; s < steps_per_epoch; ++s, ++step) {
        state.step = step;
        for (const auto& c : callbacks) c->on_batch_begin(state);
        lrs.push_back(optimizer.learning_rate());
      }
      EpochRecord r = metrics(e);
      r.epoch = e + 1;
      r.learning_rate = optimizer.learning_rate();
      history.epochs.push_back(r);
      for (const auto& c : callbacks) c->on_epoch_end(state);
    }
    for (const auto& c : callbacks) c->on_train_end(state);
  }

  void run(const Callbacks& callbacks, int epochs, std::int64_t steps_per_epoch) {
    run(callbacks, epochs, steps_per_epoch, [](int) { return EpochRecord{}; });
  }
};

Metrics losses(std::vector<double> values) {
  return [values](int e) {
    EpochRecord r;
    r.loss = values.at(static_cast<std::size_t>(e));
    return r;
  };
}

void expect_lrs(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6 * std::max(1.0, std::abs(want[i]))) << "step " << i;
  }
}

template <class E>
void expect_throw_with(const std::function<void()>& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "expected an exception with \"" << text << "\"";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

double cosine(double base, double min_lr, double progress) {
  progress = std::clamp(progress, 0.0, 1.0);
  return min_lr + (base - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

// ---------------------------------------------------------------------------------------------------------------
// Single schedules

TEST(WarmUpTest, RampsLinearlyPerStepThenHolds) {
  Driver d(0.8f);
  d.run({std::make_shared<WarmUp>(Steps{4}, 0.25f)}, 1, 7);
  expect_lrs(d.lrs, {0.2, 0.35, 0.5, 0.65, 0.8, 0.8, 0.8});
}

// --warmup-steps: the transformer recipe, a ramp over steps and then the cosine from the peak to min_lr at the end.
TEST(WarmUpTest, WarmUpInStepsThenCosineFromThePeak) {
  Driver d(0.8f);
  d.run(schedule_callbacks(ScheduleOptions().warmup_steps(4, 0.25f), 2), 2, 6);
  std::vector<double> want{0.2, 0.35, 0.5, 0.65};
  for (int t = 4; t < 12; ++t) want.push_back(cosine(0.8, 0.0, (t - 4) / 8.0));
  expect_lrs(d.lrs, want);
  expect_throw_with<InvalidArgument>(
      [] { (void)schedule_callbacks(ScheduleOptions().warmup(1.0, 0.1f).warmup_steps(4, 0.1f), 2); },
      "warm-up of 1 epochs and of 4 steps, expected one of them");
}

TEST(WarmUpTest, EpochsAreCountedInSteps) {
  Driver d(1.0f);
  d.run({std::make_shared<WarmUp>(Epochs{2}, 0.5f)}, 3, 3);
  std::vector<double> want;
  for (int t = 0; t < 9; ++t) want.push_back(t < 6 ? 0.5 + 0.5 * t / 6.0 : 1.0);
  expect_lrs(d.lrs, want);
  EXPECT_FLOAT_EQ(d.history.epochs[0].learning_rate, static_cast<float>(0.5 + 0.5 * 2 / 6.0));
}

TEST(WarmUpTest, PyDTNNsRampStartsFromTheSingleRankLr) {
  const float lr = 0.1f;
  const int ranks = 4;
  EXPECT_FLOAT_EQ(scale_lr_for_ranks(lr, ranks), 0.4f);
  Driver d(scale_lr_for_ranks(lr, ranks));
  d.run({std::make_shared<WarmUp>(Epochs{1}, 1.0f / ranks)}, 2, 5);
  EXPECT_FLOAT_EQ(d.lrs.front(), lr);
  EXPECT_FLOAT_EQ(d.lrs.back(), 0.4f);
}

TEST(StepDecayTest, DecaysEveryNEpochsNotBelowMinLr) {
  Driver d(1.0f);
  d.run({std::make_shared<StepDecay>(2, 0.5f, 0.3f)}, 7, 1);
  expect_lrs(d.lrs, {1, 1, 0.5, 0.5, 0.3, 0.3, 0.3});
}

TEST(CosineDecayTest, FollowsTheHalfCosineToMinLrAndStaysThere) {
  Driver d(2.0f);
  d.run({std::make_shared<CosineDecay>(CosineDecayOptions(Steps{8}).min_lr(0.2f))}, 1, 11);
  // PyTorch 1.13's CosineAnnealingLR(T_max=8, eta_min=0.2) from lr 2.0, steps 0 to 8 (printed to 9 digits); then
  // min_lr, where PyTorch's would rise again.
  expect_lrs(d.lrs, {2, 1.93149158, 1.7363961, 1.44441509, 1.1, 0.755584911, 0.463603897, 0.268508421, 0.2, 0.2, 0.2});
  EXPECT_NEAR(d.lrs[4], 1.1, 1e-6);  // half way: the mean of base and min_lr
}

TEST(CosineDecayTest, EpochsAreCountedInSteps) {
  Driver by_steps(1.0f);
  by_steps.run({std::make_shared<CosineDecay>(CosineDecayOptions(Steps{8}))}, 3, 4);
  Driver by_epochs(1.0f);
  by_epochs.run({std::make_shared<CosineDecay>(CosineDecayOptions(Epochs{2}))}, 3, 4);
  EXPECT_EQ(by_steps.lrs, by_epochs.lrs);
  EXPECT_EQ(by_epochs.lrs.back(), 0.0f);
}

TEST(ReduceLROnPlateauTest, ReducesAfterPatienceEpochsWithoutImprovement) {
  Driver d(1.0f);
  auto plateau = std::make_shared<ReduceLROnPlateau>(ReduceLROnPlateauOptions("loss").factor(0.5f).patience(2));
  d.run({plateau}, 9, 1, losses({1.0, 0.9, 0.95, 0.92, 0.91, 0.5, 0.6, 0.7, 0.8}));
  // Bad epochs 3 and 4 reduce before epoch 5; epoch 5 is bad, 6 improves, 7 and 8 reduce before epoch 9.
  expect_lrs(d.lrs, {1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25});
}

TEST(ReduceLROnPlateauTest, AccuracyIsBetterWhenHigherAndMinDeltaAndMinLrCount) {
  Driver d(1.0f);
  auto plateau = std::make_shared<ReduceLROnPlateau>(
      ReduceLROnPlateauOptions("val_accuracy").factor(0.1f).patience(1).min_delta(0.05).min_lr(0.05f));
  const std::vector<double> acc{0.5, 0.52, 0.6, 0.61, 0.7};
  d.run({plateau}, 5, 1, [&](int e) {
    EpochRecord r;
    r.val_loss = 1.0;
    r.val_accuracy = acc.at(static_cast<std::size_t>(e));
    return r;
  });
  // 0.52 and 0.61 do not beat the best by more than 0.05; the second reduction stops at min_lr.
  expect_lrs(d.lrs, {1, 1, 0.1, 0.1, 0.05});
}

// ---------------------------------------------------------------------------------------------------------------
// Combinations: the lr is base x the per-step factors x the reductions, whatever the order of the callbacks.

TEST(ScheduleCompositionTest, WarmUpThenCosineFromThePeakInEitherOrder) {
  const double base = 0.5;
  std::vector<double> want;
  for (int t = 0; t < 12; ++t) want.push_back(t < 3 ? base * (0.1 + 0.9 * t / 3.0) : cosine(base, 0.0, (t - 3) / 7.0));
  const auto opts = CosineDecayOptions(Steps{10}).start(Steps{3});
  Driver a(static_cast<float>(base));
  a.run({std::make_shared<WarmUp>(Steps{3}, 0.1f), std::make_shared<CosineDecay>(opts)}, 3, 4);
  expect_lrs(a.lrs, want);
  Driver b(static_cast<float>(base));
  b.run({std::make_shared<CosineDecay>(opts), std::make_shared<WarmUp>(Steps{3}, 0.1f)}, 3, 4);
  expect_lrs(b.lrs, want);
}

TEST(ScheduleCompositionTest, WarmUpAndCosineWithoutStartMultiply) {
  Driver d(1.0f);
  d.run({std::make_shared<CosineDecay>(CosineDecayOptions(Steps{8})), std::make_shared<WarmUp>(Steps{4}, 0.5f)}, 1,
        8);
  std::vector<double> want;
  for (int t = 0; t < 8; ++t) want.push_back((t < 4 ? 0.5 + 0.5 * t / 4.0 : 1.0) * cosine(1.0, 0.0, t / 8.0));
  expect_lrs(d.lrs, want);
}

TEST(ScheduleCompositionTest, WarmUpRampsToWhatStepDecayLeavesInEitherOrder) {
  std::vector<double> want;
  for (int t = 0; t < 10; ++t) {
    const int epoch = t / 2;
    want.push_back(std::pow(0.5, epoch) * (t < 4 ? 0.25 + 0.75 * t / 4.0 : 1.0));
  }
  Driver a(1.0f);
  a.run({std::make_shared<WarmUp>(Epochs{2}, 0.25f), std::make_shared<StepDecay>(1, 0.5f)}, 5, 2);
  expect_lrs(a.lrs, want);
  Driver b(1.0f);
  b.run({std::make_shared<StepDecay>(1, 0.5f), std::make_shared<WarmUp>(Epochs{2}, 0.25f)}, 5, 2);
  expect_lrs(b.lrs, want);
}

TEST(ScheduleCompositionTest, CosineScalesWhatThePlateauLeaves) {
  Driver d(1.0f);
  auto plateau = std::make_shared<ReduceLROnPlateau>(ReduceLROnPlateauOptions("loss").factor(0.5f).patience(1));
  d.run({plateau, std::make_shared<CosineDecay>(CosineDecayOptions(Steps{8}))}, 4, 2, losses({1, 2, 0.5, 0.4}));
  std::vector<double> want;
  for (int t = 0; t < 8; ++t) want.push_back((t < 4 ? 1.0 : 0.5) * cosine(1.0, 0.0, t / 8.0));
  expect_lrs(d.lrs, want);
}

TEST(ScheduleCompositionTest, ASecondRunStartsFromTheLrThePreviousOneLeft) {
  Driver d(1.0f);
  auto decay = std::make_shared<StepDecay>(1, 0.5f);
  auto warm = std::make_shared<WarmUp>(Steps{2}, 0.5f);
  d.run({decay, warm}, 2, 2);
  d.run({decay, warm}, 2, 2);
  expect_lrs(d.lrs, {0.5, 0.75, 0.5, 0.5, 0.25, 0.375, 0.25, 0.25});
}

// ---------------------------------------------------------------------------------------------------------------
// Stopping

TEST(EarlyStoppingTest, StopsAfterPatienceEpochsWithoutImprovement) {
  Driver d(1.0f);
  auto es = std::make_shared<EarlyStopping>(EarlyStoppingOptions("loss").patience(2));
  d.run({es}, 10, 1, losses({1.0, 0.8, 0.85, 0.9, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2}));
  EXPECT_EQ(d.history.epochs.size(), 4u);
  EXPECT_EQ(es->best_epoch(), 2);
  EXPECT_EQ(es->stopped_epoch(), 4);
  EXPECT_DOUBLE_EQ(es->best_value(), 0.8);
}

TEST(EarlyStoppingTest, MinDeltaAndHigherIsBetterForAccuracy) {
  Driver d(1.0f);
  auto es = std::make_shared<EarlyStopping>(EarlyStoppingOptions("accuracy").patience(1).min_delta(0.1));
  const std::vector<double> acc{0.3, 0.5, 0.55, 0.9};
  d.run({es}, 4, 1, [&](int e) {
    EpochRecord r;
    r.accuracy = acc.at(static_cast<std::size_t>(e));
    return r;
  });
  EXPECT_EQ(es->stopped_epoch(), 3);
  EXPECT_EQ(es->best_epoch(), 2);
}

TEST(EarlyStoppingTest, AValidationMetricWithoutAValidationSetIsAnError) {
  Driver d(1.0f);
  auto es = std::make_shared<EarlyStopping>(EarlyStoppingOptions("val_loss"));
  expect_throw_with<InvalidArgument>(
      [&] { d.run({es}, 2, 1, losses({1.0, 0.5})); },
      "EarlyStopping: monitor=val_loss has no value at epoch 1, expected fit() to be given a validation set");
}

TEST(EarlyStoppingTest, ANanValidationLossIsNoImprovement) {
  Driver d(1.0f);
  auto es = std::make_shared<EarlyStopping>(EarlyStoppingOptions("val_loss").patience(1));
  const std::vector<double> val{1.0, NAN, 0.5};
  d.run({es}, 3, 1, [&](int e) {
    EpochRecord r;
    r.val_loss = val.at(static_cast<std::size_t>(e));
    r.val_accuracy = 0.5;
    return r;
  });
  EXPECT_EQ(es->stopped_epoch(), 2);
}

TEST(StopAtLossTest, StopsAtTheFirstEpochAtOrBelowTheThreshold) {
  Driver d(1.0f);
  auto stop = std::make_shared<StopAtLoss>(0.5f);
  d.run({stop}, 6, 1, losses({1.0, 0.6, 0.5, 0.4, 0.3, 0.2}));
  EXPECT_EQ(d.history.epochs.size(), 3u);
  EXPECT_EQ(stop->stopped_epoch(), 3);
}

TEST(StopAtLossTest, WatchesTheValidationLossWhenAsked) {
  Driver d(1.0f);
  auto stop = std::make_shared<StopAtLoss>(0.5f, "val_loss");
  d.run({stop}, 4, 1, [](int e) {
    EpochRecord r;
    r.loss = 0.1;
    r.val_loss = 1.0 - 0.3 * e;
    r.val_accuracy = 0.5;
    return r;
  });
  EXPECT_EQ(stop->stopped_epoch(), 3);
}

// ---------------------------------------------------------------------------------------------------------------
// Option checks

TEST(ScheduleOptionsTest, BadValuesAreRejectedWithTheRule) {
  using F = std::function<void()>;
  const std::vector<std::pair<F, std::string>> cases{
      {[] { WarmUp(Steps{0}, 0.5f); }, "WarmUp: length 0 steps, expected at least 1"},
      {[] { WarmUp(Epochs{2}, 0.0f); }, "WarmUp: start_factor=0, expected 0 < start_factor <= 1"},
      {[] { WarmUp(Epochs{2}, 1.5f); }, "WarmUp: start_factor=1.5, expected 0 < start_factor <= 1"},
      {[] { StepDecay(0, 0.5f); }, "StepDecay: every_epochs=0, expected at least 1"},
      {[] { StepDecay(2, 1.0f); }, "StepDecay: factor=1, expected 0 < factor < 1"},
      {[] { StepDecay(2, 0.5f, -1.0f); }, "StepDecay: min_lr=-1, expected a finite value >= 0"},
      {[] { ReduceLROnPlateau(ReduceLROnPlateauOptions("val_acc")); },
       "ReduceLROnPlateau: monitor='val_acc', expected one of loss, accuracy, val_loss, val_accuracy"},
      {[] { ReduceLROnPlateau(ReduceLROnPlateauOptions().factor(0.0f)); },
       "ReduceLROnPlateau: factor=0, expected 0 < factor < 1"},
      {[] { ReduceLROnPlateau(ReduceLROnPlateauOptions().patience(-1)); },
       "ReduceLROnPlateau: patience=-1, expected a number of epochs >= 0"},
      {[] { ReduceLROnPlateau(ReduceLROnPlateauOptions().min_delta(-0.1)); },
       "ReduceLROnPlateau: min_delta=-0.1, expected a finite value >= 0"},
      {[] { CosineDecay(CosineDecayOptions(Epochs{0})); }, "CosineDecay: total 0 epochs, expected at least 1"},
      {[] { CosineDecay(CosineDecayOptions(Steps{10}).min_lr(NAN)); },
       "CosineDecay: min_lr=nan, expected a finite value >= 0"},
      {[] { EarlyStopping(EarlyStoppingOptions("f1")); },
       "EarlyStopping: monitor='f1', expected one of loss, accuracy, val_loss, val_accuracy"},
      {[] { StopAtLoss(0.1f, "accuracy"); }, "StopAtLoss: monitor='accuracy', expected loss or val_loss"},
      {[] { StopAtLoss(NAN); }, "StopAtLoss: threshold=nan, expected a finite value"},
      {[] { (void)scale_lr_for_ranks(0.1f, 0); }, "scale_lr_for_ranks: ranks=0, expected at least 1"},
  };
  for (const auto& [f, text] : cases) expect_throw_with<InvalidArgument>(f, text);
}

TEST(ScheduleOptionsTest, CosineChecksAgainstTheRunWhenTrainingBegins) {
  Driver d(0.1f);
  expect_throw_with<InvalidArgument>(
      [&] { d.run({std::make_shared<CosineDecay>(CosineDecayOptions(Epochs{1}).start(Steps{4}))}, 1, 4); },
      "CosineDecay: start 4 steps (4 steps) not before total 1 epoch (4 steps), expected start < total");
  expect_throw_with<InvalidArgument>(
      [&] { d.run({std::make_shared<CosineDecay>(CosineDecayOptions(Steps{4}).min_lr(0.5f))}, 1, 4); },
      "CosineDecay: min_lr=0.5 above the optimizer's lr=0.1, expected min_lr <= lr");
}

// ---------------------------------------------------------------------------------------------------------------
// Through fit()

Sequential tiny_mlp() {
  Sequential m;
  m.add<Flatten>().add<Dense>(DenseOptions(16, 12)).add<ReLU>().add<Dense>(DenseOptions(12, 3));
  return m;
}

// Records the lr of every step, and the weights at the end of every epoch.
class Recorder : public Callback {
 public:
  void on_batch_begin(TrainState& state) override { lrs.push_back(state.optimizer.learning_rate()); }
  void on_epoch_end(TrainState& state) override {
    std::vector<std::vector<float>> w;
    for (const NamedParameter& p : state.model.named_parameters()) w.push_back(p.parameter->value.to_vector());
    weights.push_back(std::move(w));
  }
  std::vector<float> lrs;
  std::vector<std::vector<std::vector<float>>> weights;  // [epoch][parameter][value]
};

// From a given epoch on, trains with a learning rate that wrecks the model, so that the metrics get worse.
class Sabotage : public Callback {
 public:
  explicit Sabotage(int from_epoch) : from_(from_epoch) {}
  void on_epoch_begin(TrainState& state) override {
    if (state.epoch == from_) state.optimizer.set_learning_rate(50.0f);
  }

 private:
  int from_;
};

using Weights = std::vector<std::vector<float>>;

Weights weights_of(Sequential& model) {
  Weights w;
  for (const NamedParameter& p : model.named_parameters()) w.push_back(p.parameter->value.to_vector());
  return w;
}

// Bit for bit, so that weights wrecked into NaN still compare equal to themselves.
bool same_bits(const Weights& a, const Weights& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

TEST(ScheduleFitTest, TheRecordedLrOfEachEpochFollowsTheSchedules) {
  const io::Dataset data = io::synthetic_dataset(32, 1, 4, 4, 3, 7);
  Sequential model = tiny_mlp();
  model.build({1, 4, 4}, 3);
  Sgd sgd(SgdOptions(0.1f).momentum(0.9f));
  auto recorder = std::make_shared<Recorder>();
  const History h = fit(model, sgd, data,
                        FitOptions().epochs(4).batch_size(8).steps_per_epoch(3).verbose(false)
                            .callback(std::make_shared<WarmUp>(Epochs{1}, 0.5f))
                            .callback(std::make_shared<StepDecay>(1, 0.5f))
                            .callback(recorder));
  ASSERT_EQ(h.epochs.size(), 4u);
  // The record holds the lr of the epoch's last step.
  const double want[] = {0.1 * (0.5 + 0.5 * 2 / 3.0), 0.05, 0.025, 0.0125};
  for (int e = 0; e < 4; ++e) EXPECT_NEAR(h.epochs[e].learning_rate, want[e], 1e-7) << "epoch " << e + 1;
  expect_lrs(recorder->lrs, {0.05, 0.1 * (0.5 + 0.5 / 3.0), 0.1 * (0.5 + 1.0 / 3.0), 0.05, 0.05, 0.05, 0.025,
                             0.025, 0.025, 0.0125, 0.0125, 0.0125});
}

TEST(ScheduleFitTest, CosineDecayPerStepAcrossEpochs) {
  const io::Dataset data = io::synthetic_dataset(32, 1, 4, 4, 3, 7);
  Sequential model = tiny_mlp();
  model.build({1, 4, 4}, 3);
  Sgd sgd(SgdOptions(0.1f));
  const History h =
      fit(model, sgd, data,
          FitOptions().epochs(3).batch_size(8).steps_per_epoch(4).verbose(false)
              .callback(std::make_shared<CosineDecay>(CosineDecayOptions(Epochs{3}).min_lr(0.01f))));
  for (int e = 0; e < 3; ++e) {
    EXPECT_NEAR(h.epochs[e].learning_rate, cosine(0.1, 0.01, (4 * e + 3) / 12.0), 1e-7) << "epoch " << e + 1;
  }
}

TEST(EarlyStoppingFitTest, StopsAndRestoresTheWeightsOfTheBestEpoch) {
  const io::Dataset train = io::synthetic_dataset(32, 1, 4, 4, 3, 7);
  const io::Dataset val = io::synthetic_dataset(32, 1, 4, 4, 3, 8);
  Sequential model = tiny_mlp();
  model.build({1, 4, 4}, 3);
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  auto recorder = std::make_shared<Recorder>();
  auto es = std::make_shared<EarlyStopping>(EarlyStoppingOptions("val_loss").patience(2));
  const History h = fit(model, sgd, train,
                        FitOptions().epochs(12).batch_size(8).verbose(false)
                            .callback(std::make_shared<Sabotage>(3)).callback(recorder).callback(es),
                        &val);
  ASSERT_LT(h.epochs.size(), 12u);
  EXPECT_EQ(es->stopped_epoch(), static_cast<int>(h.epochs.size()));
  ASSERT_GE(es->best_epoch(), 1);
  ASSERT_LT(es->best_epoch(), es->stopped_epoch());
  EXPECT_TRUE(es->restored());
  const auto restored = weights_of(model);
  EXPECT_TRUE(same_bits(restored, recorder->weights.at(static_cast<std::size_t>(es->best_epoch() - 1))));
  EXPECT_FALSE(same_bits(restored, recorder->weights.back()));
  // The restored model scores the best epoch's validation loss again.
  EXPECT_NEAR(evaluate(model, val).loss, h.epochs.at(static_cast<std::size_t>(es->best_epoch() - 1)).val_loss, 1e-5);
}

TEST(EarlyStoppingFitTest, RestoresTheBestWeightsAtTheEndWhenItDidNotStop) {
  const io::Dataset train = io::synthetic_dataset(32, 1, 4, 4, 3, 7);
  Sequential model = tiny_mlp();
  model.build({1, 4, 4}, 3);
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  auto recorder = std::make_shared<Recorder>();
  auto es = std::make_shared<EarlyStopping>(EarlyStoppingOptions("loss").patience(100));
  const History h = fit(model, sgd, train,
                        FitOptions().epochs(5).batch_size(8).verbose(false)
                            .callback(std::make_shared<Sabotage>(3)).callback(recorder).callback(es));
  ASSERT_EQ(h.epochs.size(), 5u);
  EXPECT_EQ(es->stopped_epoch(), 0);
  ASSERT_GE(es->best_epoch(), 1);
  ASSERT_LE(es->best_epoch(), 3);
  EXPECT_TRUE(es->restored());
  EXPECT_TRUE(same_bits(weights_of(model), recorder->weights.at(static_cast<std::size_t>(es->best_epoch() - 1))));
}

TEST(EarlyStoppingFitTest, WithoutRestoreBestTheLastWeightsStay) {
  const io::Dataset train = io::synthetic_dataset(32, 1, 4, 4, 3, 7);
  Sequential model = tiny_mlp();
  model.build({1, 4, 4}, 3);
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  auto recorder = std::make_shared<Recorder>();
  auto es = std::make_shared<EarlyStopping>(EarlyStoppingOptions("loss").patience(100).restore_best(false));
  fit(model, sgd, train,
      FitOptions().epochs(5).batch_size(8).verbose(false).callback(std::make_shared<Sabotage>(3)).callback(recorder)
          .callback(es));
  EXPECT_FALSE(es->restored());
  EXPECT_TRUE(same_bits(weights_of(model), recorder->weights.back()));
}

}  // namespace
}  // namespace dtnn
