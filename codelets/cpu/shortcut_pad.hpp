// SPDX-License-Identifier: Apache-2.0
// CPU kernels of the parameter-free residual shortcut of He et al. 2016's CIFAR ResNets ("option A"): spatial
// subsampling by a stride and zero channels added on both sides, so that the shortcut matches a stage that halves
// the resolution and doubles the channels without a projection. The rules of kernels.hpp hold: plain functions on
// raw fp32 NCHW buffers, no StarPU, single-threaded, deterministic, outputs overwritten.
#pragma once

#include "core/shapes.hpp"

namespace dtnn::kernels::cpu {


// y[i, ch + pad_front, r, q] = x[i, ch, stride * r, stride * q] for ch < c; the other channels of y are 0.
void shortcut_pad_fwd(const ShortcutPadShape& sh, const float* x, float* y);
// dx[i, ch, stride * r, stride * q] = dy[i, ch + pad_front, r, q]; the cells that the stride skips get 0.
void shortcut_pad_bwd_data(const ShortcutPadShape& sh, const float* dy, float* dx);

}  // namespace dtnn::kernels::cpu
