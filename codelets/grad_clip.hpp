// SPDX-License-Identifier: Apache-2.0
// Gradient clipping by the global norm as tasks (PyTorch's torch.nn.utils.clip_grad_norm_ before the optimizer's
// step). The sum of squares runs as a chain of one task per parameter on a shared accumulator, in the order the
// caller submits them (a fixed order, hence the same bits whatever the workers): each link starts as soon as its
// gradient is final, while the backward pass goes on. Each update then waits for the chain's end, as it must.
#pragma once

#include "codelets/common.hpp"

namespace dtnn::codelets {

// accumulator: 2 floats holding a double (the sum of squares so far). first: overwrite it rather than add.
void submit_grad_sum_of_squares(const TaskTag& tag, const Tensor& grad, Tensor& accumulator, bool first);

// grad *= max_norm / (sqrt(accumulator) + 1e-6) when that factor is below 1.
void submit_clip_grad(const TaskTag& tag, const Tensor& accumulator, float max_norm, Tensor& grad);

// The accumulator's global norm, once its chain has run (reads it back; waits).
double grad_norm_of(const Tensor& accumulator);

}  // namespace dtnn::codelets
