// SPDX-License-Identifier: Apache-2.0
// The positional table after codelets/cpu/positional.cpp.
#include "codelets/cuda/launch.cuh"
#include "codelets/cuda/positional.hpp"
#include "core/cuda_check.hpp"

namespace dtnn::kernels::cuda {
namespace {

using std::size_t;

__global__ void positional_add_fwd_kernel(size_t count, size_t plane, const float* __restrict__ x,
                                          const float* __restrict__ table, float* __restrict__ y) {
  DTNN_GRID_STRIDE(k, count) { y[k] = x[k] + table[k % plane]; }
}

// One thread per element of the table's first seq rows, the samples in order.
__global__ void positional_bwd_weights_kernel(int n, size_t plane, const float* __restrict__ dy,
                                              float* __restrict__ dw) {
  DTNN_GRID_STRIDE(k, plane) {
    float acc = dw[k];
    for (int i = 0; i < n; ++i) acc += dy[static_cast<size_t>(i) * plane + k];
    dw[k] = acc;
  }
}

}  // namespace

void positional_add_fwd(int n, int seq, int dim, const float* x, const float* table, float* y, cudaStream_t stream) {
  const size_t plane = static_cast<size_t>(seq > 0 ? seq : 0) * static_cast<size_t>(dim > 0 ? dim : 0);
  const size_t count = static_cast<size_t>(n > 0 ? n : 0) * plane;
  if (count == 0) return;
  positional_add_fwd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, plane, x, table, y);
}

void positional_bwd_weights(int n, int seq, int dim, int max_len, const float* dy, int accumulate, float* dw,
                            cudaStream_t stream) {
  if (dim <= 0) return;
  if (accumulate == 0 && max_len > 0) {
    DTNN_CUDA_CHECK(
        cudaMemsetAsync(dw, 0, static_cast<size_t>(max_len) * static_cast<size_t>(dim) * sizeof(float), stream),
        "positional_bwd_weights");
  }
  const size_t plane = static_cast<size_t>(seq > 0 ? seq : 0) * static_cast<size_t>(dim);
  if (plane == 0 || n <= 0) return;
  positional_bwd_weights_kernel<<<blocks_for(plane), kThreads, 0, stream>>>(n, plane, dy, dw);
}

}  // namespace dtnn::kernels::cuda
