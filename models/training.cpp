// SPDX-License-Identifier: Apache-2.0
#include "models/training.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <memory>
#include <numeric>

#include <fmt/format.h>

#include "codelets/loss.hpp"
#include "models/progress.hpp"
#include "models/train_step.hpp"
#include "runtime/engine.hpp"
#include "runtime/mpi.hpp"
#include "runtime/sched.hpp"
#include "core/errors.hpp"

namespace dtnn {
namespace {

using Clock = std::chrono::steady_clock;

runtime::Engine& running_engine(const char* who) {
  runtime::Engine* engine = runtime::Engine::current();
  if (engine == nullptr) {
    throw InvalidArgument(fmt::format("{}: no runtime::Engine is running, expected one to be created first", who));
  }
  return *engine;
}

// Sample order of one epoch: `steps` batches (the last may be short when steps_per_epoch is 0), drawn from
// seeded permutations of the dataset that wrap around when more steps are asked than the data has.
std::vector<std::int64_t> epoch_order(std::int64_t n, std::int64_t batch, std::int64_t steps_per_epoch,
                                      int shuffle, std::uint64_t seed, int epoch) {
  const std::int64_t total = steps_per_epoch > 0 ? steps_per_epoch * batch : n;
  std::vector<std::int64_t> order;
  order.reserve(static_cast<std::size_t>(total));
  Rng rng(seed ^ (0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(epoch + 1)));
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  while (static_cast<std::int64_t>(order.size()) < total) {
    std::iota(perm.begin(), perm.end(), 0);
    if (shuffle) {
      for (std::int64_t i = n - 1; i > 0; --i) {
        std::swap(perm[static_cast<std::size_t>(i)], perm[rng.below(static_cast<std::uint64_t>(i + 1))]);
      }
    }
    const auto take = std::min<std::int64_t>(n, total - static_cast<std::int64_t>(order.size()));
    order.insert(order.end(), perm.begin(), perm.begin() + take);
  }
  return order;
}

}  // namespace

double History::train_seconds() const {
  double s = 0.0;
  for (const auto& e : epochs) s += e.seconds;
  return s;
}

std::int64_t History::images() const {
  std::int64_t n = 0;
  for (const auto& e : epochs) n += e.images;
  return n;
}

double History::images_per_second() const {
  const double s = train_seconds();
  return s > 0 ? static_cast<double>(images()) / s : 0.0;
}

double History::tokens_per_second() const {
  std::int64_t n = 0;
  for (const auto& e : epochs) n += e.tokens;
  const double s = train_seconds();
  return s > 0 ? static_cast<double>(n) / s : 0.0;
}

double History::images_per_second_after_first() const {
  if (epochs.size() < 2) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  double s = 0.0;
  std::int64_t n = 0;
  for (std::size_t i = 1; i < epochs.size(); ++i) {
    s += epochs[i].seconds;
    n += epochs[i].images;
  }
  return s > 0 ? static_cast<double>(n) / s : 0.0;
}

namespace {

// The steps of an epoch and the rows of this rank, for a training set and the options (rejecting what trains on
// nothing).
struct EpochPlan {
  int world = 1;
  int rank = 0;
  std::int64_t global_batch = 0;
  std::int64_t steps = 0;  // per epoch
};

EpochPlan plan_epochs(const io::Dataset& train, const FitOptions& o) {
  if (o.epochs_ < 1 || o.batch_size_ < 1 || o.tiles_ < 1 || o.steps_per_epoch_ < 0) {
    throw InvalidArgument(fmt::format("fit: epochs={} batch_size={} tiles={} steps_per_epoch={}, expected epochs, "
                                      "batch size and tiles >= 1 and steps per epoch >= 0",
                                      o.epochs_, o.batch_size_, o.tiles_, o.steps_per_epoch_));
  }
  const DataParallel& dp = o.data_parallel_;
  EpochPlan plan;
  plan.world = dp.mpi != nullptr ? dp.mpi->size() : 1;
  plan.rank = dp.mpi != nullptr ? dp.mpi->rank() : 0;
  const std::int64_t n = train.size();
  // Every rank walks the same seeded order of global batches and takes its rows of each one.
  plan.global_batch = o.batch_size_ * plan.world;
  plan.steps = o.steps_per_epoch_ > 0 ? o.steps_per_epoch_ : (n + plan.global_batch - 1) / plan.global_batch;
  const std::int64_t last_rows = o.steps_per_epoch_ > 0 ? plan.global_batch : n - (plan.steps - 1) * plan.global_batch;
  if (plan.steps > 1 && last_rows < plan.global_batch && (dp.drop_last || last_rows < plan.world)) {
    --plan.steps;  // a last global batch too small to give every rank a row (or dropped by request)
  }
  if (plan.steps < 1) {
    throw InvalidArgument(fmt::format("fit: dataset {} has {} samples, expected at least one global batch of {} "
                                      "({} per rank x {} ranks)",
                                      train.name, n, plan.global_batch, o.batch_size_, plan.world));
  }
  if (o.initial_step_ < 0 || o.initial_step_ > plan.steps * o.epochs_) {
    throw InvalidArgument(fmt::format("fit: initial step {}, expected 0..{} ({} epochs of {} steps)", o.initial_step_,
                                      plan.steps * o.epochs_, o.epochs_, plan.steps));
  }
  return plan;
}

TrainStepOptions step_options(const FitOptions& o) {
  return TrainStepOptions()
      .tiles(o.tiles_)
      .loss(o.loss_)
      .label_smoothing(o.label_smoothing_)
      .augment(o.augment_)
      .seed(o.seed_)
      .data_parallel(o.data_parallel_)
      .activations(o.activations_)
      .clip_grad_norm(o.clip_grad_norm_);
}

// An epoch's record from its statistics (summed over the ranks) and, with a validation set, its evaluation.
EpochRecord finish_epoch(Sequential& model, const Optimizer& optimizer, const FitOptions& o, int epoch,
                         double seconds, const StepStats& stats, const io::Dataset* validation) {
  EpochRecord record;
  record.epoch = epoch + 1;
  record.seconds = seconds;
  record.images = stats.rows;
  record.tokens = stats.tokens ? static_cast<std::int64_t>(stats.sums[kCounted]) : 0;
  record.loss = stats.mean(kLossSum);
  record.accuracy = stats.mean(kCorrect);
  record.top5_accuracy = stats.mean(kTop5Correct);
  record.mse = stats.mean(kSquaredError);
  record.mae = stats.mean(kAbsoluteError);
  record.learning_rate = optimizer.learning_rate();
  if (validation != nullptr) {
    const EvalResult v = evaluate(model, *validation,
                                  EvalOptions()
                                      .batch_size(std::max<std::int64_t>(o.batch_size_, 256))
                                      .tiles(o.tiles_)
                                      .mpi(o.data_parallel_.mpi)
                                      .loss(o.loss_)
                                      .activations(o.activations_));
    record.val_loss = v.loss;
    record.val_accuracy = v.accuracy;
  }
  return record;
}

// What the ranks agree on at a step boundary: the first step whose loss was not finite (on the lowest rank that saw
// one), and the lowest rank's stop request.
struct StepVerdict {
  std::int64_t nonfinite_step = -1;
  int nonfinite_rank = -1;
  double nonfinite_loss = 0.0;  // NaN, +inf or -inf
  int stop = 0;
};

// One value a rank: (nonfinite step + 1) << 10 | loss class << 8 | stop (a signal number fits 8 bits).
StepVerdict agree(const runtime::Mpi* mpi, int rank, std::int64_t nonfinite_step, double loss, int stop) {
  if (mpi == nullptr || !mpi->active()) return {nonfinite_step, nonfinite_step >= 0 ? rank : -1, loss, stop};
  const std::uint64_t kind = std::isnan(loss) ? 1 : loss > 0 ? 2 : 3;
  const std::uint64_t mine = (nonfinite_step >= 0 ? (static_cast<std::uint64_t>(nonfinite_step) + 1) << 10 | kind << 8
                                                  : 0) |
                             static_cast<std::uint64_t>(stop & 0xff);
  const std::vector<std::uint64_t> all = mpi->all_gather(mine, "agreement on the step's stop and loss");
  StepVerdict v;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const std::uint64_t step_plus_one = all[r] >> 10;
    if (step_plus_one > 0 && (v.nonfinite_step < 0 || static_cast<std::int64_t>(step_plus_one - 1) < v.nonfinite_step)) {
      v.nonfinite_step = static_cast<std::int64_t>(step_plus_one - 1);
      v.nonfinite_rank = static_cast<int>(r);
      const std::uint64_t k = (all[r] >> 8) & 3;
      v.nonfinite_loss = k == 1 ? std::nan("") : k == 2 ? HUGE_VAL : -HUGE_VAL;
    }
    if (v.stop == 0) v.stop = static_cast<int>(all[r] & 0xff);
  }
  return v;
}

}  // namespace

StepRows step_rows(const io::Dataset& train, const FitOptions& o, std::int64_t step) {
  const EpochPlan plan = plan_epochs(train, o);
  const std::int64_t epoch = step / plan.steps;
  const std::vector<std::int64_t> order = epoch_order(train.size(), plan.global_batch, o.steps_per_epoch_, o.shuffle_,
                                                      o.seed_, static_cast<int>(epoch));
  const std::int64_t first = (step - epoch * plan.steps) * plan.global_batch;
  const std::int64_t global_rows =
      std::min<std::int64_t>(plan.global_batch, static_cast<std::int64_t>(order.size()) - first);
  const TileRange mine = split_rows(global_rows, plan.world)[static_cast<std::size_t>(plan.rank)];
  const auto begin = order.begin() + first + mine.begin;
  return {{begin, begin + mine.count}, epoch};
}

NonFiniteLoss::NonFiniteLoss(std::int64_t step, double loss, int rank)
    : Error(fmt::format("fit: the loss of step {} is {}{}, expected a finite value: the run diverged (a learning "
                        "rate too high?) or its data holds non-finite values",
                        step, loss, rank > 0 ? fmt::format(" on rank {}", rank) : "")),
      step_(step),
      rank_(rank) {}

namespace {

// fit()'s loop: epochs of steps, at most two in flight, their statistics read (and their losses checked) in order.
class FitLoop {
 public:
  FitLoop(Sequential& model, Optimizer& optimizer, const io::Dataset& train, const FitOptions& o,
          const io::Dataset* validation)
      : engine_(running_engine("fit")),
        train_(train),
        o_(o),
        validation_(validation),
        plan_(plan_epochs(train, o)),
        verbose_(o.verbose_ && plan_.rank == 0),
        steps_(model, optimizer, step_options(o)),
        global_step_(o.initial_step_),
        state_{model, optimizer, history_, 0, o.epochs_, global_step_, plan_.steps, false, false, {}} {
    state_.settle = [this] { settle(); };
    if (train.has_tokens()) progress_.token_metrics(train.sequence);
  }

  History run() {
    for (auto& c : o_.callbacks_) c->on_train_begin(state_);
    for (int epoch = static_cast<int>(o_.initial_step_ / plan_.steps);
         epoch < o_.epochs_ && !state_.stop && !state_.stopped_early; ++epoch) {
      run_epoch(epoch);
    }
    for (auto& c : o_.callbacks_) c->on_train_end(state_);
    engine_.wait_all();
    return history_;
  }

 private:
  void drain_one() {
    const auto [slot, step] = in_flight_.front();
    const StepStats stats = steps_.collect(*slot);
    if (o_.check_finite_ && nonfinite_step_ < 0 && !std::isfinite(stats.sums[kLossSum])) {
      nonfinite_step_ = step;
      nonfinite_loss_ = stats.sums[kLossSum];
    }
    epoch_stats_ += stats;
    in_flight_.pop_front();
    ++done_steps_;
    if (verbose_) {
      progress_.update(done_steps_, epoch_stats_.mean(kLossSum), epoch_stats_.mean(kCorrect),
                       epoch_stats_.rows * plan_.world);
    }
  }

  // At a step boundary (before step `next` is submitted, once an epoch's steps are done, or where a callback settles)
  // the ranks agree: a non-finite loss ends training there on every rank (NonFiniteLoss); returns the stop request.
  int verdict(std::int64_t next, bool poll) {
    const int request = poll && o_.stop_when_ ? o_.stop_when_(next) : 0;
    const StepVerdict v = agree(o_.data_parallel_.mpi, plan_.rank, nonfinite_step_, nonfinite_loss_, request);
    if (v.nonfinite_step >= 0) {
      while (!in_flight_.empty()) drain_one();
      engine_.wait_all();
      throw NonFiniteLoss(v.nonfinite_step, v.nonfinite_loss, v.nonfinite_rank);
    }
    return v.stop;
  }

  void settle() {
    while (!in_flight_.empty()) drain_one();
    verdict(global_step_, false);
  }

  void run_epoch(int epoch) {
    state_.epoch = epoch;
    for (auto& c : o_.callbacks_) c->on_epoch_begin(state_);
    const std::vector<std::int64_t> order =
        epoch_order(train_.size(), plan_.global_batch, o_.steps_per_epoch_, o_.shuffle_, o_.seed_, epoch);
    if (verbose_) progress_.start_epoch(epoch + 1, o_.epochs_, plan_.steps);
    const auto start = Clock::now();
    epoch_stats_ = StepStats{};
    done_steps_ = 0;
    int stop = 0;
    for (std::int64_t step = global_step_ - epoch * plan_.steps; step < plan_.steps && stop == 0; ++step) {
      // At most two steps in flight: the oldest one's metrics are read (and its loss checked) before the next.
      while (in_flight_.size() >= 2) drain_one();
      stop = verdict(global_step_, true);
      if (stop == 0) submit_step(order, step, epoch);
    }
    while (!in_flight_.empty()) drain_one();
    engine_.wait_all();
    verdict(global_step_, false);
    if (stop != 0) {
      // Stopped at a step boundary: no record of the epoch's first steps; the callbacks' on_train_end sees it.
      history_.stopped_at_step = global_step_;
      history_.stop_reason = stop;
      state_.step = global_step_;
      state_.stopped_early = true;
      if (verbose_ && epoch_stats_.rows > 0) {
        progress_.end_epoch(epoch_stats_.mean(kLossSum), epoch_stats_.mean(kCorrect), epoch_stats_.rows, "");
      }
      return;
    }
    epoch_stats_.sum_over_ranks(o_.data_parallel_.mpi, fmt::format("metrics of epoch {}", epoch + 1));
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const EpochRecord record =
        finish_epoch(state_.model, state_.optimizer, o_, epoch, seconds, epoch_stats_, validation_);
    if (verbose_) {
      std::string suffix;
      if (validation_ != nullptr) {
        suffix = record.tokens > 0 ? fmt::format(" - val_loss: {:.4f} - val_ppl: {:.3f} - val_bpc: {:.4f} - "
                                                 "val_accuracy: {:.4f}",
                                                 record.val_loss, record.val_perplexity(), record.val_bits_per_char(),
                                                 record.val_accuracy)
                                   : fmt::format(" - val_loss: {:.4f} - val_accuracy: {:.4f}", record.val_loss,
                                                 record.val_accuracy);
      }
      progress_.end_epoch(record.loss, record.accuracy, record.images, suffix);
    }
    history_.epochs.push_back(record);
    for (auto& c : o_.callbacks_) c->on_epoch_end(state_);
  }

  // Step `step` of the epoch (global_step_): the callbacks, then its tasks.
  void submit_step(const std::vector<std::int64_t>& order, std::int64_t step, int epoch) {
    const std::int64_t first = step * plan_.global_batch;
    const std::int64_t global_rows =
        std::min<std::int64_t>(plan_.global_batch, static_cast<std::int64_t>(order.size()) - first);
    const TileRange mine = split_rows(global_rows, plan_.world)[static_cast<std::size_t>(plan_.rank)];
    state_.step = global_step_;
    for (auto& c : o_.callbacks_) c->on_batch_begin(state_);
    runtime::notify_step_begins(global_step_);
    StepSlot& s = steps_.slot(mine.count, global_step_);
    // The slot's buffers are reused once its last step's metrics are read.
    while (s.pending) drain_one();
    const auto rows = std::span(order).subspan(static_cast<std::size_t>(first + mine.begin),
                                               static_cast<std::size_t>(mine.count));
    steps_.submit(s, StepBatch{&train_, rows, global_rows, global_step_, epoch});
    in_flight_.emplace_back(&s, global_step_);
    ++global_step_;
  }

  runtime::Engine& engine_;
  const io::Dataset& train_;
  const FitOptions& o_;
  const io::Dataset* validation_;
  const EpochPlan plan_;
  const bool verbose_;
  TrainStep steps_;
  std::deque<std::pair<StepSlot*, std::int64_t>> in_flight_;  // with their global steps
  ProgressLine progress_;
  History history_;
  std::int64_t global_step_;
  TrainState state_;
  StepStats epoch_stats_;
  std::int64_t done_steps_ = 0;
  std::int64_t nonfinite_step_ = -1;  // the first step collected here whose loss was not finite
  double nonfinite_loss_ = 0.0;
};

}  // namespace

History fit(Sequential& model, Optimizer& optimizer, const io::Dataset& train, const FitOptions& o,
            const io::Dataset* validation) {
  running_engine("fit");
  check_model_fits(model, train, "fit");
  if (validation != nullptr) check_model_fits(model, *validation, "fit (validation)");
  check_step_options(step_options(o), "fit");
  check_loss_fits(model, o.loss_, "fit");
  if (train.has_tokens() && (o.augment_.flip != 0 || o.augment_.crop_padding > 0)) {
    throw InvalidArgument(fmt::format("fit: flips and crops of token windows ({}), expected no augmentation of a token "
                                      "dataset", train.name));
  }
  return FitLoop(model, optimizer, train, o, validation).run();
}

namespace {

// Runs the forward graph over the whole dataset in order; `each` sees every batch's slot after its loss.
template <class Each>
EvalResult run_inference(Sequential& model, const io::Dataset& data, const EvalOptions& o, Each&& each) {
  runtime::Engine& engine = running_engine("evaluate");
  check_model_fits(model, data, "evaluate");
  check_loss_fits(model, o.loss_, "evaluate");
  if (o.batch_size_ < 1 || o.tiles_ < 1) {
    throw InvalidArgument(fmt::format("evaluate: batch_size={} tiles={}, expected both >= 1", o.batch_size_, o.tiles_));
  }
  const auto start = Clock::now();
  const int world = o.mpi_ != nullptr ? o.mpi_->size() : 1;
  const int rank = o.mpi_ != nullptr ? o.mpi_->rank() : 0;
  // Each rank evaluates a contiguous share; with more ranks than samples some ranks have none.
  const std::vector<TileRange> shares = split_rows(data.size(), world);
  const TileRange mine = static_cast<std::size_t>(rank) < shares.size() ? shares[static_cast<std::size_t>(rank)]
                                                                        : TileRange{data.size(), 0};
  const std::int64_t n = mine.count;
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), mine.begin);
  StepSlots graph(model, o.tiles_, 0, o.activations_);
  std::deque<std::pair<StepSlot*, std::int64_t>> in_flight;
  StepStats total;
  auto drain_one = [&] {
    auto [slot, first] = in_flight.front();
    in_flight.pop_front();
    total += read_step_stats(*slot);
    each(*slot, first);
  };
  const PassContext ctx{0, 0};
  std::int64_t step = 0;
  for (std::int64_t first = 0; first < n; first += o.batch_size_, ++step) {
    const std::int64_t rows = std::min(o.batch_size_, n - first);
    StepSlot& s = graph.slot(rows, step);
    while (s.pending || in_flight.size() >= 2) {
      drain_one();
    }
    submit_batch_load(s, data, std::span(order).subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(rows)),
                      0.0f, nullptr);
    model.forward(s.acts, ctx);
    submit_batch_loss(s, o.loss_, 0.0f, 0.0f, s.scratch);
    s.pending = 1;
    in_flight.emplace_back(&s, first);
  }
  while (!in_flight.empty()) {
    drain_one();
  }
  engine.wait_all();
  total.sum_over_ranks(o.mpi_, "evaluation metrics");
  EvalResult r;
  r.samples = total.rows;
  r.tokens = total.tokens ? static_cast<std::int64_t>(total.sums[kCounted]) : 0;
  r.loss = total.mean(kLossSum);
  r.accuracy = total.mean(kCorrect);
  r.top5_accuracy = total.mean(kTop5Correct);
  r.mse = total.mean(kSquaredError);
  r.mae = total.mean(kAbsoluteError);
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

}  // namespace

EvalResult evaluate(Sequential& model, const io::Dataset& data, const EvalOptions& options) {
  return run_inference(model, data, options, [](StepSlot&, std::int64_t) {});
}

std::vector<float> predict(Sequential& model, const io::Dataset& data, const EvalOptions& options) {
  // Per position of the logits' last axis: a classifier's one per sample, a token model's one per token.
  const Shape& out = model.output_shape();
  const auto classes = static_cast<std::size_t>(out.back());
  const auto per_sample = static_cast<std::size_t>(numel(out));
  std::vector<float> probabilities(static_cast<std::size_t>(data.size()) * per_sample);
  run_inference(model, data, options, [&](StepSlot& s, std::int64_t first) {
    auto logits = s.acts.back().read();
    const std::size_t rows = static_cast<std::size_t>(s.rows) * (per_sample / classes);
    for (std::size_t i = 0; i < rows; ++i) {
      const float* z = logits.data().data() + i * classes;
      float* p = probabilities.data() + static_cast<std::size_t>(first) * per_sample + i * classes;
      if (options.logits_) {
        std::copy(z, z + classes, p);
        continue;
      }
      const double m = *std::max_element(z, z + classes);
      double sum = 0.0;
      for (std::size_t c = 0; c < classes; ++c) sum += std::exp(z[c] - m);
      for (std::size_t c = 0; c < classes; ++c) p[c] = static_cast<float>(std::exp(z[c] - m) / sum);
    }
  });
  return probabilities;
}

}  // namespace dtnn
