// SPDX-License-Identifier: Apache-2.0
// Shapes of the operations that kernels (CPU and CUDA), codelets and layers share. Plain structs: they know
// nothing of StarPU, of a device or of a layer.
#pragma once

// The geometry helpers below are compiled for the CUDA kernels' device code too, so that CPU and GPU windows
// come from one definition.
#ifdef __CUDACC__
#define DTNN_HOST_DEVICE __host__ __device__
#else
#define DTNN_HOST_DEVICE
#endif

namespace dtnn {

// Convolution geometry, shared by every convolution variant (CPU and CUDA kernels, codelets, layers).
struct Conv2dShape {
  int n = 1;         // samples
  int c = 1;         // input channels
  int h = 1, w = 1;  // input height, width
  int k = 1;         // output channels
  int r = 1, s = 1;  // kernel height, width
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int dil_h = 1, dil_w = 1;
  int groups = 1;  // c and k are both divisible by groups; weights are [k, c/groups, r, s]

  [[nodiscard]] int out_h() const { return (h + pad_top + pad_bottom - dil_h * (r - 1) - 1) / stride_h + 1; }
  [[nodiscard]] int out_w() const { return (w + pad_left + pad_right - dil_w * (s - 1) - 1) / stride_w + 1; }
  // Multiply-adds x 2 of the forward pass (also the cost of each backward pass).
  [[nodiscard]] double flops() const {
    return 2.0 * n * k * out_h() * out_w() * (static_cast<double>(c) / groups) * r * s;
  }
};

// Max and average pooling windows.
struct Pool2dShape {
  int n = 1, c = 1, h = 1, w = 1;
  int kh = 2, kw = 2;
  int stride_h = 2, stride_w = 2;
  int pad_h = 0, pad_w = 0;  // symmetric; padded cells never win a max
  // 1: PyTorch's ceil_mode: a last, partial window is kept when it starts inside the input or its left padding.
  int ceil_mode = 0;
  [[nodiscard]] int out_h() const { return out_size(h, kh, stride_h, pad_h); }
  [[nodiscard]] int out_w() const { return out_size(w, kw, stride_w, pad_w); }
  [[nodiscard]] int out_size(int in, int k, int s, int p) const {
    const int span = in + 2 * p - k;
    if (!ceil_mode) return span / s + 1;
    int out = (span + s - 1) / s + 1;
    if ((out - 1) * s >= in + p) --out;
    return out;
  }
  // 2x2 windows with stride 2, no padding and every window inside the input (ceil mode's partial windows are
  // not): the disjoint windows that the kernels' fast paths handle.
  [[nodiscard]] bool plain_2x2() const {
    return kh == 2 && kw == 2 && stride_h == 2 && stride_w == 2 && pad_h == 0 && pad_w == 0 && 2 * out_h() <= h &&
           2 * out_w() <= w;
  }
};

// Window o of a pooling along one axis (input size `in`, symmetric padding `pad`): the input cells [lo, hi) it
// covers, and how many cells it covers in the padded input (`padded`, the divisor of an average that counts
// padding: PyTorch clips a window to the padded input). Max and average pooling, CPU and CUDA, all take their
// windows from here.
struct PoolSpan {
  int lo, hi;
  int padded;
};

DTNN_HOST_DEVICE inline PoolSpan pool_span(int o, int in, int kernel, int stride, int pad) {
  const int start = o * stride - pad;
  const int end = start + kernel < in + pad ? start + kernel : in + pad;
  return PoolSpan{start > 0 ? start : 0, end < in ? end : in, end - start};
}

// The parameter-free "option A" shortcut of He et al. 2016's CIFAR ResNets: subsampling by a stride, zero
// channels added on both sides.
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

// Scaled dot-product attention of one batch tile: each sample is [seq, 3 * embed] with the heads' queries, keys
// and values side by side (q = columns [0, E), k = [E, 2E), v = [2E, 3E); head h holds columns [h d, (h + 1) d) of
// each, d = head_dim), as nn.MultiheadAttention's packed in_proj gives them.
struct AttentionShape {
  int seq = 0;
  int heads = 0;
  int head_dim = 0;
  int causal = 0;      // 1: position r attends to positions <= r only
  float scale = 1.0f;  // multiplies q k^T: 1 / sqrt(head_dim)
};

}  // namespace dtnn
