// SPDX-License-Identifier: Apache-2.0
// Softmax fused with categorical cross-entropy, one task per batch tile: gradient of the logits and the
// tile's loss sum and correct-prediction count.
#pragma once

#include "codelets/common.hpp"

namespace dtnn::codelets {

// logits, targets, dlogits: [n, classes]; stats: [tiles, 2] (loss sum, correct count per tile).
// grad_scale is 1 / (global batch size), so that summed tile gradients are the batch mean.
void submit_softmax_xent_fwd_bwd(const TaskTag& tag, const Tensor& logits, const Tensor& targets, float grad_scale,
                                 Tensor& dlogits, Tensor& stats, int tile);

}  // namespace dtnn::codelets
