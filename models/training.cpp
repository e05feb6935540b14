// SPDX-License-Identifier: Apache-2.0
#include "models/training.hpp"

#include <algorithm>
#include <chrono>
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
      .activations(o.activations_);
}

// An epoch's record from its statistics (summed over the ranks) and, with a validation set, its evaluation.
EpochRecord finish_epoch(Sequential& model, const Optimizer& optimizer, const FitOptions& o, int epoch,
                         double seconds, const StepStats& stats, const io::Dataset* validation) {
  EpochRecord record;
  record.epoch = epoch + 1;
  record.seconds = seconds;
  record.images = stats.rows;
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

}  // namespace

History fit(Sequential& model, Optimizer& optimizer, const io::Dataset& train, const FitOptions& o,
            const io::Dataset* validation) {
  runtime::Engine& engine = running_engine("fit");
  check_model_fits(model, train, "fit");
  if (validation != nullptr) check_model_fits(model, *validation, "fit (validation)");
  check_step_options(step_options(o), "fit");
  const EpochPlan plan = plan_epochs(train, o);
  const int verbose = o.verbose_ && plan.rank == 0;
  TrainStep steps(model, optimizer, step_options(o));
  std::deque<StepSlot*> in_flight;
  ProgressLine progress;
  History history;
  std::int64_t global_step = o.initial_step_;
  TrainState state{model, optimizer, history, 0, o.epochs_, global_step, plan.steps, 0};
  for (auto& c : o.callbacks_) c->on_train_begin(state);

  for (int epoch = static_cast<int>(o.initial_step_ / plan.steps); epoch < o.epochs_ && !state.stop; ++epoch) {
    state.epoch = epoch;
    for (auto& c : o.callbacks_) c->on_epoch_begin(state);
    const std::vector<std::int64_t> order =
        epoch_order(train.size(), plan.global_batch, o.steps_per_epoch_, o.shuffle_, o.seed_, epoch);
    if (verbose) progress.start_epoch(epoch + 1, o.epochs_, plan.steps);
    const auto start = Clock::now();
    StepStats epoch_stats;
    std::int64_t done_steps = 0;
    auto drain_one = [&] {
      epoch_stats += steps.collect(*in_flight.front());
      in_flight.pop_front();
      ++done_steps;
      if (verbose) {
        progress.update(done_steps, epoch_stats.mean(kLossSum), epoch_stats.mean(kCorrect),
                        epoch_stats.rows * plan.world);
      }
    };
    for (std::int64_t step = global_step - epoch * plan.steps; step < plan.steps; ++step) {
      const std::int64_t first = step * plan.global_batch;
      const std::int64_t global_rows =
          std::min<std::int64_t>(plan.global_batch, static_cast<std::int64_t>(order.size()) - first);
      const TileRange mine = split_rows(global_rows, plan.world)[static_cast<std::size_t>(plan.rank)];
      state.step = global_step;
      for (auto& c : o.callbacks_) c->on_batch_begin(state);
      runtime::notify_step_begins(global_step);
      StepSlot& s = steps.slot(mine.count, global_step);
      // At most two steps in flight: the oldest one's metrics are read before its buffers are reused.
      while (s.pending || in_flight.size() >= 2) drain_one();
      const auto rows = std::span(order).subspan(static_cast<std::size_t>(first + mine.begin),
                                                 static_cast<std::size_t>(mine.count));
      steps.submit(s, StepBatch{&train, rows, global_rows, global_step, epoch});
      in_flight.push_back(&s);
      ++global_step;
    }
    while (!in_flight.empty()) drain_one();
    engine.wait_all();
    epoch_stats.sum_over_ranks(o.data_parallel_.mpi, fmt::format("metrics of epoch {}", epoch + 1));
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const EpochRecord record = finish_epoch(model, optimizer, o, epoch, seconds, epoch_stats, validation);
    if (verbose) {
      progress.end_epoch(record.loss, record.accuracy, record.images,
                         validation == nullptr ? std::string()
                                               : fmt::format(" - val_loss: {:.4f} - val_accuracy: {:.4f}",
                                                             record.val_loss, record.val_accuracy));
    }
    history.epochs.push_back(record);
    for (auto& c : o.callbacks_) c->on_epoch_end(state);
  }
  for (auto& c : o.callbacks_) c->on_train_end(state);
  engine.wait_all();
  return history;
}

namespace {

// Runs the forward graph over the whole dataset in order; `each` sees every batch's slot after its loss.
template <class Each>
EvalResult run_inference(Sequential& model, const io::Dataset& data, const EvalOptions& o, Each&& each) {
  runtime::Engine& engine = running_engine("evaluate");
  check_model_fits(model, data, "evaluate");
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
    submit_batch_loss(s, o.loss_, 0.0f, s.scratch);
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
  const auto classes = static_cast<std::size_t>(data.classes);
  std::vector<float> probabilities(static_cast<std::size_t>(data.size()) * classes);
  run_inference(model, data, options, [&](StepSlot& s, std::int64_t first) {
    auto logits = s.acts.back().read();
    for (std::int64_t i = 0; i < s.rows; ++i) {
      const float* z = logits.data().data() + i * classes;
      float* p = probabilities.data() + (first + i) * static_cast<std::int64_t>(classes);
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
