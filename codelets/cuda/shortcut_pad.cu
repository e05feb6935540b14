// SPDX-License-Identifier: Apache-2.0
// The option-A residual shortcut after codelets/cpu/shortcut_pad.cpp: copies and zeros only, bitwise the CPU's.
#include "codelets/cuda/launch.cuh"
#include "codelets/cuda/shortcut_pad.hpp"

namespace dtnn::kernels::cuda {
namespace {

using std::size_t;

struct PadGeometry {
  size_t n;
  int c, h, w;
  int k, stride;
  int out_h, out_w, front;
};

PadGeometry geometry(const ShortcutPadShape& sh) {
  return PadGeometry{static_cast<size_t>(sh.n), sh.c, sh.h, sh.w, sh.k, sh.stride, sh.out_h(), sh.out_w(),
                     sh.pad_front()};
}

// One thread per output value: a kept input value or a zero channel.
__global__ void shortcut_pad_fwd_kernel(PadGeometry g, const float* __restrict__ x, float* __restrict__ y) {
  const size_t total = g.n * static_cast<size_t>(g.k) * static_cast<size_t>(g.out_h) * static_cast<size_t>(g.out_w);
  DTNN_GRID_STRIDE(idx, total) {
    size_t t = idx;
    const size_t q = t % static_cast<size_t>(g.out_w);
    t /= static_cast<size_t>(g.out_w);
    const size_t r = t % static_cast<size_t>(g.out_h);
    t /= static_cast<size_t>(g.out_h);
    const int ch = static_cast<int>(t % static_cast<size_t>(g.k)) - g.front;
    const size_t i = t / static_cast<size_t>(g.k);
    float v = 0.0f;
    if (ch >= 0 && ch < g.c) {
      const size_t plane = (i * static_cast<size_t>(g.c) + static_cast<size_t>(ch)) * static_cast<size_t>(g.h);
      v = x[(plane + r * static_cast<size_t>(g.stride)) * static_cast<size_t>(g.w) + q * static_cast<size_t>(g.stride)];
    }
    y[idx] = v;
  }
}

// One thread per input-gradient value: the matching output gradient where the stride kept the cell, else 0.
__global__ void shortcut_pad_bwd_data_kernel(PadGeometry g, const float* __restrict__ dy, float* __restrict__ dx) {
  const size_t total = g.n * static_cast<size_t>(g.c) * static_cast<size_t>(g.h) * static_cast<size_t>(g.w);
  const auto stride = static_cast<size_t>(g.stride);
  DTNN_GRID_STRIDE(idx, total) {
    size_t t = idx;
    const size_t col = t % static_cast<size_t>(g.w);
    t /= static_cast<size_t>(g.w);
    const size_t row = t % static_cast<size_t>(g.h);
    t /= static_cast<size_t>(g.h);
    const size_t ch = t % static_cast<size_t>(g.c);
    const size_t i = t / static_cast<size_t>(g.c);
    float v = 0.0f;
    if (row % stride == 0 && col % stride == 0) {
      const size_t plane = i * static_cast<size_t>(g.k) + static_cast<size_t>(g.front) + ch;
      v = dy[(plane * static_cast<size_t>(g.out_h) + row / stride) * static_cast<size_t>(g.out_w) + col / stride];
    }
    dx[idx] = v;
  }
}

}  // namespace

void shortcut_pad_fwd(const ShortcutPadShape& sh, const float* x, float* y, cudaStream_t stream) {
  const PadGeometry g = geometry(sh);
  const size_t total = g.n * static_cast<size_t>(g.k) * static_cast<size_t>(g.out_h) * static_cast<size_t>(g.out_w);
  if (total == 0) return;
  shortcut_pad_fwd_kernel<<<blocks_for(total), kThreads, 0, stream>>>(g, x, y);
}

void shortcut_pad_bwd_data(const ShortcutPadShape& sh, const float* dy, float* dx, cudaStream_t stream) {
  const PadGeometry g = geometry(sh);
  const size_t total = g.n * static_cast<size_t>(g.c) * static_cast<size_t>(g.h) * static_cast<size_t>(g.w);
  if (total == 0) return;
  shortcut_pad_bwd_data_kernel<<<blocks_for(total), kThreads, 0, stream>>>(g, dy, dx);
}

}  // namespace dtnn::kernels::cuda
