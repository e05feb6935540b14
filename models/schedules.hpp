// SPDX-License-Identifier: Apache-2.0
// Learning-rate schedules and training callbacks for fit(): warm-up, step decay, reduce-on-plateau, cosine
// decay, early stopping, stop-at-loss; and the linear scaling rule for data-parallel runs.
//
// How the learning-rate schedules combine. The optimizer's learning rate is all they share, and each changes it
// in a way that commutes with the others, so any subset can be registered in any order:
//  - Per-step schedules (WarmUp, CosineDecay) are factors. Each owns one factor f(step) of the learning rate and,
//    before each step, swaps its previous factor for the new one: lr = (what the others set) x f(step). A
//    schedule notices another callback's change because the optimizer's lr is no longer the value it last set.
//  - Epoch-level reductions (StepDecay, ReduceLROnPlateau) multiply the current learning rate by their factor at an
//    epoch boundary, never taking it below their min_lr (PyDTNN's and Keras's rule).
// With base the optimizer's lr when training begins, the lr of a step is therefore
//    base x warm-up(step) x cosine(step) x (reductions so far).
// WarmUp + CosineDecay multiply; for the usual "ramp, then decay from the peak" (optax's warmup_cosine_decay,
// Hugging Face's cosine-with-warm-up) give CosineDecay .start() equal to the warm-up length, so that the cosine
// holds at 1 during the ramp and decays from the peak to min_lr at its total. WarmUp + StepDecay (or plateau)
// ramps up to whatever the reductions leave. A callback of one's own that changes the lr should likewise scale
// it rather than set an absolute value, or the per-step factors will be applied on top of that value.
// Every callback resets its state in on_train_begin, so one object can serve several fit() calls; the base is
// then the lr that the previous run left.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "models/training.hpp"

namespace dtnn {

struct Steps {
  std::int64_t count = 0;
};
struct Epochs {
  std::int64_t count = 0;
};

// A stretch of training in steps or in epochs; epochs become steps once fit() knows the steps per epoch.
class Duration {
 public:
  // Implicit, so that a call reads WarmUp(Epochs{2}, 0.25f).
  Duration(Steps s) : count_(s.count), in_epochs_(0) {}
  Duration(Epochs e) : count_(e.count), in_epochs_(1) {}
  [[nodiscard]] std::int64_t count() const { return count_; }
  [[nodiscard]] std::int64_t to_steps(std::int64_t steps_per_epoch) const;
  [[nodiscard]] std::string to_string() const;  // "100 steps", "2 epochs"

 private:
  std::int64_t count_;
  int in_epochs_;
};

namespace detail {

// One per-step schedule's factor of the learning rate (see the top of this file).
class LrFactor {
 public:
  void begin(const Optimizer& optimizer);
  void set(Optimizer& optimizer, double factor);
  [[nodiscard]] double factor() const { return factor_; }

 private:
  double others_ = 0.0;  // the learning rate without this factor
  double factor_ = 1.0;
  float written_ = 0.0f;
};

// A metric of the epoch records: "loss", "accuracy", "val_loss" or "val_accuracy"; a name containing "accuracy"
// is better when higher.
class Monitor {
 public:
  Monitor(const char* who, std::string metric, double min_delta);
  void reset();
  // The metric of the epoch that just ended; throws InvalidArgument for a val_ metric when fit() had no
  // validation set.
  [[nodiscard]] double read(const TrainState& state) const;
  // Better than the best so far by more than min_delta (NaN never is).
  [[nodiscard]] int improves(double value) const;
  void set_best(double value) { best_ = value; }
  [[nodiscard]] double best() const { return best_; }
  [[nodiscard]] const std::string& metric() const { return metric_; }
  [[nodiscard]] int higher_is_better() const { return higher_is_better_; }

 private:
  const char* who_;
  std::string metric_;
  double min_delta_;
  int higher_is_better_;
  double best_ = 0.0;
};

}  // namespace detail

// Linear ramp per step from start_factor x lr (first step) to lr (step `length`), then leaves the lr alone.
// PyDTNN ramps from lr / ranks over warm_up_epochs: WarmUp(Epochs{warm_up_epochs}, 1.0f / ranks).
class WarmUp : public Callback {
 public:
  WarmUp(Duration length, float start_factor);
  void on_train_begin(TrainState& state) override;
  void on_batch_begin(TrainState& state) override;

 private:
  Duration length_;
  float start_factor_;
  std::int64_t steps_ = 0;
  detail::LrFactor factor_;
};

// lr *= factor at the start of every `every_epochs`-th epoch (epochs every_epochs, 2 every_epochs, ...), never
// below min_lr (PyDTNN's reduce_lr_every_nepochs).
class StepDecay : public Callback {
 public:
  StepDecay(int every_epochs, float factor, float min_lr = 0.0f);
  void on_epoch_begin(TrainState& state) override;

 private:
  int every_;
  float factor_;
  float min_lr_;
};

struct ReduceLROnPlateauOptions {
  explicit ReduceLROnPlateauOptions(std::string monitor = "val_loss") : monitor_(std::move(monitor)) {}
  ReduceLROnPlateauOptions& factor(float f) { factor_ = f; return *this; }
  ReduceLROnPlateauOptions& patience(int epochs) { patience_ = epochs; return *this; }
  ReduceLROnPlateauOptions& min_lr(float lr) { min_lr_ = lr; return *this; }
  ReduceLROnPlateauOptions& min_delta(double d) { min_delta_ = d; return *this; }

  std::string monitor_;
  float factor_ = 0.1f;
  int patience_ = 5;
  float min_lr_ = 0.0f;
  double min_delta_ = 0.0;
};

// lr *= factor (not below min_lr) once `patience` epochs in a row have not improved the monitored metric by
// more than min_delta; the count then starts again (Keras's rule: patience 2 reduces after the second bad epoch).
class ReduceLROnPlateau : public Callback {
 public:
  explicit ReduceLROnPlateau(ReduceLROnPlateauOptions options);
  void on_train_begin(TrainState& state) override;
  void on_epoch_end(TrainState& state) override;

 private:
  ReduceLROnPlateauOptions options_;
  detail::Monitor monitor_;
  int wait_ = 0;
};

struct CosineDecayOptions {
  explicit CosineDecayOptions(Duration total) : total_(total) {}
  CosineDecayOptions& min_lr(float lr) { min_lr_ = lr; return *this; }
  // Holds the lr until this point, then decays from it (the warm-up length when combined with WarmUp).
  CosineDecayOptions& start(Duration d) { start_ = d; return *this; }

  Duration total_;
  float min_lr_ = 0.0f;
  Duration start_ = Steps{0};
};

// Per step t: lr = min_lr + (base - min_lr) (1 + cos(pi p)) / 2 with p = (t - start) / (total - start) clamped
// to [0, 1]; base is the lr when training begins, total counts from the first step (PyTorch's
// CosineAnnealingLR with T_max = total when start is 0), and the lr stays at min_lr after `total`.
class CosineDecay : public Callback {
 public:
  explicit CosineDecay(CosineDecayOptions options);
  void on_train_begin(TrainState& state) override;
  void on_batch_begin(TrainState& state) override;

 private:
  CosineDecayOptions options_;
  std::int64_t start_ = 0;
  std::int64_t total_ = 0;
  double min_factor_ = 0.0;
  detail::LrFactor factor_;
};

struct EarlyStoppingOptions {
  explicit EarlyStoppingOptions(std::string monitor = "val_loss") : monitor_(std::move(monitor)) {}
  EarlyStoppingOptions& patience(int epochs) { patience_ = epochs; return *this; }
  EarlyStoppingOptions& min_delta(double d) { min_delta_ = d; return *this; }
  EarlyStoppingOptions& restore_best(bool on) { restore_best_ = on; return *this; }

  std::string monitor_;
  int patience_ = 10;
  double min_delta_ = 0.0;
  bool restore_best_ = true;
};

// Stops training once `patience` epochs in a row have not improved the monitored metric by more than min_delta.
// With restore_best it keeps a host copy of the parameters and buffers (BatchNorm statistics) of the best epoch,
// and puts them back into the model when it stops, or when training ends after a later, worse epoch.
class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options);
  void on_train_begin(TrainState& state) override;
  void on_epoch_end(TrainState& state) override;
  void on_train_end(TrainState& state) override;

  [[nodiscard]] int best_epoch() const { return best_epoch_; }        // 1-based; 0 before any improvement
  [[nodiscard]] double best_value() const { return monitor_.best(); }
  [[nodiscard]] int stopped_epoch() const { return stopped_epoch_; }  // 1-based; 0 when it did not stop training
  [[nodiscard]] int restored() const { return restored_; }

 private:
  void snapshot(Sequential& model);
  void restore(Sequential& model);

  EarlyStoppingOptions options_;
  detail::Monitor monitor_;
  int wait_ = 0;
  int best_epoch_ = 0;
  int stopped_epoch_ = 0;
  int restored_ = 0;
  std::vector<std::pair<std::string, std::vector<float>>> best_weights_;
};

// Stops training after the first epoch whose monitored loss ("loss" or "val_loss") is at or below threshold.
class StopAtLoss : public Callback {
 public:
  explicit StopAtLoss(float threshold, std::string monitor = "loss");
  void on_train_begin(TrainState& state) override;
  void on_epoch_end(TrainState& state) override;
  [[nodiscard]] int stopped_epoch() const { return stopped_epoch_; }  // 1-based; 0 when it did not stop training

 private:
  float threshold_;
  detail::Monitor monitor_;
  int stopped_epoch_ = 0;
};

// Linear scaling rule (Goyal et al. 2017): with gradients averaged over `ranks` times the samples, the lr grows
// by the same factor. Pair it with WarmUp(..., 1.0f / ranks) to start from the single-rank lr as PyDTNN does.
float scale_lr_for_ranks(float lr, int ranks);

}  // namespace dtnn
