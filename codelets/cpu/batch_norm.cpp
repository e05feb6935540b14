// SPDX-License-Identifier: Apache-2.0
// Batch normalisation on CPUs: the training passes' dispatch (batch_norm.hpp) with their plain x86-64 versions
// (batch_norm_impl.hpp's rows at the library's baseline flags), the reductions of the per-sample partials, and
// inference.
#include <cmath>
#include <cstddef>
#include <vector>

#include "codelets/cpu/batch_norm.hpp"
#include "codelets/cpu/batch_norm_impl.hpp"
#include "codelets/cpu/nn_kernels.hpp"
#include "core/cpu_features.hpp"

namespace dtnn::kernels::cpu {
namespace {

template <bool Residual, bool Relu>
void infer_plane(size_t plane, const float* xp, float s, float b, const float* rp, float* yp) {
  for (size_t j = 0; j < plane; ++j) {
    float v = xp[j] * s + b;
    if constexpr (Residual) v = v + rp[j];
    if constexpr (Relu) v = v < 0.0f ? 0.0f : v;
    yp[j] = v;
  }
}

using InferPlaneFn = void (*)(size_t, const float*, float, float, const float*, float*);

InferPlaneFn infer_plane_fn(bool residual, bool relu) {
  if (residual) return relu ? infer_plane<true, true> : infer_plane<true, false>;
  return relu ? infer_plane<false, true> : infer_plane<false, false>;
}

}  // namespace

const BatchNormPasses& batch_norm_passes_generic() { return kBatchNormRows; }

const BatchNormPasses& batch_norm_passes() {
#if defined(__x86_64__)
  if (cpu_has_avx512()) return batch_norm_passes_avx512();
  if (cpu_has_avx2_fma()) return batch_norm_passes_avx2();
#endif
  return batch_norm_passes_generic();
}

void batch_norm_sums(int n, int c, std::size_t plane, const float* x, float* partials) {
  batch_norm_passes().sums(n, c, plane, x, partials);
}

void batch_norm_sqdev_sums(int n, int c, std::size_t plane, const float* x, const float* mean, float* partials) {
  batch_norm_passes().sqdev_sums(n, c, plane, x, mean, partials);
}

void batch_norm_accumulate(int rows, int width, const float* partials, double* acc) {
  for (int i = 0; i < rows; ++i) {
    const float* row = partials + static_cast<size_t>(i) * static_cast<size_t>(width);
    for (int j = 0; j < width; ++j) {
      acc[j] += static_cast<double>(row[j]);
    }
  }
}

void batch_norm_finish_mean(int c, double count, const double* sum, float* mean) {
  for (int ch = 0; ch < c; ++ch) {
    mean[ch] = static_cast<float>(sum[ch] / count);
  }
}

void batch_norm_finish_var(int c, const BatchNormUpdate& u, const double* sqdev, const float* mean, float* invstd,
                           float* running_mean, float* running_var) {
  const double m = u.momentum;
  const double bessel = u.count / (u.count - 1.0);
  for (int ch = 0; ch < c; ++ch) {
    const double var = sqdev[ch] / u.count;
    invstd[ch] = static_cast<float>(1.0 / std::sqrt(var + u.eps));
    running_mean[ch] = static_cast<float>((1.0 - m) * running_mean[ch] + m * mean[ch]);
    running_var[ch] = static_cast<float>((1.0 - m) * running_var[ch] + m * var * bessel);
  }
}

void batch_norm_fwd(int n, int c, std::size_t plane, const float* x, const float* mean, const float* invstd,
                    const float* gamma, const float* beta, float* y) {
  batch_norm_fwd_fused(n, c, plane, x, mean, invstd, gamma, beta, nullptr, 0, y);
}

void batch_norm_fwd_fused(int n, int c, std::size_t plane, const float* x, const float* mean, const float* invstd,
                          const float* gamma, const float* beta, const float* residual, int relu, float* y) {
  batch_norm_passes().fwd_fused(n, c, plane, x, mean, invstd, gamma, beta, residual, relu, y);
}

void batch_norm_scale_shift(int c, double eps, const float* mean, const float* var, const float* gamma,
                            const float* beta, float* scale, float* shift) {
  for (int ch = 0; ch < c; ++ch) {
    const double g = gamma != nullptr ? gamma[ch] : 1.0;
    const double b = beta != nullptr ? beta[ch] : 0.0;
    const double s = g / std::sqrt(static_cast<double>(var[ch]) + eps);
    scale[ch] = static_cast<float>(s);
    shift[ch] = static_cast<float>(b - static_cast<double>(mean[ch]) * s);
  }
}

void batch_norm_infer_fwd(int n, int c, std::size_t plane, double eps, const float* x, const float* mean,
                          const float* var, const float* gamma, const float* beta, float* y) {
  batch_norm_infer_fwd_fused(n, c, plane, eps, x, mean, var, gamma, beta, nullptr, 0, y);
}

void batch_norm_infer_fwd_fused(int n, int c, std::size_t plane, double eps, const float* x, const float* mean,
                                const float* var, const float* gamma, const float* beta, const float* residual,
                                int relu, float* y) {
  thread_local std::vector<float> scale;
  thread_local std::vector<float> shift;
  scale.resize(static_cast<size_t>(c));
  shift.resize(static_cast<size_t>(c));
  batch_norm_scale_shift(c, eps, mean, var, gamma, beta, scale.data(), shift.data());
  const auto epilogue = infer_plane_fn(residual != nullptr, relu != 0);
  for (int i = 0; i < n; ++i) {
    for (int ch = 0; ch < c; ++ch) {
      const size_t p = bn_plane_index(i, c, ch);
      epilogue(plane, x + p * plane, scale[static_cast<size_t>(ch)], shift[static_cast<size_t>(ch)],
               residual != nullptr ? residual + p * plane : nullptr, y + p * plane);
    }
  }
}

void batch_norm_invstd(int c, double eps, const float* var, float* invstd) {
  for (int ch = 0; ch < c; ++ch) {
    invstd[ch] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var[ch]) + eps));
  }
}

void batch_norm_bwd_sums(int n, int c, std::size_t plane, const float* x, const float* dy, const float* mean,
                         const float* invstd, float* partials) {
  batch_norm_bwd_sums_masked(n, c, plane, x, nullptr, dy, mean, invstd, partials);
}

void batch_norm_bwd_sums_masked(int n, int c, std::size_t plane, const float* x, const float* relu_y, const float* dy,
                                const float* mean, const float* invstd, float* partials) {
  batch_norm_passes().bwd_sums_masked(n, c, plane, x, relu_y, dy, mean, invstd, partials);
}

void batch_norm_finish_bwd(int c, double count, const double* sums, float* mean_dy, float* mean_dy_xhat,
                           float* dgamma, float* dbeta) {
  for (int ch = 0; ch < c; ++ch) {
    const double sdy = sums[ch];
    const double sdyx = sums[c + ch];
    mean_dy[ch] = static_cast<float>(sdy / count);
    mean_dy_xhat[ch] = static_cast<float>(sdyx / count);
    if (dgamma != nullptr) dgamma[ch] = static_cast<float>(sdyx);
    if (dbeta != nullptr) dbeta[ch] = static_cast<float>(sdy);
  }
}

void batch_norm_bwd_data(int n, int c, std::size_t plane, const float* x, const float* dy, const float* mean,
                         const float* invstd, const float* gamma, const float* mean_dy, const float* mean_dy_xhat,
                         float* dx) {
  batch_norm_bwd_data_masked(n, c, plane, x, nullptr, dy, mean, invstd, gamma, mean_dy, mean_dy_xhat, dx);
}

void batch_norm_bwd_data_masked(int n, int c, std::size_t plane, const float* x, const float* relu_y, const float* dy,
                                const float* mean, const float* invstd, const float* gamma, const float* mean_dy,
                                const float* mean_dy_xhat, float* dx) {
  batch_norm_passes().bwd_data_masked(n, c, plane, x, relu_y, dy, mean, invstd, gamma, mean_dy, mean_dy_xhat,
                                      dx);
}

}  // namespace dtnn::kernels::cpu
