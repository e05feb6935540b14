// SPDX-License-Identifier: Apache-2.0
// The training passes behind nn_kernels.hpp's batch_norm_sums, batch_norm_sqdev_sums, batch_norm_fwd_fused,
// batch_norm_bwd_sums_masked and batch_norm_bwd_data_masked, written once and compiled three times:
// batch_norm.cpp (any x86-64), batch_norm_avx2.cpp (-mavx2 -mfma) and batch_norm_avx512.cpp (-mavx512f -mfma).
// Internal linkage: each file keeps its own copy, compiled for its instruction set.
//
// Every plane's sum is plane_sums.hpp's: element j into lane j % 8, each lane in index order, then the tail and the
// lanes added to a total in order. Those eight lanes are one chain of dependent additions per plane (one AVX-512
// register), whose latency bounds a sum however wide the vectors: batch_norm_avx512.cpp replaces the three sums by
// versions that run several planes' chains at once, in the same order (the same bits). CMake compiles the three
// files with -ffp-contract=off: fused multiply-adds would change a rounding in the FMA files only ((x - m) * s + b,
// the centred squares, the products in the backward sums).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "codelets/cpu/batch_norm.hpp"
#include "codelets/cpu/plane_sums.hpp"

namespace dtnn::kernels::cpu {
namespace {

using std::size_t;

inline size_t bn_plane_index(int i, int c, int ch) {
  return static_cast<size_t>(i) * static_cast<size_t>(c) + static_cast<size_t>(ch);
}

// y > 0 ? g : +0 as a bit mask: the select of relu_bwd_data without a branch. Inside the double-lane sums the
// compiler turned the select into a branch, which a random ReLU mask mispredicts half of the time (25x slower).
inline float bn_relu_masked(float y, float g) {
  const std::uint32_t keep = 0u - static_cast<std::uint32_t>(y > 0.0f);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(g) & keep);
}

void bn_sums_rows(int n, int c, size_t plane, const float* x, float* partials) {
  for (int i = 0; i < n; ++i) {
    for (int ch = 0; ch < c; ++ch) {
      const size_t p = bn_plane_index(i, c, ch);
      partials[p] = static_cast<float>(detail::sum_plane(x + p * plane, plane));
    }
  }
}

void bn_sqdev_sums_rows(int n, int c, size_t plane, const float* x, const float* mean, float* partials) {
  for (int i = 0; i < n; ++i) {
    for (int ch = 0; ch < c; ++ch) {
      const size_t p = bn_plane_index(i, c, ch);
      const float* xp = x + p * plane;
      const double m = mean[ch];
      partials[p] = static_cast<float>(detail::sum_plane_of(plane, [xp, m](size_t j) {
        const double d = static_cast<double>(xp[j]) - m;
        return d * d;
      }));
    }
  }
}

// One plane of the forward pass with its epilogue, the flags fixed at compile time so that every variant is a
// plain vectorisable loop: v = (x - m) * s + b, v + residual, ReLU, each rounded as the separate passes round it.
template <bool Residual, bool Relu>
void bn_fwd_plane(size_t plane, const float* xp, float m, float s, float b, const float* rp, float* yp) {
  for (size_t j = 0; j < plane; ++j) {
    float v = (xp[j] - m) * s + b;
    if constexpr (Residual) v = v + rp[j];
    if constexpr (Relu) v = v < 0.0f ? 0.0f : v;
    yp[j] = v;
  }
}

template <bool Residual, bool Relu>
void bn_fwd_rows(int n, int c, size_t plane, const float* x, const float* mean, const float* invstd,
                 const float* gamma, const float* beta, const float* residual, float* y) {
  for (int i = 0; i < n; ++i) {
    for (int ch = 0; ch < c; ++ch) {
      const size_t p = bn_plane_index(i, c, ch);
      const float s = gamma != nullptr ? invstd[ch] * gamma[ch] : invstd[ch];
      const float b = beta != nullptr ? beta[ch] : 0.0f;
      bn_fwd_plane<Residual, Relu>(plane, x + p * plane, mean[ch], s, b,
                                   Residual ? residual + p * plane : nullptr, y + p * plane);
    }
  }
}

void bn_fwd_fused_rows(int n, int c, size_t plane, const float* x, const float* mean, const float* invstd,
                       const float* gamma, const float* beta, const float* residual, int relu, float* y) {
  if (residual != nullptr) {
    if (relu != 0) return bn_fwd_rows<true, true>(n, c, plane, x, mean, invstd, gamma, beta, residual, y);
    return bn_fwd_rows<true, false>(n, c, plane, x, mean, invstd, gamma, beta, residual, y);
  }
  if (relu != 0) return bn_fwd_rows<false, true>(n, c, plane, x, mean, invstd, gamma, beta, nullptr, y);
  bn_fwd_rows<false, false>(n, c, plane, x, mean, invstd, gamma, beta, nullptr, y);
}

// Per-sample partials [n, 2c]: the plane sums of g and of g * xhat, xhat formed in float exactly as the forward
// pass forms it (so the sums match what the output used), g = dy, or where relu_y is not null the values
// relu_bwd_data would have stored: dy where relu_y > 0, else +0.
void bn_bwd_sums_masked_rows(int n, int c, size_t plane, const float* x, const float* relu_y, const float* dy,
                             const float* mean, const float* invstd, float* partials) {
  for (int i = 0; i < n; ++i) {
    float* row = partials + static_cast<size_t>(i) * 2 * static_cast<size_t>(c);
    for (int ch = 0; ch < c; ++ch) {
      const size_t p = bn_plane_index(i, c, ch);
      const float* xp = x + p * plane;
      const float* gp = dy + p * plane;
      const float m = mean[ch];
      const float is = invstd[ch];
      if (relu_y == nullptr) {
        row[ch] = static_cast<float>(detail::sum_plane(gp, plane));
        row[c + ch] = static_cast<float>(detail::sum_plane_of(plane, [xp, gp, m, is](size_t j) {
          return static_cast<double>(gp[j]) * static_cast<double>((xp[j] - m) * is);
        }));
        continue;
      }
      const float* yp = relu_y + p * plane;
      row[ch] = static_cast<float>(detail::sum_plane_of(plane, [yp, gp](size_t j) {
        return static_cast<double>(bn_relu_masked(yp[j], gp[j]));
      }));
      row[c + ch] = static_cast<float>(detail::sum_plane_of(plane, [xp, yp, gp, m, is](size_t j) {
        return static_cast<double>(bn_relu_masked(yp[j], gp[j])) * static_cast<double>((xp[j] - m) * is);
      }));
    }
  }
}

void bn_bwd_data_masked_rows(int n, int c, size_t plane, const float* x, const float* relu_y, const float* dy,
                             const float* mean, const float* invstd, const float* gamma, const float* mean_dy,
                             const float* mean_dy_xhat, float* dx) {
  for (int i = 0; i < n; ++i) {
    for (int ch = 0; ch < c; ++ch) {
      const size_t p = bn_plane_index(i, c, ch);
      const float* xp = x + p * plane;
      const float* gp = dy + p * plane;
      const float* yp = relu_y != nullptr ? relu_y + p * plane : nullptr;
      float* dp = dx + p * plane;
      const float is = invstd[ch];
      const float k = gamma != nullptr ? gamma[ch] * is : is;
      if (mean_dy == nullptr) {
        if (yp == nullptr) {
          for (size_t j = 0; j < plane; ++j) dp[j] = k * gp[j];
        } else {
          for (size_t j = 0; j < plane; ++j) {
            const float g = gp[j];
            dp[j] = k * (yp[j] > 0.0f ? g : 0.0f);
          }
        }
        continue;
      }
      const float m = mean[ch];
      const float a = mean_dy[ch];
      const float b = mean_dy_xhat[ch];
      if (yp == nullptr) {
        for (size_t j = 0; j < plane; ++j) {
          const float xhat = (xp[j] - m) * is;
          dp[j] = k * (gp[j] - a - xhat * b);
        }
      } else {
        for (size_t j = 0; j < plane; ++j) {
          // dy is loaded whatever y holds, so that the loop vectorises (as relu_bwd_data).
          const float g0 = gp[j];
          const float g = yp[j] > 0.0f ? g0 : 0.0f;
          const float xhat = (xp[j] - m) * is;
          dp[j] = k * (g - a - xhat * b);
        }
      }
    }
  }
}

// The five passes as the including file compiles them.
constexpr BatchNormPasses kBatchNormRows{bn_sums_rows, bn_sqdev_sums_rows, bn_fwd_fused_rows, bn_bwd_sums_masked_rows,
                                         bn_bwd_data_masked_rows};

}  // namespace
}  // namespace dtnn::kernels::cpu
