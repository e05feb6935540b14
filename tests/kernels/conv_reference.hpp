// SPDX-License-Identifier: Apache-2.0
// Direct convolution in double precision, one element at a time: the oracle of every convolution kernel's tests
// (convgemm, Winograd), and the sampling of the elements compared on large layers.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "core/shapes.hpp"
#include "kernel_test_util.hpp"

namespace dtnn::kernels::cpu::test {

inline std::size_t x_size(const Conv2dShape& sh) { return static_cast<std::size_t>(sh.n) * sh.c * sh.h * sh.w; }
inline std::size_t y_size(const Conv2dShape& sh) { return static_cast<std::size_t>(sh.n) * sh.k * sh.out_h() * sh.out_w(); }
inline std::size_t w_size(const Conv2dShape& sh) { return static_cast<std::size_t>(sh.k) * (sh.c / sh.groups) * sh.r * sh.s; }

// ---- Direct convolution in double, one output element at a time ----

inline double reference_y(const Conv2dShape& sh, const std::vector<float>& x, const std::vector<float>& w, std::size_t yi) {
  const std::size_t oh = sh.out_h(), ow = sh.out_w();
  const int cg = sh.c / sh.groups, kg = sh.k / sh.groups;
  const int ox = static_cast<int>(yi % ow), oy = static_cast<int>(yi / ow % oh);
  const int kk = static_cast<int>(yi / (ow * oh) % sh.k);
  const std::size_t i = yi / (ow * oh * sh.k);
  const int g = kk / kg;
  double acc = 0.0;
  for (int ci = 0; ci < cg; ++ci) {
    for (int kr = 0; kr < sh.r; ++kr) {
      const int iy = oy * sh.stride_h - sh.pad_top + kr * sh.dil_h;
      for (int ks = 0; ks < sh.s; ++ks) {
        const int ix = ox * sh.stride_w - sh.pad_left + ks * sh.dil_w;
        if (iy < 0 || iy >= sh.h || ix < 0 || ix >= sh.w) {
          continue;
        }
        const std::size_t xi = ((i * sh.c + static_cast<std::size_t>(g) * cg + ci) * sh.h + iy) * sh.w + ix;
        const std::size_t wi = ((static_cast<std::size_t>(kk) * cg + ci) * sh.r + kr) * sh.s + ks;
        acc += static_cast<double>(x[xi]) * w[wi];
      }
    }
  }
  return acc;
}

// Output coordinate o with o * stride + offset == target, or -1.
inline int source_of(int target, int offset, int stride, int extent) {
  const int t = target - offset;
  if (t < 0 || t % stride != 0 || t / stride >= extent) {
    return -1;
  }
  return t / stride;
}

inline double reference_dx(const Conv2dShape& sh, const std::vector<float>& dy, const std::vector<float>& w, std::size_t xi) {
  const int oh = sh.out_h(), ow = sh.out_w();
  const int cg = sh.c / sh.groups, kg = sh.k / sh.groups;
  const int ix = static_cast<int>(xi % sh.w), iy = static_cast<int>(xi / sh.w % sh.h);
  const int ch = static_cast<int>(xi / (static_cast<std::size_t>(sh.w) * sh.h) % sh.c);
  const std::size_t i = xi / (static_cast<std::size_t>(sh.w) * sh.h * sh.c);
  const int g = ch / cg, ci = ch % cg;
  double acc = 0.0;
  for (int kk = g * kg; kk < (g + 1) * kg; ++kk) {
    for (int kr = 0; kr < sh.r; ++kr) {
      const int oy = source_of(iy, kr * sh.dil_h - sh.pad_top, sh.stride_h, oh);
      for (int ks = 0; ks < sh.s && oy >= 0; ++ks) {
        const int ox = source_of(ix, ks * sh.dil_w - sh.pad_left, sh.stride_w, ow);
        if (ox < 0) {
          continue;
        }
        const std::size_t wi = ((static_cast<std::size_t>(kk) * cg + ci) * sh.r + kr) * sh.s + ks;
        const std::size_t yi = ((i * sh.k + kk) * oh + oy) * ow + ox;
        acc += static_cast<double>(w[wi]) * dy[yi];
      }
    }
  }
  return acc;
}

inline double reference_dw(const Conv2dShape& sh, const std::vector<float>& x, const std::vector<float>& dy, std::size_t wi) {
  const int oh = sh.out_h(), ow = sh.out_w();
  const int cg = sh.c / sh.groups, kg = sh.k / sh.groups;
  const int ks = static_cast<int>(wi % sh.s), kr = static_cast<int>(wi / sh.s % sh.r);
  const int ci = static_cast<int>(wi / (static_cast<std::size_t>(sh.s) * sh.r) % cg);
  const int kk = static_cast<int>(wi / (static_cast<std::size_t>(sh.s) * sh.r * cg));
  const int ch = kk / kg * cg + ci;
  double acc = 0.0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(sh.n); ++i) {
    for (int oy = 0; oy < oh; ++oy) {
      const int iy = oy * sh.stride_h - sh.pad_top + kr * sh.dil_h;
      if (iy < 0 || iy >= sh.h) {
        continue;
      }
      for (int ox = 0; ox < ow; ++ox) {
        const int ix = ox * sh.stride_w - sh.pad_left + ks * sh.dil_w;
        if (ix < 0 || ix >= sh.w) {
          continue;
        }
        acc += static_cast<double>(x[((i * sh.c + ch) * sh.h + iy) * sh.w + ix]) *
               dy[((i * sh.k + kk) * oh + oy) * ow + ox];
      }
    }
  }
  return acc;
}

// Elements compared with the reference: all of them when that costs at most kBudget multiply-adds, otherwise a
// seeded random subset of that cost (at least 256 elements) plus the first and the last.
inline constexpr double kBudget = 4e6;

inline std::vector<std::size_t> checked_elements(std::size_t count, double macs_per_element, std::uint32_t seed) {
  std::vector<std::size_t> idx;
  if (static_cast<double>(count) * macs_per_element <= kBudget) {
    idx.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
      idx[i] = i;
    }
    return idx;
  }
  const auto picks = std::max<std::size_t>(256, static_cast<std::size_t>(kBudget / macs_per_element));
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::size_t> dist(0, count - 1);
  idx = {0, count - 1};
  for (std::size_t i = 0; i < picks; ++i) {
    idx.push_back(dist(gen));
  }
  return idx;
}

// got[idx[j]] against ref[j], within rtol of the largest |ref|; and no element of got left unwritten (NaN).
inline ::testing::AssertionResult matches_at(const std::vector<float>& got, const std::vector<std::size_t>& idx,
                                      const std::vector<double>& ref, double rtol) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) {
      return ::testing::AssertionFailure() << "element [" << i << "] is NaN (not written?)";
    }
  }
  std::vector<float> picked(idx.size());
  for (std::size_t j = 0; j < idx.size(); ++j) {
    picked[j] = got[idx[j]];
  }
  auto result = all_close(picked, ref, rtol);
  if (!result) {
    result << " (indices are positions in the list of " << idx.size() << " checked elements)";
  }
  return result;
}

}  // namespace dtnn::kernels::cpu::test
