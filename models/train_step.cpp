// SPDX-License-Identifier: Apache-2.0
#include "models/train_step.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "codelets/gather_tokens.hpp"
#include "codelets/grad_clip.hpp"
#include "core/errors.hpp"
#include "runtime/failure.hpp"
#include "runtime/mpi.hpp"

namespace dtnn {
namespace {

// Priorities: loading the next batch first, so that no worker waits for data; backward-data (the critical
// path of a step) above forward and weight gradients.
constexpr int kLoadPriority = 3;
constexpr int kLossPriority = 2;

}  // namespace

StepSlot& StepSlots::slot(std::int64_t rows, std::int64_t step) {
  auto& pair = slots_[rows];
  auto& s = pair[static_cast<std::size_t>(step % 2)];
  if (!s) {
    s = std::make_unique<StepSlot>();
    s->rows = rows;
    // Transient: a step's activations and gradients hold memory from their first write to their last read only.
    model_.allocate(rows, tiles_, s->acts, training_ ? &s->grads : nullptr, storage_);
    const Tensor& logits = s->acts.back();
    const bool tokens = model_.input_dtype() == DType::kInt32;
    s->targets = tokens ? Tensor({rows, logits.row_elements() / logits.shape().back()},
                                 TensorOptions().tiles(tiles_).dtype(DType::kInt32))
                        : Tensor(logits.shape(), tiles_);
    if (!training_) {
      s->scratch = Tensor(logits.shape(), tiles_);
    }
    s->stats = Tensor({s->acts[0].tiles(), tokens ? kTokenLossStats : kLossStats}, s->acts[0].tiles());
  }
  return *s;
}

StepStats& StepStats::operator+=(const StepStats& o) {
  for (std::size_t i = 0; i < sums.size(); ++i) sums[i] += o.sums[i];
  rows += o.rows;
  tokens = tokens || o.tokens;
  return *this;
}

void StepStats::sum_over_ranks(const runtime::Mpi* mpi, const std::string& what) {
  if (mpi == nullptr || !mpi->active()) return;
  std::array<double, kTokenLossStats + 1> all{};
  std::copy(sums.begin(), sums.end(), all.begin());
  all.back() = static_cast<double>(rows);
  mpi->sum(all.data(), static_cast<int>(all.size()), what);
  std::copy(all.begin(), all.end() - 1, sums.begin());
  rows = static_cast<std::int64_t>(all.back());
}

StepStats read_step_stats(StepSlot& s) {
  StepStats out;
  const auto width = static_cast<int>(s.stats.row_elements());
  {
    auto stats = s.stats.read();
    for (int t = 0; t < s.stats.tiles(); ++t) {
      for (int k = 0; k < width; ++k) {
        out.sums[static_cast<std::size_t>(k)] += stats[t * width + k];
      }
    }
  }
  out.rows = s.rows;
  out.tokens = s.token_targets();
  if (width == kLossStats) {
    // Every row of a classifier loss counts: each sample's positions on the logits' last axis.
    const Tensor& logits = s.acts.back();
    out.sums[kCounted] = static_cast<double>(s.rows * (logits.row_elements() / logits.shape().back()));
  }
  s.pending = 0;
  runtime::rethrow_task_failures();
  return out;
}

void submit_batch_load(StepSlot& s, const io::Dataset& data, std::span<const std::int64_t> indices, float smoothing,
                       const codelets::Augmentation* augmentation) {
  if (data.has_tokens()) {
    const codelets::TokenSource source{data.tokens ? data.tokens->data() : nullptr, data.token_reader.get(),
                                       data.windows.data(), data.sequence};
    for (int t = 0; t < s.acts[0].tiles(); ++t) {
      const TileRange r = s.acts[0].tile_range(t);
      codelets::submit_gather_tokens(
          {"data", kLoadPriority}, source,
          indices.subspan(static_cast<std::size_t>(r.begin), static_cast<std::size_t>(r.count)), s.acts[0], s.targets,
          t);
    }
    return;
  }
  const codelets::SampleSource source{data.reader ? nullptr : data.images.data(), data.reader.get(),
                                      data.labels.data(), data.sample_elements(), data.classes, smoothing};
  for (int t = 0; t < s.acts[0].tiles(); ++t) {
    const TileRange r = s.acts[0].tile_range(t);
    codelets::submit_gather_batch({"data", kLoadPriority}, source,
                                  indices.subspan(static_cast<std::size_t>(r.begin), static_cast<std::size_t>(r.count)),
                                  augmentation, s.acts[0], s.targets, t);
  }
}

void submit_batch_loss(StepSlot& s, codelets::LossKind kind, float smoothing, float grad_scale, Tensor& dlogits) {
  if (s.token_targets()) {
    TokenXentParams params;
    params.label_smoothing = smoothing;
    for (int t = 0; t < s.acts.back().tiles(); ++t) {
      codelets::submit_token_xent_fwd_bwd({"loss", kLossPriority}, params, s.acts.back(), s.targets, grad_scale,
                                          dlogits, s.stats, t);
    }
    return;
  }
  for (int t = 0; t < s.acts.back().tiles(); ++t) {
    codelets::submit_loss_fwd_bwd({"loss", kLossPriority}, kind, s.acts.back(), s.targets, grad_scale, dlogits,
                                  s.stats, t);
  }
}

void check_model_fits(const Sequential& model, const io::Dataset& data, const char* who) {
  if (!model.built()) {
    throw InvalidArgument(fmt::format("{}: the model is not built, expected build() before training", who));
  }
  if (data.size() < 1) {
    throw InvalidArgument(fmt::format("{}: dataset {} is empty", who, data.name));
  }
  const DType input = model.input_dtype();
  if (data.has_tokens()) {
    const Shape logits{data.sequence, data.classes};
    if (input != DType::kInt32 || model.input_shape() != Shape{data.sequence} || model.output_shape() != logits) {
      throw InvalidArgument(fmt::format("{}: dataset {} has windows of {} token ids (vocabulary {}), expected a model "
                                        "of int32 input {} and logits {}, got {} input {} and output {}",
                                        who, data.name, data.sequence, data.classes, to_string(Shape{data.sequence}),
                                        to_string(logits), to_string(input), to_string(model.input_shape()),
                                        to_string(model.output_shape())));
    }
    return;
  }
  if (input != DType::kFloat32) {
    throw InvalidArgument(fmt::format("{}: dataset {} has float32 samples, the model takes {} input (token ids: "
                                      "expected a token dataset such as --dataset text)",
                                      who, data.name, to_string(input)));
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
}

void check_loss_fits(const Sequential& model, codelets::LossKind kind, const char* who) {
  if (model.input_dtype() == DType::kInt32 && kind != codelets::LossKind::kCategoricalCrossEntropy) {
    throw InvalidArgument(fmt::format("{}: a model of token ids trains with the token cross-entropy, expected loss "
                                      "categorical_cross_entropy (cce), got {}", who, codelets::to_string(kind)));
  }
}

void check_step_options(const TrainStepOptions& o, const char* who) {
  if (!(o.label_smoothing_ >= 0.0f && o.label_smoothing_ < 1.0f)) {
    throw InvalidArgument(fmt::format("{}: label smoothing {}, expected 0 <= smoothing < 1", who, o.label_smoothing_));
  }
  if (o.tiles_ < 1) {
    throw InvalidArgument(fmt::format("{}: tiles={}, expected tiles >= 1", who, o.tiles_));
  }
  if (!(o.clip_grad_norm_ >= 0.0f) || !std::isfinite(o.clip_grad_norm_)) {
    throw InvalidArgument(fmt::format("{}: clip_grad_norm={}, expected a finite max norm > 0 (or 0: no clipping)", who,
                                      o.clip_grad_norm_));
  }
  check_augment_options(o.augment_);
  const DataParallel& dp = o.data_parallel_;
  const int world = dp.mpi != nullptr ? dp.mpi->size() : 1;
  if (world > 1 && dp.communicator == nullptr) {
    throw InvalidArgument(fmt::format("{}: {} ranks without a communicator", who, world));
  }
  if (dp.rank_sum == RankSum::kOrdered && dp.communicator != nullptr && dp.mpi == nullptr) {
    throw InvalidArgument(fmt::format("{}: ordered sums over the ranks on simulated ranks, expected allreduce (the "
                                      "simulation has no ordered sums)", who));
  }
}

TrainStep::TrainStep(Sequential& model, Optimizer& optimizer, TrainStepOptions options)
    : model_(model), optimizer_(optimizer), options_(std::move(options)), slots_(model, options_.tiles_, 1, options_.activations_) {
  check_step_options(options_, "TrainStep");
  if (!model.built()) {
    throw InvalidArgument("TrainStep: the model is not built, expected build() before training");
  }
  check_loss_fits(model, options_.loss_, "TrainStep");
  for (const NamedParameter& p : model.named_parameters()) {
    parameter_elements_ += static_cast<std::size_t>(p.parameter->value.numel());
  }
  // The collectives' ranks: MPI's world, or the simulated ranks of a simulation (which has no MPI).
  const DataParallel& dp = options_.data_parallel_;
  world_ = dp.communicator != nullptr ? dp.communicator->ranks() : dp.mpi != nullptr ? dp.mpi->size() : 1;
  if (options_.clip_grad_norm_ > 0.0f) grad_norm_squared_ = Tensor({2});
  ordered_ = world_ > 1 && dp.rank_sum == RankSum::kOrdered;
  if (ordered_) {
    for (const NamedParameter& p : model.named_parameters()) {
      if (!p.parameter->continues_partial_sums && !dp.sync_batchnorm) {
        throw InvalidArgument(fmt::format("TrainStep: ordered sums over the ranks (--rank-sum ordered) with {}, "
                                          "whose gradient one task computes from this rank's own BatchNorm "
                                          "statistics, expected synchronised BatchNorm (--sync-bn), which gives "
                                          "the statistics of one rank training on the whole batch",
                                          p.name));
      }
    }
  }
}

void TrainStep::submit(StepSlot& s, const StepBatch& b) {
  if (b.data == nullptr || static_cast<std::int64_t>(b.indices.size()) != s.rows || b.global_rows < s.rows) {
    throw InvalidArgument(fmt::format("TrainStep: a batch of {} samples ({} over the ranks) for a slot of {} rows, "
                                      "expected a dataset and as many samples as rows",
                                      b.indices.size(), b.global_rows, s.rows));
  }
  const DataParallel& dp = options_.data_parallel_;
  BatchSync sync;
  PassContext ctx{1, 0, b.step};
  if (dp.communicator != nullptr) ctx.layer_priority_stride = 2;
  if (dp.sync_batchnorm && world_ > 1) {
    sync.reducer = dp.communicator;
    for (const TileRange& r : split_rows(b.global_rows, world_)) sync.rows_per_rank.push_back(r.count);
    ctx.sync = &sync;
  }
  const int augmenting = options_.augment_.flip != 0 || options_.augment_.crop_padding > 0;
  const codelets::Augmentation augmentation{options_.augment_, options_.seed_, b.epoch, b.data->channels,
                                            b.data->height, b.data->width};
  submit_batch_load(s, *b.data, b.indices, options_.label_smoothing_, augmenting ? &augmentation : nullptr);
  model_.forward(s.acts, ctx);
  // Scaled by the global batch's rows (samples x positions of the logits' last axis), so that the sum over ranks is
  // the mean gradient of the global batch.
  const Shape& out = model_.output_shape();
  const std::int64_t positions = numel(out) / out.back();
  // A token model's: the counted targets of the global batch (every one: the windows hold no ignore_index), PyTorch's
  // mean over tokens.
  submit_batch_loss(s, options_.loss_, options_.label_smoothing_, 1.0f / static_cast<float>(b.global_rows * positions),
                    s.grads.back());
  submit_backward(s, ctx);
  s.pending = 1;
}

namespace {

// The gradients a layer (or a layer inside it) adds to that another layer owns (a tied head's table).
void collect_shared_gradients(Layer& layer, std::vector<Parameter*>& out) {
  for (Parameter* p : layer.shared_gradients()) out.push_back(p);
  for (Layer* child : layer.children()) collect_shared_gradients(*child, out);
}

}  // namespace

void TrainStep::submit_backward(StepSlot& s, const PassContext& forward_ctx) {
  runtime::Collectives* comm = options_.data_parallel_.communicator;
  PassContext ctx = forward_ctx;
  std::unordered_map<const Parameter*, std::string> chained;  // ordered sums: the gradients chained, by name
  if (ordered_) {
    // Every gradient that is not already summed over the ranks (synchronised BatchNorm's) continues the previous
    // rank's partial sum: receive it before the tasks that add to it are submitted.
    ctx.gradients_continue = options_.data_parallel_.mpi->rank() > 0 ? 1 : 0;
    for (const NamedParameter& p : model_.named_parameters()) {
      if (!p.parameter->continues_partial_sums) continue;
      chained.emplace(p.parameter, p.name);
      comm->begin_chain({&p.parameter->grad}, p.name);
    }
  }
  BucketPolicy buckets(options_.data_parallel_.buckets);
  std::vector<NamedParameter> waiting;  // gradients of the open bucket, whose updates wait for its sum
  auto sum_waiting = [&] {
    std::vector<Tensor*> grads;
    std::string name;
    for (const NamedParameter& p : waiting) {
      grads.push_back(&p.parameter->grad);
      name += name.empty() ? p.name : "," + p.name;
    }
    comm->sum(grads, name);
  };
  // With clipping, each final gradient (after the tile sum and the sum over the ranks) adds its squares to the
  // global norm's chain at once, and every update waits for the chain's end.
  const float max_norm = options_.clip_grad_norm_;
  std::vector<NamedParameter> to_clip;
  // The update is a gradient's last reader: its memory goes back.
  auto update = [&](const NamedParameter& p) {
    if (max_norm > 0.0f) {
      codelets::submit_grad_sum_of_squares({p.name, ctx.priority}, p.parameter->grad, grad_norm_squared_,
                                           to_clip.empty());
      to_clip.push_back(p);
      return;
    }
    optimizer_.submit_update(*p.parameter, p.name, ctx.priority);
    p.parameter->grad.discard();
  };
  auto submit_updates = [&] {
    for (const NamedParameter& p : waiting) update(p);
    waiting.clear();
  };
  std::size_t to_come = parameter_elements_;  // gradient elements of the layers whose backward is still to come
  model_.backward(s.acts, s.grads, ctx, [&](Layer& layer) {
    if (ordered_) {
      // A gradient this layer shares with a layer still to come goes round the ranks once more before that one.
      std::vector<Parameter*> shared;
      collect_shared_gradients(layer, shared);
      for (Parameter* p : shared) comm->relay_chain({&p->grad}, chained.at(p));
    }
    for (const NamedParameter& p : named_parameters(layer)) {
      const auto elements = static_cast<std::size_t>(p.parameter->grad.numel());
      to_come -= elements;
      if (comm != nullptr && p.parameter->reduced_over_ranks) {
        // Already summed over the ranks (synchronised BatchNorm): its update needs no bucket.
        update(p);
        continue;
      }
      if (ordered_) {
        // The chain through the ranks ends here; the update waits for the whole sum.
        comm->end_chain({&p.parameter->grad}, p.name);
        update(p);
        continue;
      }
      waiting.push_back(p);
      if (comm == nullptr) {
        submit_updates();
      } else if (buckets.add(elements)) {
        sum_waiting();
        submit_updates();
      }
    }
    if (comm != nullptr && buckets.layer_boundary(to_come)) {
      sum_waiting();
      submit_updates();
    }
  });
  if (comm != nullptr) {
    if (buckets.end_step()) sum_waiting();
    comm->end_step();
  }
  submit_updates();
  for (const NamedParameter& p : to_clip) {
    codelets::submit_clip_grad({p.name, ctx.priority}, grad_norm_squared_, max_norm, p.parameter->grad);
    optimizer_.submit_update(*p.parameter, p.name, ctx.priority);
    p.parameter->grad.discard();
  }
}

StepStats TrainStep::collect(StepSlot& s) {
  StepStats stats = read_step_stats(s);
  if (options_.data_parallel_.communicator != nullptr) options_.data_parallel_.communicator->check();
  return stats;
}

}  // namespace dtnn
