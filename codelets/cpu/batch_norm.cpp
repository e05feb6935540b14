// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "codelets/cpu/bf16.hpp"
#include "codelets/cpu/bf16_arrays.hpp"
#include "codelets/cpu/nn_kernels.hpp"
#include "codelets/cpu/plane_sums.hpp"

namespace dtnn::kernels::cpu {
namespace {

using std::size_t;

inline size_t plane_index(int i, int c, int ch) {
  return static_cast<size_t>(i) * static_cast<size_t>(c) + static_cast<size_t>(ch);
}

// An element of x as a float: x's own, or a bf16 x's exact value (the upper half of an fp32), loaded in the loops
// themselves, so that every pass computes on bf16 inputs exactly what it computes on their fp32 values at the cost
// of its fp32 loop (a widened copy first measured 1.3-1.7x slower on one Zen 5 core).
inline float value(const float* x, size_t j) { return x[j]; }
inline float value(const std::uint16_t* x, size_t j) { return bf16_to_float(x[j]); }

// A bf16 output (y or dx) is computed into the thread's staging buffer 1 many planes at a time and rounded into place
// as the planes move on (planes asked in order), and at finish(): float_to_bf16 in the loops would not vectorise.
constexpr size_t kBlockValues = 16384;

template <class X>
class PlaneWriter {
 public:
  PlaneWriter(X* y, size_t plane, size_t planes) : y_(y), plane_(plane), planes_(planes) {}
  float* operator()(size_t p) {
    if constexpr (std::is_same_v<X, float>) {
      return y_ + p * plane_;
    } else {
      if (p < first_ || p >= end_) {
        finish();
        first_ = p;
        end_ = std::min(planes_, p + std::max<size_t>(1, kBlockValues / plane_));
        buf_ = bf16_staging(1, (end_ - first_) * plane_);
      }
      return buf_ + (p - first_) * plane_;
    }
  }
  void finish() {
    if constexpr (!std::is_same_v<X, float>) {
      if (buf_ != nullptr) floats_to_bf16(buf_, (end_ - first_) * plane_, y_ + first_ * plane_);
      buf_ = nullptr;
    }
  }

 private:
  X* y_;
  size_t plane_, planes_;
  size_t first_ = 0, end_ = 0;
  float* buf_ = nullptr;
};

// y > 0 ? g : +0 as a bit mask: the select of relu_bwd_data without a branch. Inside the double-lane plane sums the
// compiler turned the select into a branch, which a random ReLU mask mispredicts half of the time (25x slower).
inline float relu_masked(float y, float g) {
  const std::uint32_t keep = 0u - static_cast<std::uint32_t>(y > 0.0f);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(g) & keep);
}

// One plane of the forward pass with its epilogue, the flags fixed at compile time so that every variant is a
// plain vectorisable loop: v = (x - m) * s + b, v + residual, ReLU, each rounded as the separate passes round it.
template <class X, bool Residual, bool Relu>
void fwd_plane(size_t plane, const X* xp, float m, float s, float b, const float* rp, float* yp) {
  for (size_t j = 0; j < plane; ++j) {
    float v = (value(xp, j) - m) * s + b;
    if constexpr (Residual) v = v + rp[j];
    if constexpr (Relu) v = v < 0.0f ? 0.0f : v;
    yp[j] = v;
  }
}

template <class X>
using FwdPlaneFn = void (*)(size_t, const X*, float, float, float, const float*, float*);

template <class X>
FwdPlaneFn<X> epilogue_plane_fn(bool residual, bool relu) {
  if (residual) return relu ? fwd_plane<X, true, true> : fwd_plane<X, true, false>;
  return relu ? fwd_plane<X, false, true> : fwd_plane<X, false, false>;
}

template <class X, bool Residual, bool Relu>
void infer_plane(size_t plane, const X* xp, float s, float b, const float* rp, float* yp) {
  for (size_t j = 0; j < plane; ++j) {
    float v = value(xp, j) * s + b;
    if constexpr (Residual) v = v + rp[j];
    if constexpr (Relu) v = v < 0.0f ? 0.0f : v;
    yp[j] = v;
  }
}

template <class X>
using InferPlaneFn = void (*)(size_t, const X*, float, float, const float*, float*);

template <class X>
InferPlaneFn<X> infer_plane_fn(bool residual, bool relu) {
  if (residual) return relu ? infer_plane<X, true, true> : infer_plane<X, true, false>;
  return relu ? infer_plane<X, false, true> : infer_plane<X, false, false>;
}

}  // namespace

namespace {

template <class X>
void sums(int n, int c, std::size_t plane, const X* x, float* partials) {
  for (int i = 0; i < n; ++i) {
    for (int ch = 0; ch < c; ++ch) {
      const size_t p = plane_index(i, c, ch);
      const X* xp = x + p * plane;
      partials[p] = static_cast<float>(
          detail::sum_plane_of(plane, [xp](size_t j) { return static_cast<double>(value(xp, j)); }));
    }
  }
}

template <class X>
void sqdev_sums(int n, int c, std::size_t plane, const X* x, const float* mean, float* partials) {
  for (int i = 0; i < n; ++i) {
    for (int ch = 0; ch < c; ++ch) {
      const size_t p = plane_index(i, c, ch);
      const X* xp = x + p * plane;
      const double m = mean[ch];
      partials[p] = static_cast<float>(detail::sum_plane_of(plane, [xp, m](size_t j) {
        const double d = static_cast<double>(value(xp, j)) - m;
        return d * d;
      }));
    }
  }
}

}  // namespace

void batch_norm_sums(int n, int c, std::size_t plane, const float* x, float* partials) {
  sums(n, c, plane, x, partials);
}
void batch_norm_sums(int n, int c, std::size_t plane, const std::uint16_t* x, float* partials) {
  sums(n, c, plane, x, partials);
}
void batch_norm_sqdev_sums(int n, int c, std::size_t plane, const float* x, const float* mean, float* partials) {
  sqdev_sums(n, c, plane, x, mean, partials);
}
void batch_norm_sqdev_sums(int n, int c, std::size_t plane, const std::uint16_t* x, const float* mean,
                           float* partials) {
  sqdev_sums(n, c, plane, x, mean, partials);
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

namespace {

template <class X, class Y>
void fwd_fused(int n, int c, std::size_t plane, const X* x, const float* mean, const float* invstd, const float* gamma,
               const float* beta, const float* residual, int relu, Y* y) {
  const auto epilogue = epilogue_plane_fn<X>(residual != nullptr, relu != 0);
  PlaneWriter<Y> out(y, plane, static_cast<size_t>(n) * static_cast<size_t>(c));
  for (int i = 0; i < n; ++i) {
    for (int ch = 0; ch < c; ++ch) {
      const size_t p = plane_index(i, c, ch);
      const float m = mean[ch];
      const float s = gamma != nullptr ? invstd[ch] * gamma[ch] : invstd[ch];
      const float b = beta != nullptr ? beta[ch] : 0.0f;
      epilogue(plane, x + p * plane, m, s, b, residual != nullptr ? residual + p * plane : nullptr, out(p));
    }
  }
  out.finish();
}

}  // namespace

void batch_norm_fwd_fused(int n, int c, std::size_t plane, const float* x, const float* mean, const float* invstd,
                          const float* gamma, const float* beta, const float* residual, int relu, float* y) {
  fwd_fused(n, c, plane, x, mean, invstd, gamma, beta, residual, relu, y);
}
template <class X, class Y>
void batch_norm_fwd_fused(int n, int c, std::size_t plane, const X* x, const float* mean, const float* invstd,
                          const float* gamma, const float* beta, const float* residual, int relu, Y* y) {
  fwd_fused(n, c, plane, x, mean, invstd, gamma, beta, residual, relu, y);
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

namespace {

template <class X, class Y>
void infer_fwd_fused(int n, int c, std::size_t plane, double eps, const X* x, const float* mean, const float* var,
                     const float* gamma, const float* beta, const float* residual, int relu, Y* y) {
  thread_local std::vector<float> scale;
  thread_local std::vector<float> shift;
  scale.resize(static_cast<size_t>(c));
  shift.resize(static_cast<size_t>(c));
  batch_norm_scale_shift(c, eps, mean, var, gamma, beta, scale.data(), shift.data());
  const auto epilogue = infer_plane_fn<X>(residual != nullptr, relu != 0);
  PlaneWriter<Y> out(y, plane, static_cast<size_t>(n) * static_cast<size_t>(c));
  for (int i = 0; i < n; ++i) {
    for (int ch = 0; ch < c; ++ch) {
      const size_t p = plane_index(i, c, ch);
      epilogue(plane, x + p * plane, scale[static_cast<size_t>(ch)], shift[static_cast<size_t>(ch)],
               residual != nullptr ? residual + p * plane : nullptr, out(p));
    }
  }
  out.finish();
}

}  // namespace

void batch_norm_infer_fwd_fused(int n, int c, std::size_t plane, double eps, const float* x, const float* mean,
                                const float* var, const float* gamma, const float* beta, const float* residual,
                                int relu, float* y) {
  infer_fwd_fused(n, c, plane, eps, x, mean, var, gamma, beta, residual, relu, y);
}
template <class X, class Y>
void batch_norm_infer_fwd_fused(int n, int c, std::size_t plane, double eps, const X* x, const float* mean,
                                const float* var, const float* gamma, const float* beta, const float* residual,
                                int relu, Y* y) {
  infer_fwd_fused(n, c, plane, eps, x, mean, var, gamma, beta, residual, relu, y);
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

namespace {

template <class X, class Y>
void bwd_sums_masked(int n, int c, std::size_t plane, const X* x, const Y* relu_y, const Y* dy, const float* mean,
                     const float* invstd, float* partials) {
  for (int i = 0; i < n; ++i) {
    float* row = partials + static_cast<size_t>(i) * 2 * static_cast<size_t>(c);
    for (int ch = 0; ch < c; ++ch) {
      const size_t p = plane_index(i, c, ch);
      const X* xp = x + p * plane;
      const Y* gp = dy + p * plane;
      const float m = mean[ch];
      const float is = invstd[ch];
      // xhat is formed in float exactly as the forward pass forms it, so the sums match what the output used.
      if (relu_y == nullptr) {
        row[ch] = static_cast<float>(
            detail::sum_plane_of(plane, [gp](size_t j) { return static_cast<double>(value(gp, j)); }));
        row[c + ch] = static_cast<float>(detail::sum_plane_of(plane, [xp, gp, m, is](size_t j) {
          return static_cast<double>(value(gp, j)) * static_cast<double>((value(xp, j) - m) * is);
        }));
        continue;
      }
      // The masked gradient takes the values relu_bwd_data would have stored: dy where y > 0, else +0.
      const Y* yp = relu_y + p * plane;
      row[ch] = static_cast<float>(detail::sum_plane_of(plane, [yp, gp](size_t j) {
        return static_cast<double>(relu_masked(value(yp, j), value(gp, j)));
      }));
      row[c + ch] = static_cast<float>(detail::sum_plane_of(plane, [xp, yp, gp, m, is](size_t j) {
        return static_cast<double>(relu_masked(value(yp, j), value(gp, j))) *
               static_cast<double>((value(xp, j) - m) * is);
      }));
    }
  }
}

}  // namespace

void batch_norm_bwd_sums_masked(int n, int c, std::size_t plane, const float* x, const float* relu_y, const float* dy,
                                const float* mean, const float* invstd, float* partials) {
  bwd_sums_masked(n, c, plane, x, relu_y, dy, mean, invstd, partials);
}
template <class X, class Y>
void batch_norm_bwd_sums_masked(int n, int c, std::size_t plane, const X* x, const Y* relu_y, const Y* dy,
                                const float* mean, const float* invstd, float* partials) {
  bwd_sums_masked(n, c, plane, x, relu_y, dy, mean, invstd, partials);
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

namespace {

// X: the element type of x and dx (a bf16 dx is computed in fp32 plane by plane and rounded as it is stored); Y:
// of dy and relu_y.
template <class X, class Y>
void bwd_data_masked(int n, int c, std::size_t plane, const X* x, const Y* relu_y, const Y* dy, const float* mean,
                     const float* invstd, const float* gamma, const float* mean_dy, const float* mean_dy_xhat, X* dx) {
  PlaneWriter<X> out(dx, plane, static_cast<size_t>(n) * static_cast<size_t>(c));
  for (int i = 0; i < n; ++i) {
    for (int ch = 0; ch < c; ++ch) {
      const size_t p = plane_index(i, c, ch);
      const Y* gp = dy + p * plane;
      const Y* yp = relu_y != nullptr ? relu_y + p * plane : nullptr;
      float* dp = out(p);
      const float is = invstd[ch];
      const float k = gamma != nullptr ? gamma[ch] * is : is;
      if (mean_dy == nullptr) {
        if (yp == nullptr) {
          for (size_t j = 0; j < plane; ++j) dp[j] = k * value(gp, j);
        } else {
          for (size_t j = 0; j < plane; ++j) {
            const float g = value(gp, j);
            dp[j] = k * (value(yp, j) > 0.0f ? g : 0.0f);
          }
        }
        continue;
      }
      const X* xp = x + p * plane;
      const float m = mean[ch];
      const float a = mean_dy[ch];
      const float b = mean_dy_xhat[ch];
      if (yp == nullptr) {
        for (size_t j = 0; j < plane; ++j) {
          const float xhat = (value(xp, j) - m) * is;
          dp[j] = k * (value(gp, j) - a - xhat * b);
        }
      } else {
        for (size_t j = 0; j < plane; ++j) {
          // dy is loaded whatever y holds, so that the loop vectorises (as relu_bwd_data).
          const float g0 = value(gp, j);
          const float g = value(yp, j) > 0.0f ? g0 : 0.0f;
          const float xhat = (value(xp, j) - m) * is;
          dp[j] = k * (g - a - xhat * b);
        }
      }
    }
  }
  out.finish();
}

}  // namespace

void batch_norm_bwd_data_masked(int n, int c, std::size_t plane, const float* x, const float* relu_y, const float* dy,
                                const float* mean, const float* invstd, const float* gamma, const float* mean_dy,
                                const float* mean_dy_xhat, float* dx) {
  bwd_data_masked(n, c, plane, x, relu_y, dy, mean, invstd, gamma, mean_dy, mean_dy_xhat, dx);
}
template <class X, class Y>
void batch_norm_bwd_data_masked(int n, int c, std::size_t plane, const X* x, const Y* relu_y, const Y* dy,
                                const float* mean, const float* invstd, const float* gamma, const float* mean_dy,
                                const float* mean_dy_xhat, X* dx) {
  bwd_data_masked(n, c, plane, x, relu_y, dy, mean, invstd, gamma, mean_dy, mean_dy_xhat, dx);
}

// The element types of bf16 activations: x (and dx), y (and dy) each float or std::uint16_t (bf16); float and float
// are the functions above.
using Bf16 = std::uint16_t;
#define DTNN_BN_TYPED(X, Y)                                                                                            \
  template void batch_norm_fwd_fused<X, Y>(int, int, std::size_t, const X*, const float*, const float*, const float*,  \
                                           const float*, const float*, int, Y*);                                       \
  template void batch_norm_infer_fwd_fused<X, Y>(int, int, std::size_t, double, const X*, const float*, const float*,  \
                                                 const float*, const float*, const float*, int, Y*);                   \
  template void batch_norm_bwd_sums_masked<X, Y>(int, int, std::size_t, const X*, const Y*, const Y*, const float*,    \
                                                 const float*, float*);                                                \
  template void batch_norm_bwd_data_masked<X, Y>(int, int, std::size_t, const X*, const Y*, const Y*, const float*,    \
                                                 const float*, const float*, const float*, const float*, X*);
DTNN_BN_TYPED(Bf16, float)
DTNN_BN_TYPED(float, Bf16)
DTNN_BN_TYPED(Bf16, Bf16)
#undef DTNN_BN_TYPED

}  // namespace dtnn::kernels::cpu
