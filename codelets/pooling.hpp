// SPDX-License-Identifier: Apache-2.0
// Pooling tasks, one per batch tile: max and average pooling over windows (the shape's n is replaced by the
// tile's rows) and global average pooling, x [n, c, plane] -> y [n, c, 1, 1].
#pragma once

#include "codelets/common.hpp"
#include "core/shapes.hpp"

namespace dtnn::codelets {

void submit_maxpool2d_fwd(const TaskTag& tag, const Pool2dShape& shape, const Tensor& x, Tensor& y,
                          int tile);
// The winner of each window is found again from x, so the forward pass stores no index.
void submit_maxpool2d_bwd_data(const TaskTag& tag, const Pool2dShape& shape, const Tensor& x,
                               const Tensor& dy, Tensor& dx, int tile);

// count_include_pad: see kernels::cpu::avgpool2d_fwd.
void submit_avgpool2d_fwd(const TaskTag& tag, const Pool2dShape& shape, int count_include_pad,
                          const Tensor& x, Tensor& y, int tile);
void submit_avgpool2d_bwd_data(const TaskTag& tag, const Pool2dShape& shape, int count_include_pad,
                               const Tensor& dy, Tensor& dx, int tile);

void submit_global_avgpool2d_fwd(const TaskTag& tag, int channels, const Tensor& x, Tensor& y, int tile);
void submit_global_avgpool2d_bwd_data(const TaskTag& tag, int channels, const Tensor& dy, Tensor& dx, int tile);

}  // namespace dtnn::codelets
