// SPDX-License-Identifier: Apache-2.0
// ReLU tasks, one per batch tile.
#pragma once

#include "codelets/common.hpp"

namespace dtnn::codelets {

void submit_relu_fwd(const TaskTag& tag, const Tensor& x, Tensor& y, int tile);
// dx = dy where y > 0 (y is the forward output)
void submit_relu_bwd_data(const TaskTag& tag, const Tensor& y, const Tensor& dy, Tensor& dx, int tile);

}  // namespace dtnn::codelets
