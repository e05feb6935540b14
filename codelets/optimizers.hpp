// SPDX-License-Identifier: Apache-2.0
// Adaptive optimizer updates (RMSprop, Adam/AdamW, NAdam): one task per parameter, in place on the weights
// and on the optimizer's state tensors. The step-dependent scalars come precomputed in the params.
#pragma once

#include "codelets/common.hpp"
#include "codelets/cpu/optim_kernels.hpp"

namespace dtnn::codelets {

// momentum_buf must be given when params.momentum != 0, grad_avg when params.centered; both are null otherwise.
void submit_rmsprop_update(const TaskTag& tag, const RmspropParams& params, Tensor& weights,
                           const Tensor& grad, Tensor& square_avg, Tensor* momentum_buf, Tensor* grad_avg);

// Adam and AdamW (the params' decay_factor carries AdamW's decoupled decay).
void submit_adam_update(const TaskTag& tag, const AdamParams& params, Tensor& weights,
                        const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq);

void submit_nadam_update(const TaskTag& tag, const NadamParams& params, Tensor& weights,
                         const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq);

}  // namespace dtnn::codelets
