// SPDX-License-Identifier: Apache-2.0
#include "codelets/cuda/launch.cuh"
#include "codelets/cuda/relu.hpp"

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

}  // namespace

void relu_fwd(std::size_t count, const float* x, float* y, cudaStream_t stream) {
  if (count == 0) return;
  relu_fwd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, x, y);
}

void relu_bwd_data(std::size_t count, const float* y, const float* dy, float* dx, cudaStream_t stream) {
  if (count == 0) return;
  relu_bwd_data_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, y, dy, dx);
}

}  // namespace dtnn::kernels::cuda
