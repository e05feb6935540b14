// SPDX-License-Identifier: Apache-2.0
// LayerNorm after codelets/cpu/layer_norm_impl.hpp, operation for operation. __fmul_rn and __dmul_rn keep nvcc from
// fusing a product into the following addition where the host rounds twice (its three builds, plain, AVX2 and
// AVX-512, are compiled with -ffp-contract=off).
#include "codelets/cuda/launch.cuh"
#include "codelets/cuda/layer_norm.hpp"
#include "codelets/cuda/warp_reduce.cuh"

namespace dtnn::kernels::cuda {
namespace {

using std::size_t;

constexpr int kWarp = detail::kWarpLanes;
constexpr int kRowsPerBlock = kThreads / kWarp;

__global__ void layer_norm_fwd_kernel(int rows, int width, float eps, const float* __restrict__ x,
                                      const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ y,
                                      float* __restrict__ stats) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int first = static_cast<int>(blockIdx.x) * kRowsPerBlock + static_cast<int>(threadIdx.x) / kWarp;
  for (int i = first; i < rows; i += static_cast<int>(gridDim.x) * kRowsPerBlock) {
    const float* xr = x + static_cast<size_t>(i) * static_cast<size_t>(width);
    float* yr = y + static_cast<size_t>(i) * static_cast<size_t>(width);
    // Two passes in double, as the CPU.
    double sum = 0.0;
    for (int j = lane; j < width; j += kWarp) sum += static_cast<double>(xr[j]);
    const double mean = detail::warp_sum(sum) / static_cast<double>(width);
    double squares = 0.0;
    for (int j = lane; j < width; j += kWarp) {
      const double d = static_cast<double>(xr[j]) - mean;
      squares += __dmul_rn(d, d);
    }
    squares = detail::warp_sum(squares);
    const auto mean_f = static_cast<float>(mean);
    const auto rstd =
        static_cast<float>(1.0 / sqrt(squares / static_cast<double>(width) + static_cast<double>(eps)));
    for (int j = lane; j < width; j += kWarp) {
      const float xhat = (xr[j] - mean_f) * rstd;
      yr[j] = w != nullptr ? __fmul_rn(xhat, w[j]) + b[j] : xhat;
    }
    if (lane == 0) {
      stats[2 * static_cast<size_t>(i)] = mean_f;
      stats[2 * static_cast<size_t>(i) + 1] = rstd;
    }
  }
}

__global__ void layer_norm_bwd_data_kernel(int rows, int width, const float* __restrict__ x,
                                           const float* __restrict__ stats, const float* __restrict__ w,
                                           const float* __restrict__ dy, float* __restrict__ dx) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int first = static_cast<int>(blockIdx.x) * kRowsPerBlock + static_cast<int>(threadIdx.x) / kWarp;
  for (int i = first; i < rows; i += static_cast<int>(gridDim.x) * kRowsPerBlock) {
    const size_t base = static_cast<size_t>(i) * static_cast<size_t>(width);
    const float mean = stats[2 * static_cast<size_t>(i)];
    const float rstd = stats[2 * static_cast<size_t>(i) + 1];
    double sum_g = 0.0;
    double sum_gx = 0.0;
    for (int j = lane; j < width; j += kWarp) {
      const float g = w != nullptr ? __fmul_rn(dy[base + j], w[j]) : dy[base + j];
      const float xhat = (x[base + j] - mean) * rstd;
      sum_g += static_cast<double>(g);
      // A product of two floats is exact in double: fused or not, it rounds alike.
      sum_gx += static_cast<double>(g) * static_cast<double>(xhat);
    }
    const auto mean_g = static_cast<float>(detail::warp_sum(sum_g) / static_cast<double>(width));
    const auto mean_gx = static_cast<float>(detail::warp_sum(sum_gx) / static_cast<double>(width));
    for (int j = lane; j < width; j += kWarp) {
      const float g = w != nullptr ? __fmul_rn(dy[base + j], w[j]) : dy[base + j];
      const float xhat = (x[base + j] - mean) * rstd;
      dx[base + j] = rstd * (g - mean_g - __fmul_rn(xhat, mean_gx));
    }
  }
}

// One thread per column, the rows in order: the CPU's additions, hence its bits, and a chain across tiles that adds
// every row of the batch in batch order. Width threads only (the rows are a dependent chain), which is little work
// next to the GEMMs around a LayerNorm.
__global__ void layer_norm_bwd_weights_kernel(int rows, int width, const float* __restrict__ x,
                                              const float* __restrict__ stats, const float* __restrict__ dy,
                                              int accumulate, float* __restrict__ dw, float* __restrict__ db) {
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= width) return;
  float acc_w = accumulate != 0 ? dw[j] : 0.0f;
  float acc_b = accumulate != 0 ? db[j] : 0.0f;
  for (int i = 0; i < rows; ++i) {
    const size_t at = static_cast<size_t>(i) * static_cast<size_t>(width) + static_cast<size_t>(j);
    const float mean = stats[2 * static_cast<size_t>(i)];
    const float rstd = stats[2 * static_cast<size_t>(i) + 1];
    const float g = dy[at];
    acc_w += __fmul_rn(g, (x[at] - mean) * rstd);
    acc_b += g;
  }
  dw[j] = acc_w;
  db[j] = acc_b;
}

unsigned row_blocks(int rows) {
  const int blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return static_cast<unsigned>(blocks < static_cast<int>(kMaxBlocks) ? blocks : static_cast<int>(kMaxBlocks));
}

}  // namespace

void layer_norm_fwd(int rows, int width, float eps, const float* x, const float* w, const float* b, float* y,
                    float* stats, cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return;
  layer_norm_fwd_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(rows, width, eps, x, w, b, y, stats);
}

void layer_norm_bwd_data(int rows, int width, const float* x, const float* stats, const float* w, const float* dy,
                         float* dx, cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return;
  layer_norm_bwd_data_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(rows, width, x, stats, w, dy, dx);
}

void layer_norm_bwd_weights(int rows, int width, const float* x, const float* stats, const float* dy, int accumulate,
                            float* dw, float* db, cudaStream_t stream) {
  if (width <= 0) return;
  const unsigned blocks = static_cast<unsigned>((width + kThreads - 1) / kThreads);
  layer_norm_bwd_weights_kernel<<<blocks, kThreads, 0, stream>>>(rows < 0 ? 0 : rows, width, x, stats, dy,
                                                                  accumulate, dw, db);
}

}  // namespace dtnn::kernels::cuda
