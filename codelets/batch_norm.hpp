// SPDX-License-Identifier: Apache-2.0
// BatchNorm tasks. Batch statistics are reduced over the whole batch in sample order, so that the tile count
// never changes a result bit:
//   per tile:  per-sample, per-channel partial sums           -> partials [n, width] (tiled like the batch)
//   once:      sums of the partials in sample order, in double -> the per-channel results
// The "once" step is a chain of tasks when the tiles do not fit StarPU's buffer limit; the chain carries its
// running double sums in an accumulator tensor (acc: [>= 2 * width] floats holding `width` doubles, bit-copied),
// so chained and single-task reductions give the same bits.
//
// Per-step tensors of a layer (all [.., C] with C channels; plane = values per sample and channel):
//   stats      [2, C]: batch mean, 1 / sqrt(var + eps)       (frozen backward: running mean and its invstd)
//   grad_stats [2, C]: mean over the batch of dy and of dy * xhat, for the data gradient
#pragma once

#include "codelets/common.hpp"
#include "codelets/cpu/nn_kernels.hpp"

namespace dtnn::codelets {

// partials[tile] = per-sample sums of x over each channel's plane (partials: [n, C], tiled like x).
void submit_batch_norm_sums(const TaskTag& tag, int channels, const Tensor& x, Tensor& partials, int tile);
// stats row 0 = sum of every tile's partials / count (count = n * plane).
void submit_batch_norm_mean(const TaskTag& tag, double count, const Tensor& partials, Tensor& acc, Tensor& stats);
// partials[tile] = per-sample sums of (x - mean)^2.
void submit_batch_norm_sqdev_sums(const TaskTag& tag, int channels, const Tensor& x, const Tensor& stats,
                                  Tensor& partials, int tile);
// stats row 1 = invstd of the biased variance; updates the running statistics and adds 1 to batches[0].
void submit_batch_norm_var(const TaskTag& tag, const BatchNormUpdate& update, const Tensor& partials,
                           Tensor& acc, Tensor& stats, Tensor& running_mean, Tensor& running_var, Tensor& batches);
// What the forward task does to the normalised value before storing it (fused passes, models/fusion.hpp): add the
// residual's tile (a residual block's other path, shaped and tiled as x), then ReLU. Each codelet variant has its
// own name ("batch_norm_fwd_relu", "_add", "_add_relu") and writes the bits of the separate passes.
struct BatchNormEpilogue {
  const Tensor* residual = nullptr;
  int relu = 0;
};

// y[tile] = (x - mean) * invstd * gamma + beta, then the epilogue; gamma and beta are both given or both null.
void submit_batch_norm_fwd(const TaskTag& tag, int channels, const Tensor& x, const Tensor& stats,
                           const Tensor* gamma, const Tensor* beta, Tensor& y, int tile,
                           const BatchNormEpilogue& epilogue = {});
// Evaluation: y[tile] from the running statistics, then the epilogue.
void submit_batch_norm_infer_fwd(const TaskTag& tag, int channels, double eps, const Tensor& x,
                                 const Tensor& running_mean, const Tensor& running_var, const Tensor* gamma,
                                 const Tensor* beta, Tensor& y, int tile, const BatchNormEpilogue& epilogue = {});
// stats = [running_mean; 1 / sqrt(running_var + eps)], for the backward pass in evaluation mode.
void submit_batch_norm_frozen_stats(const TaskTag& tag, double eps, const Tensor& running_mean,
                                    const Tensor& running_var, Tensor& stats);
// partials[tile] ([n, 2C]) = per-sample sums of dy and of dy * xhat. With relu_y (the output of a fused ReLU), dy
// is that ReLU's output gradient and the sums are those of dy masked by relu_y > 0, formed inside the task.
void submit_batch_norm_bwd_sums(const TaskTag& tag, int channels, const Tensor& x, const Tensor& dy,
                                const Tensor& stats, Tensor& partials, int tile, const Tensor* relu_y = nullptr);
// grad_stats from the sample-order sums; dgamma = sum dy * xhat, dbeta = sum dy (both given or both null).
void submit_batch_norm_bwd_reduce(const TaskTag& tag, double count, const Tensor& partials, Tensor& acc,
                                  Tensor& grad_stats, Tensor* dgamma, Tensor* dbeta);
// dx[tile]; grad_stats null for frozen statistics (dx = gamma * invstd * dy); relu_y as for the sums.
void submit_batch_norm_bwd_data(const TaskTag& tag, int channels, const Tensor& x, const Tensor& dy,
                                const Tensor& stats, const Tensor* grad_stats, const Tensor* gamma, Tensor& dx,
                                int tile, const Tensor* relu_y = nullptr);

}  // namespace dtnn::codelets
