// SPDX-License-Identifier: Apache-2.0
// ReLU and the per-channel bias, after codelets/cpu/elementwise.cpp.
#include "codelets/cuda/launch.cuh"
#include "codelets/cuda/elementwise.hpp"

namespace dtnn::kernels::cuda {
namespace {

__global__ void relu_fwd_kernel(std::size_t count, const float* __restrict__ x, float* __restrict__ y) {
  // As on the CPU: "x < 0 ? 0 : x" lets a NaN through.
  DTNN_GRID_STRIDE(i, count) { y[i] = x[i] < 0.0f ? 0.0f : x[i]; }
}

__global__ void relu_bwd_data_kernel(std::size_t count, const float* __restrict__ y, const float* __restrict__ dy,
                                     float* __restrict__ dx) {
  DTNN_GRID_STRIDE(i, count) { dx[i] = y[i] > 0.0f ? dy[i] : 0.0f; }
}

__global__ void relu_bwd_data_add_kernel(std::size_t count, const float* __restrict__ y, const float* __restrict__ dy,
                                         const float* __restrict__ other, float* __restrict__ dx) {
  DTNN_GRID_STRIDE(i, count) { dx[i] = other[i] + (y[i] > 0.0f ? dy[i] : 0.0f); }
}

__global__ void bias_add_fwd_kernel(std::size_t count, std::size_t plane, int channels, const float* __restrict__ b,
                                    int relu, float* __restrict__ y) {
  DTNN_GRID_STRIDE(i, count) {
    float v = y[i];
    if (b != nullptr) {
      v += b[(i / plane) % static_cast<std::size_t>(channels)];
    }
    if (relu != 0) {
      v = v < 0.0f ? 0.0f : v;
    }
    y[i] = v;
  }
}

// One block of kThreads per channel: thread t sums, in double, elements t, t + kThreads, ... of the channel's
// plane in every sample (samples in order), then a fixed shared-memory tree adds the partial sums. The order
// depends on the shape alone.
__global__ void bias_bwd_weights_kernel(int n, int channels, std::size_t plane, const float* __restrict__ dy,
                                        float* __restrict__ db) {
  __shared__ double partial[kThreads];
  const auto c = static_cast<std::size_t>(blockIdx.x);
  double acc = 0.0;
  for (int i = 0; i < n; ++i) {
    const float* row = dy + (static_cast<std::size_t>(i) * static_cast<std::size_t>(channels) + c) * plane;
    for (std::size_t p = threadIdx.x; p < plane; p += kThreads) {
      acc += static_cast<double>(row[p]);
    }
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      partial[threadIdx.x] += partial[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    db[c] = static_cast<float>(partial[0]);
  }
}

}  // namespace

void relu_fwd(std::size_t count, const float* x, float* y, cudaStream_t stream) {
  if (count == 0) return;
  relu_fwd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, x, y);
}

void relu_bwd_data(std::size_t count, const float* y, const float* dy, float* dx, cudaStream_t stream) {
  if (count == 0) return;
  relu_bwd_data_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, y, dy, dx);
}

void relu_bwd_data_add(std::size_t count, const float* y, const float* dy, const float* other, float* dx,
                       cudaStream_t stream) {
  if (count == 0) return;
  relu_bwd_data_add_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, y, dy, other, dx);
}

void bias_add_fwd(int n, int channels, std::size_t plane, const float* b, int relu, float* y, cudaStream_t stream) {
  if (n <= 0 || channels <= 0 || plane == 0 || (b == nullptr && relu == 0)) {
    return;
  }
  const std::size_t count = static_cast<std::size_t>(n) * static_cast<std::size_t>(channels) * plane;
  bias_add_fwd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, plane, channels, b, relu, y);
}

void bias_bwd_weights(int n, int channels, std::size_t plane, const float* dy, float* db, cudaStream_t stream) {
  if (channels <= 0) {
    return;
  }
  bias_bwd_weights_kernel<<<static_cast<unsigned>(channels), kThreads, 0, stream>>>(n < 0 ? 0 : n, channels, plane,
                                                                                    dy, db);
}

}  // namespace dtnn::kernels::cuda
