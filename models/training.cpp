// SPDX-License-Identifier: Apache-2.0
#include "models/training.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <numeric>

#include <fmt/format.h>

#include "codelets/gather_batch.hpp"
#include "codelets/loss.hpp"
#include "models/progress.hpp"
#include "runtime/engine.hpp"
#include "core/errors.hpp"
#include "runtime/failure.hpp"

namespace dtnn {
namespace {

using Clock = std::chrono::steady_clock;

// Priorities: loading the next batch first, so that no worker waits for data; backward-data (the critical
// path of a step) above forward and weight gradients.
constexpr int kLoadPriority = 3;
constexpr int kLossPriority = 2;

runtime::Engine& running_engine(const char* who) {
  runtime::Engine* engine = runtime::Engine::current();
  if (engine == nullptr) {
    throw InvalidArgument(fmt::format("{}: no runtime::Engine is running, expected one to be created first", who));
  }
  return *engine;
}

void check_compatible(const Sequential& model, const io::Dataset& data, const char* who) {
  if (!model.built()) {
    throw InvalidArgument(fmt::format("{}: the model is not built, expected build() before training", who));
  }
  const Shape sample{data.channels, data.height, data.width};
  if (model.input_shape() != sample) {
    throw InvalidArgument(fmt::format("{}: dataset {} has samples of shape {}, the model expects {}", who, data.name,
                                      to_string(sample), to_string(model.input_shape())));
  }
  if (model.output_shape() != Shape{data.classes}) {
    throw InvalidArgument(fmt::format("{}: dataset {} has {} classes, the model outputs {}", who, data.name,
                                      data.classes, to_string(model.output_shape())));
  }
  if (data.size() < 1) {
    throw InvalidArgument(fmt::format("{}: dataset {} is empty", who, data.name));
  }
}

// The buffers of one step in flight.
struct Slot {
  std::vector<Tensor> acts;
  std::vector<Tensor> grads;
  Tensor targets;
  Tensor scratch;  // loss gradient in evaluation, where no backward pass reads it
  Tensor stats;    // [tiles, kLossStats]: loss and metric sums per tile
  std::int64_t rows = 0;
  int pending = 0;
};

// Sums of the loss and metrics (LossStat) over rows.
struct StepStats {
  std::array<double, kLossStats> sums{};
  std::int64_t rows = 0;

  StepStats& operator+=(const StepStats& o) {
    for (std::size_t i = 0; i < sums.size(); ++i) sums[i] += o.sums[i];
    rows += o.rows;
    return *this;
  }
  [[nodiscard]] double mean(LossStat k) const { return sums[k] / static_cast<double>(rows); }
  // Over every rank of the world (the driver's communicator).
  void sum_over_ranks(const runtime::Mpi* mpi, const std::string& what) {
    if (mpi == nullptr || !mpi->active()) return;
    std::array<double, kLossStats + 1> all{};
    std::copy(sums.begin(), sums.end(), all.begin());
    all.back() = static_cast<double>(rows);
    mpi->sum(all.data(), static_cast<int>(all.size()), what);
    std::copy(all.begin(), all.end() - 1, sums.begin());
    rows = static_cast<std::int64_t>(all.back());
  }
};

// Buffers for up to two steps in flight per batch size (the last batch of an epoch may be shorter).
class StepGraph {
 public:
  StepGraph(Sequential& model, int tiles, int training) : model_(model), tiles_(tiles), training_(training) {}

  Slot& slot(std::int64_t rows, std::int64_t step) {
    auto& pair = slots_[rows];
    auto& s = pair[static_cast<std::size_t>(step % 2)];
    if (!s) {
      s = std::make_unique<Slot>();
      s->rows = rows;
      model_.allocate(rows, tiles_, s->acts, training_ ? &s->grads : nullptr);
      s->targets = Tensor(s->acts.back().shape(), tiles_);
      if (!training_) {
        s->scratch = Tensor(s->acts.back().shape(), tiles_);
      }
      s->stats = Tensor({s->acts[0].tiles(), kLossStats}, s->acts[0].tiles());
    }
    return *s;
  }

  // Reads a submitted step's metrics (waits for its loss tasks only).
  static StepStats collect(Slot& s) {
    StepStats out;
    {
      auto stats = s.stats.read();
      for (int t = 0; t < s.stats.tiles(); ++t) {
        for (int k = 0; k < kLossStats; ++k) {
          out.sums[static_cast<std::size_t>(k)] += stats[t * kLossStats + k];
        }
      }
    }
    out.rows = s.rows;
    s.pending = 0;
    runtime::rethrow_task_failures();
    return out;
  }

 private:
  Sequential& model_;
  int tiles_;
  int training_;
  std::map<std::int64_t, std::array<std::unique_ptr<Slot>, 2>> slots_;
};

void submit_load(Slot& s, const io::Dataset& data, std::span<const std::int64_t> indices, float smoothing = 0.0f,
                 const codelets::Augmentation* augmentation = nullptr) {
  const codelets::SampleSource source{data.reader ? nullptr : data.images.data(), data.reader.get(),
                                      data.labels.data(), data.sample_elements(), data.classes, smoothing};
  for (int t = 0; t < s.acts[0].tiles(); ++t) {
    const TileRange r = s.acts[0].tile_range(t);
    codelets::submit_gather_batch({"data", kLoadPriority}, source,
                                  indices.subspan(static_cast<std::size_t>(r.begin), static_cast<std::size_t>(r.count)),
                                  augmentation, s.acts[0], s.targets, t);
  }
}

void submit_loss(Slot& s, codelets::LossKind kind, float grad_scale, Tensor& dlogits) {
  for (int t = 0; t < s.acts.back().tiles(); ++t) {
    codelets::submit_loss_fwd_bwd({"loss", kLossPriority}, kind, s.acts.back(), s.targets, grad_scale, dlogits,
                                  s.stats, t);
  }
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

History fit(Sequential& model, Optimizer& optimizer, const io::Dataset& train, const FitOptions& o,
            const io::Dataset* validation) {
  runtime::Engine& engine = running_engine("fit");
  check_compatible(model, train, "fit");
  if (validation != nullptr) {
    check_compatible(model, *validation, "fit (validation)");
  }
  if (!(o.label_smoothing_ >= 0.0f && o.label_smoothing_ < 1.0f)) {
    throw InvalidArgument(fmt::format("fit: label smoothing {}, expected 0 <= smoothing < 1", o.label_smoothing_));
  }
  if (o.epochs_ < 1 || o.batch_size_ < 1 || o.tiles_ < 1 || o.steps_per_epoch_ < 0) {
    throw InvalidArgument(fmt::format("fit: epochs={} batch_size={} tiles={} steps_per_epoch={}, expected epochs, "
                                      "batch size and tiles >= 1 and steps per epoch >= 0",
                                      o.epochs_, o.batch_size_, o.tiles_, o.steps_per_epoch_));
  }
  const DataParallel& dp = o.data_parallel_;
  const int world = dp.mpi != nullptr ? dp.mpi->size() : 1;
  const int rank = dp.mpi != nullptr ? dp.mpi->rank() : 0;
  if (world > 1 && dp.reducer == nullptr) {
    throw InvalidArgument(fmt::format("fit: {} ranks without a gradient reducer", world));
  }
  const int verbose = o.verbose_ && rank == 0;
  const std::int64_t n = train.size();
  // Every rank walks the same seeded order of global batches and takes its rows of each one.
  const std::int64_t global_batch = o.batch_size_ * world;
  std::int64_t steps = o.steps_per_epoch_ > 0 ? o.steps_per_epoch_ : (n + global_batch - 1) / global_batch;
  const std::int64_t last_rows = o.steps_per_epoch_ > 0 ? global_batch : n - (steps - 1) * global_batch;
  if (steps > 1 && last_rows < global_batch && (dp.drop_last || last_rows < world)) {
    --steps;  // a last global batch too small to give every rank a row (or dropped by request)
  }
  if (steps < 1) {
    throw InvalidArgument(fmt::format("fit: dataset {} has {} samples, expected at least one global batch of {} "
                                      "({} per rank x {} ranks)",
                                      train.name, n, global_batch, o.batch_size_, world));
  }

  check_augment_options(o.augment_);
  const int augmenting = o.augment_.flip != 0 || o.augment_.crop_padding > 0;
  codelets::Augmentation augmentation{o.augment_, o.seed_, 0, train.channels, train.height, train.width};

  StepGraph graph(model, o.tiles_, 1);
  std::size_t parameter_elements = 0;
  for (const NamedParameter& p : model.named_parameters()) {
    parameter_elements += static_cast<std::size_t>(p.parameter->value.numel());
  }
  std::deque<Slot*> in_flight;
  ProgressLine progress;
  History history;
  if (o.initial_step_ < 0 || o.initial_step_ > steps * o.epochs_) {
    throw InvalidArgument(fmt::format("fit: initial step {}, expected 0..{} ({} epochs of {} steps)", o.initial_step_,
                                      steps * o.epochs_, o.epochs_, steps));
  }
  std::int64_t global_step = o.initial_step_;
  TrainState state{model, optimizer, history, 0, o.epochs_, global_step, steps, 0};
  for (auto& c : o.callbacks_) c->on_train_begin(state);

  for (int epoch = static_cast<int>(o.initial_step_ / steps); epoch < o.epochs_ && !state.stop; ++epoch) {
    state.epoch = epoch;
    for (auto& c : o.callbacks_) c->on_epoch_begin(state);
    const std::vector<std::int64_t> order = epoch_order(n, global_batch, o.steps_per_epoch_, o.shuffle_, o.seed_, epoch);
    if (verbose) {
      progress.start_epoch(epoch + 1, o.epochs_, steps);
    }
    const auto start = Clock::now();
    StepStats epoch_stats;
    std::int64_t done_steps = 0;
    auto drain_one = [&] {
      epoch_stats += StepGraph::collect(*in_flight.front());
      in_flight.pop_front();
      ++done_steps;
      if (verbose) {
        progress.update(done_steps, epoch_stats.mean(kLossSum), epoch_stats.mean(kCorrect),
                        epoch_stats.rows * world);
      }
    };

    for (std::int64_t step = global_step - epoch * steps; step < steps; ++step) {
      const std::int64_t first = step * global_batch;
      const std::int64_t global_rows =
          std::min<std::int64_t>(global_batch, static_cast<std::int64_t>(order.size()) - first);
      const TileRange mine = split_rows(global_rows, world)[static_cast<std::size_t>(rank)];
      state.step = global_step;
      for (auto& c : o.callbacks_) c->on_batch_begin(state);
      Slot& s = graph.slot(mine.count, global_step);
      // At most two steps in flight: the oldest one's metrics are read before its buffers are reused.
      while (s.pending || in_flight.size() >= 2) {
        drain_one();
      }
      BatchSync sync;
      PassContext ctx{1, 0, global_step};
      if (dp.reducer != nullptr) ctx.layer_priority_stride = 2;
      if (dp.sync_batchnorm && world > 1) {
        sync.reducer = dp.reducer;
        for (const TileRange& r : split_rows(global_rows, world)) sync.rows_per_rank.push_back(r.count);
        ctx.sync = &sync;
      }
      augmentation.epoch = epoch;
      submit_load(s, train,
                  std::span(order).subspan(static_cast<std::size_t>(first + mine.begin),
                                           static_cast<std::size_t>(mine.count)),
                  o.label_smoothing_, augmenting ? &augmentation : nullptr);
      model.forward(s.acts, ctx);
      // Scaled by the global batch, so that the sum over ranks is the mean gradient of the global batch.
      submit_loss(s, o.loss_, 1.0f / static_cast<float>(global_rows), s.grads.back());
      std::vector<NamedParameter> waiting;  // gradients whose bucket is still open
      auto submit_updates = [&] {
        for (const NamedParameter& p : waiting) optimizer.submit_update(*p.parameter, p.name, ctx.priority);
        waiting.clear();
      };
      std::size_t to_come = parameter_elements;  // gradient elements of the layers whose backward is still to come
      model.backward(s.acts, s.grads, ctx, [&](Layer& layer) {
        for (const NamedParameter& p : named_parameters(layer)) {
          to_come -= static_cast<std::size_t>(p.parameter->grad.numel());
          if (dp.reducer != nullptr && p.parameter->reduced_over_ranks) {
            // Already summed over the ranks (synchronised BatchNorm): its update needs no bucket.
            optimizer.submit_update(*p.parameter, p.name, ctx.priority);
            continue;
          }
          waiting.push_back(p);
          if (dp.reducer == nullptr || dp.reducer->add(p.parameter->grad, p.name)) {
            submit_updates();
          }
        }
        if (dp.reducer != nullptr && dp.reducer->layer_boundary(to_come)) {
          submit_updates();
        }
      });
      if (dp.reducer != nullptr) {
        dp.reducer->end_step();
      }
      submit_updates();
      s.pending = 1;
      in_flight.push_back(&s);
      ++global_step;
    }
    while (!in_flight.empty()) {
      drain_one();
    }
    engine.wait_all();
    epoch_stats.sum_over_ranks(dp.mpi, fmt::format("metrics of epoch {}", epoch + 1));

    EpochRecord record;
    record.epoch = epoch + 1;
    record.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    record.images = epoch_stats.rows;
    record.loss = epoch_stats.mean(kLossSum);
    record.accuracy = epoch_stats.mean(kCorrect);
    record.top5_accuracy = epoch_stats.mean(kTop5Correct);
    record.mse = epoch_stats.mean(kSquaredError);
    record.mae = epoch_stats.mean(kAbsoluteError);
    record.learning_rate = optimizer.learning_rate();
    std::string suffix;
    if (validation != nullptr) {
      const EvalResult v = evaluate(
          model, *validation,
          EvalOptions().batch_size(std::max<std::int64_t>(o.batch_size_, 256)).tiles(o.tiles_).mpi(dp.mpi).loss(o.loss_));
      record.val_loss = v.loss;
      record.val_accuracy = v.accuracy;
      suffix = fmt::format(" - val_loss: {:.4f} - val_accuracy: {:.4f}", v.loss, v.accuracy);
    }
    if (verbose) {
      progress.end_epoch(record.loss, record.accuracy, record.images, suffix);
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
  check_compatible(model, data, "evaluate");
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
  StepGraph graph(model, o.tiles_, 0);
  std::deque<std::pair<Slot*, std::int64_t>> in_flight;
  StepStats total;
  auto drain_one = [&] {
    auto [slot, first] = in_flight.front();
    in_flight.pop_front();
    total += StepGraph::collect(*slot);
    each(*slot, first);
  };
  const PassContext ctx{0, 0};
  std::int64_t step = 0;
  for (std::int64_t first = 0; first < n; first += o.batch_size_, ++step) {
    const std::int64_t rows = std::min(o.batch_size_, n - first);
    Slot& s = graph.slot(rows, step);
    while (s.pending || in_flight.size() >= 2) {
      drain_one();
    }
    submit_load(s, data, std::span(order).subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(rows)));
    model.forward(s.acts, ctx);
    submit_loss(s, o.loss_, 0.0f, s.scratch);
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
  return run_inference(model, data, options, [](Slot&, std::int64_t) {});
}

std::vector<float> predict(Sequential& model, const io::Dataset& data, const EvalOptions& options) {
  const auto classes = static_cast<std::size_t>(data.classes);
  std::vector<float> probabilities(static_cast<std::size_t>(data.size()) * classes);
  run_inference(model, data, options, [&](Slot& s, std::int64_t first) {
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
