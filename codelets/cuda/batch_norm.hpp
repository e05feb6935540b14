// SPDX-License-Identifier: Apache-2.0
// CUDA BatchNorm kernels: launchers that enqueue on a stream and return (no StarPU here, as in codelets/cpu/).
// Same contracts, layouts and bits as the CPU kernels (codelets/cpu/nn_kernels.hpp): per-sample plane sums in
// double in the CPU's lane order, the sample-order reduction one thread per column in sample order, and every
// float expression rounded operation by operation as the CPU rounds it (no fused multiply-adds), so a task writes
// the same bits on either kind of worker. cuDNN's fused batch norm is not used: it reduces the whole batch in one
// call, in its own order, where dtnn splits the statistics into per-tile partials and a sample-order reduction.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace dtnn::kernels::cuda {

// partials[i * c + ch] = sum over the plane of x[i, ch, :]
void batch_norm_sums(int n, int c, std::size_t plane, const float* x, float* partials, cudaStream_t stream);
// partials[i * c + ch] = sum over the plane of (x[i, ch, :] - mean[ch])^2
void batch_norm_sqdev_sums(int n, int c, std::size_t plane, const float* x, const float* mean, float* partials,
                           cudaStream_t stream);

// One task of the sample-order reduction (codelets/batch_norm.cpp): the columns of the sources' rows added in
// double, source after source and row after row, onto the accumulator's sums when acc_in is set; then either the
// sums stored in acc_out (`width` doubles, bit-copied into floats) or the finish computed from them.
enum class BatchNormFinish : int { kNone = 0, kMean = 1, kVar = 2, kBwd = 3 };

struct BatchNormReduce {
  static constexpr int kMaxSources = 16;
  const float* sources[kMaxSources] = {};
  int rows[kMaxSources] = {};
  int nsrc = 0;
  int width = 0;     // columns: channels (kMean, kVar) or 2 * channels (kBwd)
  int channels = 0;
  const float* acc_in = nullptr;  // null: the sums start at 0
  float* acc_out = nullptr;       // not null: store the sums there, finish nothing (may equal acc_in)
  BatchNormFinish finish = BatchNormFinish::kNone;
  double count = 1.0;
  double eps = 0.0;
  double momentum = 0.0;
  // kMean: out[0] = stats (row 0 written).
  // kVar:  out[0] = stats (row 0 read, row 1 written), out[1] = running_mean, out[2] = running_var,
  //        out[3] = num_batches_tracked (+1).
  // kBwd:  out[0] = grad_stats, out[1] = dgamma, out[2] = dbeta (both null or both set).
  float* out[4] = {};
};
void batch_norm_reduce(const BatchNormReduce& r, cudaStream_t stream);

// y = (x - mean) * (invstd * gamma) + beta; gamma and beta may be null.
void batch_norm_fwd(int n, int c, std::size_t plane, const float* x, const float* mean, const float* invstd,
                    const float* gamma, const float* beta, float* y, cudaStream_t stream);
// The fused epilogues of kernels::cpu::batch_norm_fwd_fused: + residual (nullable), then ReLU when relu != 0.
void batch_norm_fwd_fused(int n, int c, std::size_t plane, const float* x, const float* mean, const float* invstd,
                          const float* gamma, const float* beta, const float* residual, int relu, float* y,
                          cudaStream_t stream);
// y = x * scale + shift from the running statistics (kernels::cpu::batch_norm_scale_shift); scale_shift is device
// scratch of 2 * c floats.
void batch_norm_infer_fwd(int n, int c, std::size_t plane, double eps, const float* x, const float* mean,
                          const float* var, const float* gamma, const float* beta, float* scale_shift, float* y,
                          cudaStream_t stream);
void batch_norm_infer_fwd_fused(int n, int c, std::size_t plane, double eps, const float* x, const float* mean,
                                const float* var, const float* gamma, const float* beta, const float* residual,
                                int relu, float* scale_shift, float* y, cudaStream_t stream);
// stats[0, c) = mean, stats[c, 2c) = 1 / sqrt(var + eps)
void batch_norm_frozen_stats(int c, double eps, const float* mean, const float* var, float* stats,
                             cudaStream_t stream);
// partials[i * 2c + ch] = sum of dy, partials[i * 2c + c + ch] = sum of dy * xhat over the plane
void batch_norm_bwd_sums(int n, int c, std::size_t plane, const float* x, const float* dy, const float* mean,
                         const float* invstd, float* partials, cudaStream_t stream);
// The same with dy masked by relu_y > 0 (relu_y null: unmasked), as kernels::cpu::batch_norm_bwd_sums_masked.
void batch_norm_bwd_sums_masked(int n, int c, std::size_t plane, const float* x, const float* relu_y, const float* dy,
                                const float* mean, const float* invstd, float* partials, cudaStream_t stream);
// dx = gamma * invstd * (dy - mean_dy - xhat * mean_dy_xhat); mean_dy and mean_dy_xhat null: dx = gamma * invstd * dy.
void batch_norm_bwd_data(int n, int c, std::size_t plane, const float* x, const float* dy, const float* mean,
                         const float* invstd, const float* gamma, const float* mean_dy, const float* mean_dy_xhat,
                         float* dx, cudaStream_t stream);

// The same with dy masked by relu_y > 0 (relu_y null: unmasked), as kernels::cpu::batch_norm_bwd_data_masked.
void batch_norm_bwd_data_masked(int n, int c, std::size_t plane, const float* x, const float* relu_y, const float* dy,
                                const float* mean, const float* invstd, const float* gamma, const float* mean_dy,
                                const float* mean_dy_xhat, float* dx, cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
