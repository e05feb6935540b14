// SPDX-License-Identifier: Apache-2.0
// The loss, fused with the output activation, one task per batch tile: gradient of the logits and the tile's
// loss and metric sums (LossStat).
#pragma once

#include "codelets/common.hpp"
#include "codelets/cpu/kernels.hpp"
#include "codelets/kinds.hpp"

namespace dtnn::codelets {

// logits, targets, dlogits: [n, classes]; stats: [tiles, kLossStats].
// grad_scale is 1 / (global batch size), so that summed tile gradients are the batch mean.
void submit_loss_fwd_bwd(const TaskTag& tag, LossKind kind, const Tensor& logits, const Tensor& targets,
                         float grad_scale, Tensor& dlogits, Tensor& stats, int tile);

}  // namespace dtnn::codelets
