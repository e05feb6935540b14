// SPDX-License-Identifier: Apache-2.0
// Softmax tasks over the channels (dim 1) of a batch, one per batch tile. For the loss, prefer the fused
// softmax + cross-entropy of loss.hpp; this one is the standalone layer.
#pragma once

#include <cstdint>

#include "codelets/common.hpp"

namespace dtnn::codelets {

// The axis of a softmax within a sample: each sample is [outer, channels, plane...] and the softmax runs over
// channels at every (outer, plane) position. {1, C}: the channels of (C, H, W); {S, V}: the last axis of (S, V).
struct SoftmaxAxis {
  std::int64_t outer = 1;
  int channels = 1;
};

// x, y: [n, channels, *plane]
void submit_softmax_fwd(const TaskTag& tag, int channels, const Tensor& x, Tensor& y, int tile);
// dx = y * (dy - sum over channels of dy * y)
void submit_softmax_bwd_data(const TaskTag& tag, int channels, const Tensor& y, const Tensor& dy, Tensor& dx,
                             int tile);
// The same over any axis: x, y: [n, outer, channels, *plane].
void submit_softmax_fwd(const TaskTag& tag, const SoftmaxAxis& axis, const Tensor& x, Tensor& y, int tile);
void submit_softmax_bwd_data(const TaskTag& tag, const SoftmaxAxis& axis, const Tensor& y, const Tensor& dy,
                             Tensor& dx, int tile);

}  // namespace dtnn::codelets
