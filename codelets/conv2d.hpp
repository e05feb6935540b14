// SPDX-License-Identifier: Apache-2.0
// Conv2d tasks, one per batch tile. x [n, c, h, w], weights [k, c/groups, r, s], bias [k] (optional).
// The geometry comes as a kernels::cpu::Conv2dShape whose n is ignored (each task uses its tile's rows).
#pragma once

#include "codelets/common.hpp"
#include "codelets/cpu/kernels.hpp"

namespace dtnn::codelets {

void submit_conv2d_fwd(const TaskTag& tag, const kernels::cpu::Conv2dShape& shape, const Tensor& x, const Tensor& w,
                       const Tensor* b, Tensor& y, int tile);
void submit_conv2d_bwd_data(const TaskTag& tag, const kernels::cpu::Conv2dShape& shape, const Tensor& dy,
                            const Tensor& w, Tensor& dx, int tile);
// dw_tiles [tiles, k, c/groups, r, s] and db_tiles [tiles, k] (nullable) hold one partial gradient per tile.
void submit_conv2d_bwd_weights(const TaskTag& tag, const kernels::cpu::Conv2dShape& shape, const Tensor& x,
                               const Tensor& dy, Tensor& dw_tiles, Tensor* db_tiles, int tile);

}  // namespace dtnn::codelets
