// SPDX-License-Identifier: Apache-2.0
// MaxPool2d tasks, one per batch tile (the shape's n is replaced by the tile's rows).
#pragma once

#include "codelets/common.hpp"
#include "codelets/cpu/kernels.hpp"

namespace dtnn::codelets {

void submit_maxpool2d_fwd(const TaskTag& tag, const Pool2dShape& shape, const Tensor& x, Tensor& y,
                          int tile);
// The winner of each window is found again from x, so the forward pass stores no index.
void submit_maxpool2d_bwd_data(const TaskTag& tag, const Pool2dShape& shape, const Tensor& x,
                               const Tensor& dy, Tensor& dx, int tile);

}  // namespace dtnn::codelets
