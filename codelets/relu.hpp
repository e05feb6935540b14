// SPDX-License-Identifier: Apache-2.0
// ReLU tasks, one per batch tile.
#pragma once

#include <string_view>

#include "codelets/common.hpp"

namespace dtnn::codelets {

void submit_relu_fwd(const TaskTag& tag, const Tensor& x, Tensor& y, int tile);
// dx = dy where y > 0 (y is the forward output)
void submit_relu_bwd_data(const TaskTag& tag, const Tensor& y, const Tensor& dy, Tensor& dx, int tile);
// dx = other + (y > 0 ? dy : 0): the ReLU fused after a residual Add, its gradient added to the other path's share
// of the block's input gradient in the same task (bitwise relu_bwd_data, then add of {other, that}).
void submit_relu_bwd_data_add(const TaskTag& tag, std::string_view pass, const Tensor& y, const Tensor& dy,
                              const Tensor& other, Tensor& dx, int tile);

}  // namespace dtnn::codelets
