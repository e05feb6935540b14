// SPDX-License-Identifier: Apache-2.0
// Softmax tasks over the channels (dim 1) of a batch, one per batch tile. For the loss, prefer the fused
// softmax + cross-entropy of loss.hpp; this one is the standalone layer.
#pragma once

#include "codelets/common.hpp"

namespace dtnn::codelets {

// x, y: [n, channels, *plane]
void submit_softmax_fwd(const TaskTag& tag, int channels, const Tensor& x, Tensor& y, int tile);
// dx = y * (dy - sum over channels of dy * y)
void submit_softmax_bwd_data(const TaskTag& tag, int channels, const Tensor& y, const Tensor& dy, Tensor& dx,
                             int tile);

}  // namespace dtnn::codelets
