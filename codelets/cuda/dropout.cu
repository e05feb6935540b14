// SPDX-License-Identifier: Apache-2.0
#include "codelets/cuda/dropout.hpp"
#include "codelets/cuda/dropout_draw.cuh"
#include "codelets/cuda/launch.cuh"

namespace dtnn::kernels::cuda {
namespace {

using std::size_t;
using std::uint32_t;
using std::uint64_t;

__device__ inline void apply(uint32_t draw, const DropoutParams& p, float x, float& mask, float& y) {
  const float m = detail::mask_of(draw, p);
  mask = m;
  y = __fmul_rn(x, m);
}

// One thread per pair of elements (2j, 2j + 1) of a row: both halves of the stream's output number j + 1.
__global__ void dropout_fwd_kernel(DropoutParams p, std::int64_t first_row, size_t pairs, size_t row_pairs,
                                   size_t row_elements, const float* __restrict__ x, float* __restrict__ mask,
                                   float* __restrict__ y) {
  DTNN_GRID_STRIDE(q, pairs) {
    const size_t i = q / row_pairs;
    const size_t j = q - i * row_pairs;
    const uint64_t key = detail::row_key(p.seed, p.step, first_row + static_cast<std::int64_t>(i));
    const uint64_t h = detail::draw_pair(key, static_cast<uint64_t>(j));
    const size_t e = i * row_elements + 2 * j;
    apply(static_cast<uint32_t>(h >> 32), p, x[e], mask[e], y[e]);
    if (2 * j + 1 < row_elements) {
      apply(static_cast<uint32_t>(h), p, x[e + 1], mask[e + 1], y[e + 1]);
    }
  }
}

__global__ void dropout_bwd_data_kernel(size_t count, const float* __restrict__ mask, const float* __restrict__ dy,
                                        float* __restrict__ dx) {
  DTNN_GRID_STRIDE(i, count) { dx[i] = __fmul_rn(dy[i], mask[i]); }
}

}  // namespace

void dropout_fwd(const DropoutParams& p, std::int64_t first_row, int rows, size_t row_elements, const float* x,
                 float* mask, float* y, cudaStream_t stream) {
  const size_t row_pairs = (row_elements + 1) / 2;
  const size_t pairs = static_cast<size_t>(rows > 0 ? rows : 0) * row_pairs;
  if (pairs == 0) return;
  dropout_fwd_kernel<<<blocks_for(pairs), kThreads, 0, stream>>>(p, first_row, pairs, row_pairs, row_elements, x,
                                                                 mask, y);
}

void dropout_bwd_data(size_t count, const float* mask, const float* dy, float* dx, cudaStream_t stream) {
  if (count == 0) return;
  dropout_bwd_data_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, mask, dy, dx);
}

}  // namespace dtnn::kernels::cuda
