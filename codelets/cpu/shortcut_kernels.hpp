// SPDX-License-Identifier: Apache-2.0
// CPU kernels of the parameter-free residual shortcut of He et al. 2016's CIFAR ResNets ("option A"): spatial
// subsampling by a stride and zero channels added on both sides, so that the shortcut matches a stage that halves
// the resolution and doubles the channels without a projection. The rules of kernels.hpp hold: plain functions on
// raw fp32 NCHW buffers, no StarPU, single-threaded, deterministic, outputs overwritten.
#pragma once

namespace dtnn::kernels::cpu {

struct ShortcutPadShape {
  int n = 1;          // samples
  int c = 1;          // input channels
  int h = 1, w = 1;   // input height, width
  int k = 1;          // output channels: c plus (k - c) / 2 zero channels before and after
  int stride = 1;     // keeps rows and columns 0, stride, 2 * stride, ... (x[:, :, ::stride, ::stride])
  [[nodiscard]] int pad_front() const { return (k - c) / 2; }
  [[nodiscard]] int out_h() const { return (h + stride - 1) / stride; }
  [[nodiscard]] int out_w() const { return (w + stride - 1) / stride; }
};

// y[i, ch + pad_front, r, q] = x[i, ch, stride * r, stride * q] for ch < c; the other channels of y are 0.
void shortcut_pad_fwd(const ShortcutPadShape& sh, const float* x, float* y);
// dx[i, ch, stride * r, stride * q] = dy[i, ch + pad_front, r, q]; the cells that the stride skips get 0.
void shortcut_pad_bwd_data(const ShortcutPadShape& sh, const float* dy, float* dx);

}  // namespace dtnn::kernels::cpu
