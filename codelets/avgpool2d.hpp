// SPDX-License-Identifier: Apache-2.0
// AvgPool2d tasks, one per batch tile (the shape's n is replaced by the tile's rows).
#pragma once

#include "codelets/common.hpp"
#include "codelets/cpu/kernels.hpp"

namespace dtnn::codelets {

// count_include_pad: see kernels::cpu::avgpool2d_fwd.
void submit_avgpool2d_fwd(const TaskTag& tag, const Pool2dShape& shape, int count_include_pad,
                          const Tensor& x, Tensor& y, int tile);
void submit_avgpool2d_bwd_data(const TaskTag& tag, const Pool2dShape& shape, int count_include_pad,
                               const Tensor& dy, Tensor& dx, int tile);

}  // namespace dtnn::codelets
