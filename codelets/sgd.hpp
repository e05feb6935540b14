// SPDX-License-Identifier: Apache-2.0
// SGD with momentum, weight decay and Nesterov: one task per parameter, in place.
#pragma once

#include "codelets/common.hpp"
#include "codelets/cpu/optim_kernels.hpp"

namespace dtnn::codelets {

void submit_sgd_update(const TaskTag& tag, const SgdParams& params, Tensor& weights,
                       const Tensor& grad, Tensor& velocity);

}  // namespace dtnn::codelets
