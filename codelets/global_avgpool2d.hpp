// SPDX-License-Identifier: Apache-2.0
// GlobalAvgPool2d tasks, one per batch tile: x [n, c, plane] -> y [n, c, 1, 1].
#pragma once

#include "codelets/common.hpp"

namespace dtnn::codelets {

void submit_global_avgpool2d_fwd(const TaskTag& tag, int channels, const Tensor& x, Tensor& y, int tile);
void submit_global_avgpool2d_bwd_data(const TaskTag& tag, int channels, const Tensor& dy, Tensor& dx, int tile);

}  // namespace dtnn::codelets
