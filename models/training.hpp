// SPDX-License-Identifier: Apache-2.0
// The training loop: epochs of steps, each step one task graph submitted by TrainStep (models/train_step.hpp);
// the driver submits step k+1 without waiting for step k, keeping at most two steps in flight (two sets of
// activation buffers), and waits only for the metrics it reports.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "codelets/kinds.hpp"
#include "core/errors.hpp"
#include "core/augment_options.hpp"
#include "io/dataset.hpp"
#include "models/data_parallel.hpp"
#include "models/optimizer.hpp"
#include "models/sequential.hpp"

namespace dtnn {

struct EpochRecord {
  int epoch = 0;
  double loss = 0.0;
  double accuracy = 0.0;
  double top5_accuracy = 0.0;
  double mse = 0.0;  // mean over samples and classes of (probability - target)^2
  double mae = 0.0;  // mean over samples and classes of |probability - target|
  double val_loss = std::numeric_limits<double>::quiet_NaN();
  double val_accuracy = std::numeric_limits<double>::quiet_NaN();
  double seconds = 0.0;
  std::int64_t images = 0;
  // A token model's target tokens trained on (images are its windows); 0 for a classifier. With tokens, loss is the
  // mean per token, accuracy the next-token accuracy, and the metrics users quote follow from the loss.
  std::int64_t tokens = 0;
  float learning_rate = 0.0f;
  [[nodiscard]] double images_per_second() const { return seconds > 0 ? images / seconds : 0.0; }
  [[nodiscard]] double tokens_per_second() const { return seconds > 0 ? tokens / seconds : 0.0; }
  [[nodiscard]] double perplexity() const { return std::exp(loss); }
  [[nodiscard]] double bits_per_char() const { return loss / std::log(2.0); }  // per byte of a byte-level corpus
  [[nodiscard]] double val_perplexity() const { return std::exp(val_loss); }
  [[nodiscard]] double val_bits_per_char() const { return val_loss / std::log(2.0); }
};

struct History {
  std::vector<EpochRecord> epochs;
  // Set when FitOptions::stop_when ended training at a step boundary: the first step not run (where a resumed run
  // starts), and the poll's value (a signal number, say). -1 and 0 when training ran to its end.
  std::int64_t stopped_at_step = -1;
  int stop_reason = 0;
  [[nodiscard]] double train_seconds() const;
  [[nodiscard]] std::int64_t images() const;
  [[nodiscard]] double images_per_second() const;
  // Throughput without the first epoch (warm-up, performance-model calibration); NaN with one epoch.
  [[nodiscard]] double images_per_second_after_first() const;
  // A token model's (EpochRecord::tokens): false for a classifier.
  [[nodiscard]] bool tokens() const { return !epochs.empty() && epochs.front().tokens > 0; }
  [[nodiscard]] double tokens_per_second() const;
};

struct TrainState;

// Hooks into fit(): learning-rate schedules, early stopping, checkpoints. Called on the driver thread.
class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(TrainState& state) {}
  virtual void on_epoch_begin(TrainState& state) {}
  // Before the step's tasks are submitted: the place to set the learning rate of this step.
  virtual void on_batch_begin(TrainState& state) {}
  // After the epoch's metrics (and validation metrics) are known; may set state.stop.
  virtual void on_epoch_end(TrainState& state) {}
  virtual void on_train_end(TrainState& state) {}
};

struct TrainState {
  Sequential& model;
  Optimizer& optimizer;
  History& history;           // epochs finished so far (on_epoch_end: the last one is the epoch that ended)
  int epoch = 0;              // 0-based
  int epochs = 0;
  std::int64_t step = 0;      // global step index (0-based), the one about to run in on_batch_begin
  std::int64_t steps_per_epoch = 0;
  bool stop = false;          // set to end training after this epoch
  // on_train_end: training ended at a step boundary at FitOptions::stop_when's request (History::stopped_at_step).
  bool stopped_early = false;
  // Waits for the steps in flight and reads their statistics: a step whose loss is not finite throws NonFiniteLoss
  // here. For a callback about to save the weights (every rank calls it at the same point: it agrees over the
  // ranks).
  std::function<void()> settle;
};

// A step whose loss is not finite (NaN or infinite), which fit() refuses to train past: with FitOptions::
// check_finite (the default) it waits for the steps in flight and throws this, every rank of a data-parallel run
// at the same step. The weights then hold that step's update (and perhaps the next one's): nothing should be
// saved from them.
class NonFiniteLoss : public Error {
 public:
  NonFiniteLoss(std::int64_t step, double loss, int rank);
  [[nodiscard]] std::int64_t step() const { return step_; }  // the global step (0-based)
  [[nodiscard]] int rank() const { return rank_; }            // the lowest rank that saw it

 private:
  std::int64_t step_;
  int rank_;
};

struct FitOptions {
  FitOptions& epochs(int n) { epochs_ = n; return *this; }
  FitOptions& batch_size(std::int64_t n) { batch_size_ = n; return *this; }
  FitOptions& tiles(int n) { tiles_ = n; return *this; }
  FitOptions& seed(std::uint64_t s) { seed_ = s; return *this; }
  FitOptions& shuffle(bool on) { shuffle_ = on; return *this; }
  FitOptions& verbose(bool on) { verbose_ = on; return *this; }
  // 0: the whole training set each epoch; otherwise this many steps (the data wraps around).
  FitOptions& steps_per_epoch(std::int64_t n) { steps_per_epoch_ = n; return *this; }
  FitOptions& callback(std::shared_ptr<Callback> c) { callbacks_.push_back(std::move(c)); return *this; }
  // batch_size is then the batch of each rank; the global batch is batch_size x ranks.
  FitOptions& data_parallel(DataParallel dp) { data_parallel_ = dp; return *this; }
  // Random horizontal flips and padded crops of the training samples (seeded by seed, epoch and sample).
  FitOptions& augment(AugmentOptions a) { augment_ = a; return *this; }
  FitOptions& loss(codelets::LossKind k) { loss_ = k; return *this; }
  // Targets (1 - s) * one_hot + s / classes (categorical cross-entropy), in [0, 1).
  FitOptions& label_smoothing(float s) { label_smoothing_ = s; return *this; }
  // Resume at this global step (from a checkpoint): the epochs and steps before it are skipped, the data order
  // and every seeded draw continue as in an uninterrupted run.
  FitOptions& initial_step(std::int64_t step) { initial_step_ = step; return *this; }
  // Storage of the activations and gradients of the training steps and of evaluation (TrainStepOptions::activations).
  FitOptions& activations(Storage s) { activations_ = s; return *this; }
  // Polled on the driver thread before each step is submitted, with that step's global index: a non-zero value
  // (e.g. the signal a handler recorded) ends training at that step boundary once the steps in flight are done.
  // Under data parallelism the ranks agree on it (one small collective a step), so that a request on one rank stops
  // every rank at the same step. History::stopped_at_step and TrainState::stopped_early tell the callbacks.
  FitOptions& stop_when(std::function<int(std::int64_t step)> poll) { stop_when_ = std::move(poll); return *this; }
  // true (default): a step whose loss is not finite ends training with NonFiniteLoss (see there).
  FitOptions& check_finite(bool on) { check_finite_ = on; return *this; }
  // > 0: clip the gradients to this global 2-norm before each update (TrainStepOptions::clip_grad_norm).
  FitOptions& clip_grad_norm(float max_norm) { clip_grad_norm_ = max_norm; return *this; }

  int epochs_ = 1;
  std::int64_t batch_size_ = 64;
  int tiles_ = 2;
  std::uint64_t seed_ = 0;
  bool shuffle_ = true;
  bool verbose_ = true;
  std::int64_t steps_per_epoch_ = 0;
  std::vector<std::shared_ptr<Callback>> callbacks_;
  DataParallel data_parallel_;
  AugmentOptions augment_;
  codelets::LossKind loss_ = codelets::LossKind::kCategoricalCrossEntropy;
  float label_smoothing_ = 0.0f;
  std::int64_t initial_step_ = 0;
  Storage activations_ = Storage::kTransient;
  std::function<int(std::int64_t)> stop_when_;
  bool check_finite_ = true;
  float clip_grad_norm_ = 0.0f;
};

struct EvalOptions {
  EvalOptions& batch_size(std::int64_t n) { batch_size_ = n; return *this; }
  EvalOptions& loss(codelets::LossKind k) { loss_ = k; return *this; }
  // predict(): true returns the raw logits instead of the probabilities.
  EvalOptions& logits(bool on) { logits_ = on; return *this; }
  EvalOptions& tiles(int n) { tiles_ = n; return *this; }
  // Each rank evaluates its share of the data; the results are summed over the ranks.
  EvalOptions& mpi(const runtime::Mpi* m) { mpi_ = m; return *this; }
  // kTransient (default): each activation is released after the next layer read it; kOwned: all kept (reference).
  EvalOptions& activations(Storage s) { activations_ = s; return *this; }
  std::int64_t batch_size_ = 256;
  int tiles_ = 2;
  const runtime::Mpi* mpi_ = nullptr;
  codelets::LossKind loss_ = codelets::LossKind::kCategoricalCrossEntropy;
  bool logits_ = false;
  Storage activations_ = Storage::kTransient;
};

struct EvalResult {
  double loss = 0.0;
  double accuracy = 0.0;
  double top5_accuracy = 0.0;
  double mse = 0.0;
  double mae = 0.0;
  std::int64_t samples = 0;
  // A token model's target tokens (samples are its windows); 0 for a classifier. loss is then per token, accuracy
  // the next-token accuracy.
  std::int64_t tokens = 0;
  double seconds = 0.0;
  [[nodiscard]] double perplexity() const { return std::exp(loss); }
  [[nodiscard]] double bits_per_char() const { return loss / std::log(2.0); }
};

// The rows of `train` that this rank trains at global step `step` under `options` (those fit submits), in order,
// and the epoch of that step.
struct StepRows {
  std::vector<std::int64_t> rows;
  std::int64_t epoch = 0;
};
StepRows step_rows(const io::Dataset& train, const FitOptions& options, std::int64_t step);

// Trains with the loss of the options (softmax + categorical cross-entropy by default; a model of token ids trains on
// a token dataset with the token cross-entropy, its mean over the target tokens). validation may be null.
History fit(Sequential& model, Optimizer& optimizer, const io::Dataset& train, const FitOptions& options,
            const io::Dataset* validation = nullptr);
EvalResult evaluate(Sequential& model, const io::Dataset& data, const EvalOptions& options = {});
// Class probabilities (softmax of the logits over their last axis; the logits themselves with options.logits(true)),
// [data.size(), classes] row-major; a token model's [data.size(), sequence, vocabulary].
std::vector<float> predict(Sequential& model, const io::Dataset& data, const EvalOptions& options = {});

}  // namespace dtnn
