// SPDX-License-Identifier: Apache-2.0
// Softmax after codelets/cpu/softmax.cpp, operation for operation. Where a sum runs in a tree rather than in the
// CPU's order, the terms are still those of the CPU; __dmul_rn keeps nvcc from fusing a product into the
// following addition where the host (no FMA in the x86-64 baseline) rounds twice.
#include "codelets/cuda/launch.cuh"
#include "codelets/cuda/softmax.hpp"

namespace dtnn::kernels::cuda {
namespace {

using std::size_t;

// A channel column is the c values of one (sample, position) pair, `plane` apart. Wide planes give one thread per
// column: neighbouring threads read neighbouring positions, and each sums its column in the CPU's channel order.
// Narrow planes with many channels ((N, F) tensors above all) give one block per column instead, reduced in a fixed
// tree, so that a large row does not leave the GPU to a handful of threads.
constexpr size_t kThreadPerColumnPlane = 32;
constexpr int kBlockPerColumnChannels = 64;
constexpr int kColumnThreads = 128;

bool block_per_column(int c, size_t plane) { return plane < kThreadPerColumnPlane && c >= kBlockPerColumnChannels; }

// The CPU's running maximum: "!(v <= m)" also takes a NaN. Which value a NaN leaves as the maximum never shows:
// its exponential makes the column's sum, hence every output of the column, NaN.
__device__ inline float take_max(float m, float v) { return !(v <= m) ? v : m; }

__global__ void softmax_fwd_thread_per_column(int n, int c, size_t plane, const float* __restrict__ x,
                                              float* __restrict__ y) {
  const size_t columns = static_cast<size_t>(n) * plane;
  const size_t sample = static_cast<size_t>(c) * plane;
  DTNN_GRID_STRIDE(col, columns) {
    const size_t i = col / plane;
    const size_t p = col - i * plane;
    const float* xs = x + i * sample + p;
    float* ys = y + i * sample + p;
    float m = xs[0];
    for (int ch = 1; ch < c; ++ch) m = take_max(m, xs[static_cast<size_t>(ch) * plane]);
    double sum = 0.0;
    for (int ch = 0; ch < c; ++ch) sum += static_cast<double>(expf(xs[static_cast<size_t>(ch) * plane] - m));
    const double inv = 1.0 / sum;
    for (int ch = 0; ch < c; ++ch) {
      const size_t off = static_cast<size_t>(ch) * plane;
      ys[off] = static_cast<float>(static_cast<double>(expf(xs[off] - m)) * inv);
    }
  }
}

__global__ void softmax_fwd_block_per_column(int n, int c, size_t plane, const float* __restrict__ x,
                                             float* __restrict__ y) {
  __shared__ float smax[kColumnThreads];
  __shared__ double ssum[kColumnThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const size_t columns = static_cast<size_t>(n) * plane;
  const size_t sample = static_cast<size_t>(c) * plane;
  for (size_t col = blockIdx.x; col < columns; col += gridDim.x) {
    const size_t i = col / plane;
    const size_t p = col - i * plane;
    const float* xs = x + i * sample + p;
    float* ys = y + i * sample + p;
    // -inf is the identity of take_max on every value but NaN, whose effect is the all-NaN column anyway.
    float m = -INFINITY;
    for (int ch = tid; ch < c; ch += kColumnThreads) m = take_max(m, xs[static_cast<size_t>(ch) * plane]);
    smax[tid] = m;
    __syncthreads();
    for (int s = kColumnThreads / 2; s > 0; s >>= 1) {
      if (tid < s) smax[tid] = take_max(smax[tid], smax[tid + s]);
      __syncthreads();
    }
    m = smax[0];
    double sum = 0.0;
    for (int ch = tid; ch < c; ch += kColumnThreads) {
      sum += static_cast<double>(expf(xs[static_cast<size_t>(ch) * plane] - m));
    }
    ssum[tid] = sum;
    __syncthreads();
    for (int s = kColumnThreads / 2; s > 0; s >>= 1) {
      if (tid < s) ssum[tid] += ssum[tid + s];
      __syncthreads();
    }
    const double inv = 1.0 / ssum[0];
    for (int ch = tid; ch < c; ch += kColumnThreads) {
      const size_t off = static_cast<size_t>(ch) * plane;
      ys[off] = static_cast<float>(static_cast<double>(expf(xs[off] - m)) * inv);
    }
    // smax[0] and ssum[0] are read by every thread before the next column overwrites them.
    __syncthreads();
  }
}

// The products of two floats are exact in double, so fused or not they round alike.
__global__ void softmax_bwd_data_thread_per_column(int n, int c, size_t plane, const float* __restrict__ y,
                                                   const float* __restrict__ dy, float* __restrict__ dx) {
  const size_t columns = static_cast<size_t>(n) * plane;
  const size_t sample = static_cast<size_t>(c) * plane;
  DTNN_GRID_STRIDE(col, columns) {
    const size_t i = col / plane;
    const size_t p = col - i * plane;
    const size_t base = i * sample + p;
    double dot = 0.0;
    for (int ch = 0; ch < c; ++ch) {
      const size_t off = base + static_cast<size_t>(ch) * plane;
      dot += static_cast<double>(dy[off]) * static_cast<double>(y[off]);
    }
    for (int ch = 0; ch < c; ++ch) {
      const size_t off = base + static_cast<size_t>(ch) * plane;
      dx[off] = static_cast<float>(static_cast<double>(y[off]) * (static_cast<double>(dy[off]) - dot));
    }
  }
}

__global__ void softmax_bwd_data_block_per_column(int n, int c, size_t plane, const float* __restrict__ y,
                                                  const float* __restrict__ dy, float* __restrict__ dx) {
  __shared__ double sdot[kColumnThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const size_t columns = static_cast<size_t>(n) * plane;
  const size_t sample = static_cast<size_t>(c) * plane;
  for (size_t col = blockIdx.x; col < columns; col += gridDim.x) {
    const size_t i = col / plane;
    const size_t p = col - i * plane;
    const size_t base = i * sample + p;
    double dot = 0.0;
    for (int ch = tid; ch < c; ch += kColumnThreads) {
      const size_t off = base + static_cast<size_t>(ch) * plane;
      dot += static_cast<double>(dy[off]) * static_cast<double>(y[off]);
    }
    sdot[tid] = dot;
    __syncthreads();
    for (int s = kColumnThreads / 2; s > 0; s >>= 1) {
      if (tid < s) sdot[tid] += sdot[tid + s];
      __syncthreads();
    }
    dot = sdot[0];
    for (int ch = tid; ch < c; ch += kColumnThreads) {
      const size_t off = base + static_cast<size_t>(ch) * plane;
      dx[off] = static_cast<float>(static_cast<double>(y[off]) * (static_cast<double>(dy[off]) - dot));
    }
    __syncthreads();
  }
}

unsigned column_blocks(size_t columns) {
  return static_cast<unsigned>(columns < kMaxBlocks ? columns : kMaxBlocks);
}

}  // namespace

void softmax_fwd(int n, int c, std::size_t plane, const float* x, float* y, cudaStream_t stream) {
  if (n <= 0 || c <= 0 || plane == 0) return;
  const size_t columns = static_cast<size_t>(n) * plane;
  if (block_per_column(c, plane)) {
    softmax_fwd_block_per_column<<<column_blocks(columns), kColumnThreads, 0, stream>>>(n, c, plane, x, y);
  } else {
    softmax_fwd_thread_per_column<<<blocks_for(columns), kThreads, 0, stream>>>(n, c, plane, x, y);
  }
}

void softmax_bwd_data(int n, int c, std::size_t plane, const float* y, const float* dy, float* dx,
                      cudaStream_t stream) {
  if (n <= 0 || c <= 0 || plane == 0) return;
  const size_t columns = static_cast<size_t>(n) * plane;
  if (block_per_column(c, plane)) {
    softmax_bwd_data_block_per_column<<<column_blocks(columns), kColumnThreads, 0, stream>>>(n, c, plane, y, dy,
                                                                                             dx);
  } else {
    softmax_bwd_data_thread_per_column<<<blocks_for(columns), kThreads, 0, stream>>>(n, c, plane, y, dy, dx);
  }
}

}  // namespace dtnn::kernels::cuda
