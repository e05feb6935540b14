// SPDX-License-Identifier: Apache-2.0
// The embedding after codelets/cpu/embedding.cpp. The table's gradient is a sum in a fixed order by construction:
// each element belongs to one thread, which adds the batch's terms in batch order (no atomics), so a chain of tile
// tasks gives the CPU's bits.
#include "codelets/cuda/embedding.hpp"
#include "codelets/cuda/launch.cuh"
#include "core/cuda_check.hpp"

namespace dtnn::kernels::cuda {
namespace {

using std::size_t;

// The table gradient's threads: (column j, bucket b) owns the elements (id, j) with id % kIdBuckets == b, so a
// narrow table still gets kIdBuckets times its width in threads; each reads every id and skips the others' rows.
constexpr int kIdBuckets = 16;
constexpr int kColumnThreads = 128;

__global__ void embedding_fwd_kernel(size_t count, int dim, int num, const std::int32_t* __restrict__ ids,
                                     const float* __restrict__ w, float* __restrict__ y) {
  DTNN_GRID_STRIDE(k, count) {
    const size_t i = k / static_cast<size_t>(dim);
    const size_t j = k - i * static_cast<size_t>(dim);
    const std::int32_t id = ids[i];
    y[k] = id >= 0 && id < num ? w[static_cast<size_t>(id) * static_cast<size_t>(dim) + j] : NAN;
  }
}

__global__ void embedding_bwd_weights_kernel(int rows, int dim, int num, int padding_idx,
                                             const std::int32_t* __restrict__ ids, const float* __restrict__ dy,
                                             float* __restrict__ dw) {
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int bucket = static_cast<int>(blockIdx.y);
  if (j >= dim) return;
  for (int i = 0; i < rows; ++i) {
    const std::int32_t id = ids[i];
    if (id == padding_idx || id < 0 || id >= num || id % kIdBuckets != bucket) continue;
    dw[static_cast<size_t>(id) * static_cast<size_t>(dim) + static_cast<size_t>(j)] +=
        dy[static_cast<size_t>(i) * static_cast<size_t>(dim) + static_cast<size_t>(j)];
  }
}

}  // namespace

void embedding_fwd(int rows, int dim, int num, const std::int32_t* ids, const float* w, float* y,
                   cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return;
  const size_t count = static_cast<size_t>(rows) * static_cast<size_t>(dim);
  embedding_fwd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, dim, num, ids, w, y);
}

void embedding_bwd_weights(int rows, int dim, int num, int padding_idx, const std::int32_t* ids, const float* dy,
                           int accumulate, float* dw, cudaStream_t stream) {
  if (dim <= 0 || num <= 0) return;
  if (accumulate == 0) {
    DTNN_CUDA_CHECK(cudaMemsetAsync(dw, 0, static_cast<size_t>(num) * static_cast<size_t>(dim) * sizeof(float), stream),
                    "embedding_bwd_weights");
  }
  if (rows <= 0) return;
  const dim3 grid(static_cast<unsigned>((dim + kColumnThreads - 1) / kColumnThreads), kIdBuckets);
  embedding_bwd_weights_kernel<<<grid, kColumnThreads, 0, stream>>>(rows, dim, num, padding_idx, ids, dy, dw);
}

}  // namespace dtnn::kernels::cuda
