// SPDX-License-Identifier: Apache-2.0
// The loss, fused with the output activation, one task per batch tile: gradient of the logits and the tile's
// loss and metric sums (LossStat).
#pragma once

#include "codelets/common.hpp"
#include "codelets/cpu/kernels.hpp"
#include "codelets/kinds.hpp"

namespace dtnn::codelets {

// logits, targets, dlogits: [n, ..., classes], the loss over the last axis at every position; stats: [tiles,
// kLossStats]. grad_scale is 1 / (the rows of the global batch: samples x positions), so that summed tile gradients
// are the batch mean.
void submit_loss_fwd_bwd(const TaskTag& tag, LossKind kind, const Tensor& logits, const Tensor& targets,
                         float grad_scale, Tensor& dlogits, Tensor& stats, int tile);

// Token cross-entropy (kernels::cpu::token_xent_fwd_bwd): logits, dlogits fp32 [n, ..., classes], targets int32
// [n, ...] with one id per position of the logits; stats: [tiles, kTokenLossStats]. grad_scale: 1 / (the counted
// targets of the global batch) gives PyTorch's mean. On a CUDA worker, a target outside the vocabulary gives its row
// a NaN loss instead of a DataError (codelets/cuda/loss.hpp).
void submit_token_xent_fwd_bwd(const TaskTag& tag, const TokenXentParams& params, const Tensor& logits,
                               const Tensor& targets, float grad_scale, Tensor& dlogits, Tensor& stats, int tile);

}  // namespace dtnn::codelets
