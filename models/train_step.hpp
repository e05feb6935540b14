// SPDX-License-Identifier: Apache-2.0
// One training step as one task graph, on its own: load, forward of every tile, loss, backward, tile-gradient
// sums, the gradient buckets and their sums over the ranks, updates. TrainStep submits a step and returns: it
// never reads a tensor, so a driver may submit steps that nobody reads (simulation), time a single step
// (Engine::wait_all() after submit), or pipeline steps and read their statistics (fit, models/training.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "codelets/gather_batch.hpp"
#include "codelets/loss.hpp"
#include "core/loss_stats.hpp"
#include "core/augment_options.hpp"
#include "io/dataset.hpp"
#include "models/buckets.hpp"
#include "models/data_parallel.hpp"
#include "models/optimizer.hpp"
#include "models/sequential.hpp"
#include "runtime/collectives.hpp"

namespace dtnn {

// The buffers of one step in flight.
struct StepSlot {
  std::vector<Tensor> acts;
  std::vector<Tensor> grads;
  // A classifier's: float [n, ..., classes] (one-hot, smoothed); a model of token ids (Sequential::input_dtype()
  // kInt32): the next token of every position, int32 [n, positions].
  Tensor targets;
  Tensor scratch;  // loss gradient in evaluation, where no backward pass reads it
  // [tiles, kLossStats] for a classifier, [tiles, kTokenLossStats] for a token model: loss and metric sums per tile.
  Tensor stats;
  [[nodiscard]] bool token_targets() const { return targets.dtype() == DType::kInt32; }
  std::int64_t rows = 0;
  int pending = 0;  // 1: a step was submitted into the slot and its statistics are not read yet
};

// Two slots per batch size (the last batch of an epoch may be shorter), used by alternate steps: step k + 1 is
// submitted while step k runs, and StarPU's sequential consistency orders a slot's reuse after the step two
// before.
class StepSlots {
 public:
  // training 0: no activation gradients (evaluation). storage: of the tensors between layers (Sequential::allocate).
  StepSlots(Sequential& model, int tiles, int training, Storage storage = Storage::kTransient)
      : model_(model), tiles_(tiles), training_(training), storage_(storage) {}
  [[nodiscard]] StepSlot& slot(std::int64_t rows, std::int64_t step);

 private:
  Sequential& model_;
  int tiles_;
  int training_;
  Storage storage_;
  std::map<std::int64_t, std::array<std::unique_ptr<StepSlot>, 2>> slots_;
};

// Sums of the loss and metrics (LossStat) over rows.
struct StepStats {
  // The classifier losses' kLossStats, then kCounted (read from the token loss; the rows x positions of the
  // logits for the others).
  std::array<double, kTokenLossStats> sums{};
  std::int64_t rows = 0;
  bool tokens = false;  // from a token model's loss: sums[kCounted] are target tokens

  StepStats& operator+=(const StepStats& o);
  // Per counted row (kCounted: a sample of a classifier, a target token of a sequence model).
  [[nodiscard]] double mean(LossStat k) const { return sums[k] / sums[kCounted]; }
  // Over every rank of the world (the driver's communicator).
  void sum_over_ranks(const runtime::Mpi* mpi, const std::string& what);
};

// Reads a submitted step's statistics (waits for its loss tasks only), clears s.pending and re-raises the
// failures of tasks.
StepStats read_step_stats(StepSlot& s);

// The load tasks of a batch (one per tile): samples `indices` of data into s.acts[0], their targets into
// s.targets (a classifier's smoothed by `smoothing`; token windows' are ids, smoothed by the loss). augmentation
// may be null, and is for token windows.
void submit_batch_load(StepSlot& s, const io::Dataset& data, std::span<const std::int64_t> indices, float smoothing,
                       const codelets::Augmentation* augmentation);
// The loss tasks (one per tile): statistics into s.stats, the logits' gradient (scaled by grad_scale) into dlogits.
// Token targets take the token cross-entropy (codelets::submit_token_xent_fwd_bwd) with this label smoothing; a
// classifier's targets carry theirs from the load.
void submit_batch_loss(StepSlot& s, codelets::LossKind kind, float smoothing, float grad_scale, Tensor& dlogits);

// Throws InvalidArgument, prefixed by `who`, when the model is not built or does not fit data's samples and
// classes (a token dataset: a model of int32 ids [sequence] whose logits are [sequence, vocabulary]), or data is
// empty.
void check_model_fits(const Sequential& model, const io::Dataset& data, const char* who);
// Throws InvalidArgument, prefixed by `who`, for a token model with another loss than cross-entropy.
void check_loss_fits(const Sequential& model, codelets::LossKind kind, const char* who);

struct TrainStepOptions {
  TrainStepOptions& tiles(int n) { tiles_ = n; return *this; }
  TrainStepOptions& loss(codelets::LossKind k) { loss_ = k; return *this; }
  // Targets (1 - s) * one_hot + s / classes (categorical cross-entropy), in [0, 1).
  TrainStepOptions& label_smoothing(float s) { label_smoothing_ = s; return *this; }
  // Random flips and padded crops of the samples, each draw seeded by (seed, epoch, sample).
  TrainStepOptions& augment(AugmentOptions a) { augment_ = a; return *this; }
  TrainStepOptions& seed(std::uint64_t s) { seed_ = s; return *this; }
  TrainStepOptions& data_parallel(DataParallel dp) { data_parallel_ = dp; return *this; }
  // kTransient (default): activations and gradients hold memory from their first write to their last read in the
  // step; kOwned: every one of them allocated for the slot's life (the reference: the same results bitwise).
  TrainStepOptions& activations(Storage s) { activations_ = s; return *this; }
  // > 0: the gradients scaled by max_norm / (their global 2-norm + 1e-6) when that is below 1, before the
  // optimizer's step (PyTorch's clip_grad_norm_; codelets/grad_clip.hpp). 0: no clipping.
  TrainStepOptions& clip_grad_norm(float max_norm) { clip_grad_norm_ = max_norm; return *this; }

  int tiles_ = 2;
  codelets::LossKind loss_ = codelets::LossKind::kCategoricalCrossEntropy;
  float label_smoothing_ = 0.0f;
  AugmentOptions augment_;
  std::uint64_t seed_ = 0;
  DataParallel data_parallel_;
  Storage activations_ = Storage::kTransient;
  float clip_grad_norm_ = 0.0f;
};

// Throws InvalidArgument, prefixed by `who`, for tiles < 1, a smoothing outside [0, 1), bad augmentation options,
// or several ranks without a communicator.
void check_step_options(const TrainStepOptions& options, const char* who);

// This rank's part of one global batch.
struct StepBatch {
  const io::Dataset* data = nullptr;
  std::span<const std::int64_t> indices;  // this rank's samples of the global batch
  std::int64_t global_rows = 0;           // rows of the global batch over every rank: the loss's scale
  std::int64_t step = 0;                  // global step: per-step draws (dropout masks)
  int epoch = 0;                          // augmentation draws
};

// The step builder: owns the two slots per batch size and submits steps into them.
class TrainStep {
 public:
  TrainStep(Sequential& model, Optimizer& optimizer, TrainStepOptions options);

  // The slot of a step of `rows` rows at global step `step`. A driver that reads statistics reads the slot's
  // pending step (read_step_stats) before submitting into it again, or that step's statistics are overwritten.
  [[nodiscard]] StepSlot& slot(std::int64_t rows, std::int64_t step) { return slots_.slot(rows, step); }
  // Submits the whole graph of one step into s (s.rows == batch.indices.size()) and sets s.pending. Reads no
  // tensor.
  void submit(StepSlot& s, const StepBatch& batch);
  // read_step_stats, then the communicator's check(): a failure of the communication thread is raised here.
  StepStats collect(StepSlot& s);

  [[nodiscard]] const TrainStepOptions& options() const { return options_; }

 private:
  // Backward with the gradient buckets: each bucket's sum is issued as soon as its last gradient's tile sum is
  // submitted, and its updates right after (they wait for the sum). Ordered sums over the ranks: each gradient's
  // chain is received before the backward is submitted and passed on after its layer's tasks.
  void submit_backward(StepSlot& s, const PassContext& forward_ctx);

  Sequential& model_;
  Optimizer& optimizer_;
  TrainStepOptions options_;
  StepSlots slots_;
  std::size_t parameter_elements_ = 0;
  int world_ = 1;
  bool ordered_ = false;      // RankSum::kOrdered over several ranks
  Tensor grad_norm_squared_;  // with clip_grad_norm: the sum of squares of the step's gradients (one double)
};

}  // namespace dtnn
