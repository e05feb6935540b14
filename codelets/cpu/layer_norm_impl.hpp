// SPDX-License-Identifier: Apache-2.0
// The rows behind nn_kernels.hpp's layer_norm_*, written once and compiled three times: layer_norm.cpp (any x86-64),
// layer_norm_avx2.cpp (-mavx2 -mfma) and layer_norm_avx512.cpp (-mavx512f -mfma). Internal linkage: each file keeps
// its own copy, compiled for its instruction set.
//
// The row statistics are double sums over kLanes fixed partial sums: element j goes to lane j % kLanes, each lane
// adds its elements in index order, and the lanes meet in one fixed tree (lane_total). A lane is a column of the
// compiler's vectors whatever their width (2, 4 or 8 doubles), so the sums are the same from the three files, and
// no bit of any output differs between them. That also needs the products rounded apart from the sums they feed:
// CMake compiles the three files with -ffp-contract=off, where GCC would otherwise fuse, in the FMA files only, d * d
// into the centred squares' sum and a product into each output's subtraction or addition (a quarter of y and dx and
// half of dw then differ from the plain file's by a rounding). Fusing would gain little in loops bound by their
// loads, and rounding apart keeps codelets/cuda/layer_norm.cu (which rounds every product with __fmul_rn) on the
// CPU's operations: its weight gradients are the CPU's bits.
#pragma once

#include <cmath>
#include <cstddef>

namespace dtnn::kernels::cpu {
namespace {

// 16 doubles: two AVX-512 registers, four AVX2 ones, eight SSE2 ones: independent additions for every width.
constexpr std::size_t kLanes = 16;

// The lanes' sum in a fixed tree: lane l with lane l + 8, then l + 4, l + 2 and l + 1.
inline double lane_total(double (&acc)[kLanes]) {
  for (std::size_t half = kLanes / 2; half > 0; half /= 2) {
    for (std::size_t l = 0; l < half; ++l) acc[l] += acc[l + half];
  }
  return acc[0];
}

inline double lane_sum(std::size_t count, const float* x) {
  double acc[kLanes] = {};
  std::size_t j = 0;
  for (; j + kLanes <= count; j += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) acc[l] += x[j + l];
  }
  for (std::size_t l = 0; j + l < count; ++l) acc[l] += x[j + l];
  return lane_total(acc);
}

// Two passes: the variance of values far from zero keeps its digits.
inline double lane_centred_squares(std::size_t count, const float* x, double mean) {
  double acc[kLanes] = {};
  std::size_t j = 0;
  for (; j + kLanes <= count; j += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) {
      const double d = x[j + l] - mean;
      acc[l] += d * d;
    }
  }
  for (std::size_t l = 0; j + l < count; ++l) {
    const double d = x[j + l] - mean;
    acc[l] += d * d;
  }
  return lane_total(acc);
}

inline void layer_norm_fwd_rows(int rows, int width, float eps, const float* x, const float* w, const float* b,
                                float* y, float* stats) {
  const auto e = static_cast<std::size_t>(width);
  for (int i = 0; i < rows; ++i) {
    const float* xr = x + static_cast<std::size_t>(i) * e;
    float* yr = y + static_cast<std::size_t>(i) * e;
    const double mean = lane_sum(e, xr) / static_cast<double>(width);
    const double squares = lane_centred_squares(e, xr, mean);
    const auto mean_f = static_cast<float>(mean);
    const auto rstd = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(width) + eps));
    if (w != nullptr) {
      for (std::size_t j = 0; j < e; ++j) yr[j] = (xr[j] - mean_f) * rstd * w[j] + b[j];
    } else {
      for (std::size_t j = 0; j < e; ++j) yr[j] = (xr[j] - mean_f) * rstd;
    }
    stats[2 * i] = mean_f;
    stats[2 * i + 1] = rstd;
  }
}

// The sums of g and of g * xhat over one row (g = dy * w, or dy without w), in the lanes. A product of two floats
// is exact in double.
template <bool kAffine>
void lane_sums_g_gx(std::size_t count, const float* xr, float mean, float rstd, const float* w, const float* dyr,
                    double& sum_g, double& sum_gx) {
  double acc_g[kLanes] = {};
  double acc_gx[kLanes] = {};
  auto add = [&](std::size_t j, std::size_t l) {
    const float g = kAffine ? dyr[j] * w[j] : dyr[j];
    const float xhat = (xr[j] - mean) * rstd;
    acc_g[l] += g;
    acc_gx[l] += static_cast<double>(g) * xhat;
  };
  std::size_t j = 0;
  for (; j + kLanes <= count; j += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) add(j + l, l);
  }
  for (std::size_t l = 0; j + l < count; ++l) add(j + l, l);
  sum_g = lane_total(acc_g);
  sum_gx = lane_total(acc_gx);
}

template <bool kAffine>
void layer_norm_bwd_data_rows(int rows, int width, const float* x, const float* stats, const float* w,
                              const float* dy, float* dx) {
  const auto e = static_cast<std::size_t>(width);
  for (int i = 0; i < rows; ++i) {
    const float* xr = x + static_cast<std::size_t>(i) * e;
    const float* dyr = dy + static_cast<std::size_t>(i) * e;
    float* dxr = dx + static_cast<std::size_t>(i) * e;
    const float mean = stats[2 * i];
    const float rstd = stats[2 * i + 1];
    double sum_g = 0.0;
    double sum_gx = 0.0;
    lane_sums_g_gx<kAffine>(e, xr, mean, rstd, w, dyr, sum_g, sum_gx);
    const auto mean_g = static_cast<float>(sum_g / static_cast<double>(width));
    const auto mean_gx = static_cast<float>(sum_gx / static_cast<double>(width));
    for (std::size_t j = 0; j < e; ++j) {
      const float g = kAffine ? dyr[j] * w[j] : dyr[j];
      const float xhat = (xr[j] - mean) * rstd;
      dxr[j] = rstd * (g - mean_g - xhat * mean_gx);
    }
  }
}

inline void layer_norm_bwd_data_rows(int rows, int width, const float* x, const float* stats, const float* w,
                                     const float* dy, float* dx) {
  if (w != nullptr) {
    layer_norm_bwd_data_rows<true>(rows, width, x, stats, w, dy, dx);
  } else {
    layer_norm_bwd_data_rows<false>(rows, width, x, stats, w, dy, dx);
  }
}

// Row order, and tiles one after another: the sums do not depend on the workers or on the tile count. A column's
// additions are one chain down the rows; the vectors run across the columns, each loading and storing dw and db
// once for kRowBlock rows (the same additions in the same order as row by row). __restrict: without it, GCC will
// not check that many pointers for overlap and leaves the loop scalar.
constexpr int kRowBlock = 4;

inline void layer_norm_bwd_weights_rows(int rows, int width, const float* x, const float* stats, const float* dy,
                                        int accumulate, float* __restrict dw, float* __restrict db) {
  const auto e = static_cast<std::size_t>(width);
  if (accumulate == 0) {
    for (std::size_t j = 0; j < e; ++j) {
      dw[j] = 0.0f;
      db[j] = 0.0f;
    }
  }
  int i = 0;
  for (; i + kRowBlock <= rows; i += kRowBlock) {
    const float* xb = x + static_cast<std::size_t>(i) * e;
    const float* dyb = dy + static_cast<std::size_t>(i) * e;
    const float* sb = stats + 2 * i;
    for (std::size_t j = 0; j < e; ++j) {
      float acc_w = dw[j];
      float acc_b = db[j];
      for (std::size_t r = 0; r < kRowBlock; ++r) {
        const float g = dyb[r * e + j];
        acc_w += g * ((xb[r * e + j] - sb[2 * r]) * sb[2 * r + 1]);
        acc_b += g;
      }
      dw[j] = acc_w;
      db[j] = acc_b;
    }
  }
  for (; i < rows; ++i) {
    const float* xr = x + static_cast<std::size_t>(i) * e;
    const float* dyr = dy + static_cast<std::size_t>(i) * e;
    const float mean = stats[2 * i];
    const float rstd = stats[2 * i + 1];
    for (std::size_t j = 0; j < e; ++j) {
      dw[j] += dyr[j] * ((xr[j] - mean) * rstd);
      db[j] += dyr[j];
    }
  }
}

}  // namespace
}  // namespace dtnn::kernels::cpu
