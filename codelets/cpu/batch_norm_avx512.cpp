// SPDX-License-Identifier: Apache-2.0
// batch_norm_impl.hpp's passes compiled for AVX-512 (CMake sets this file's flags), the three sums replaced by
// versions that sum kGroup planes of a sample (consecutive channels) at once. A plane's eight double lanes are one
// register here, element i + l added to lane l as plane_sums.hpp adds it, then the tail and the lanes added to a
// total in order: each plane's sum has the same additions in the same order as the plain file's, so the same bits,
// and the planes' chains are independent, which the plain loop's single chain per plane is not (its add latency
// bound the pass: one Zen 5 core summed 28-42 GB/s of cache-resident planes of 64-1024 floats, against 80-88 here).
#include <immintrin.h>

#include <cstddef>

#include "codelets/cpu/batch_norm.hpp"
#include "codelets/cpu/batch_norm_impl.hpp"

namespace dtnn::kernels::cpu {
namespace {

constexpr int kGroup = 4;  // planes at once: 4 registers of lanes for the statistics, 8 for the backward sums

// The doubles of eight floats (the zero-masking form with every lane kept: GCC 12 warns of the plain form's
// undefined source register).
inline __m512d widen(__m256 v) { return _mm512_maskz_cvtps_pd(0xff, v); }
inline __m512d widen(const float* p) { return widen(_mm256_loadu_ps(p)); }

// sum_plane_of's end: the tail's terms in order, then the eight lanes in order.
template <class Term>
double finish(__m512d lanes, std::size_t from, std::size_t len, Term&& term) {
  alignas(64) double lane[8];
  _mm512_store_pd(lane, lanes);
  double total = 0.0;
  for (std::size_t j = from; j < len; ++j) total += term(j);
  for (double v : lane) total += v;
  return total;
}

// The planes of channels ch, ch + 1, ... (G of them) of sample i, and the first index past the whole lane blocks.
struct Group {
  std::size_t base, plane, blocks;
  [[nodiscard]] std::size_t at(int k) const { return base + static_cast<std::size_t>(k) * plane; }
};

template <int G>
void sums_group(const Group& g, const float* x, float* out) {
  __m512d acc[G];
  for (auto& a : acc) a = _mm512_setzero_pd();
  for (std::size_t i = 0; i < g.blocks; i += 8) {
    for (int k = 0; k < G; ++k) acc[k] = _mm512_add_pd(acc[k], widen(x + g.at(k) + i));
  }
  for (int k = 0; k < G; ++k) {
    const float* xp = x + g.at(k);
    out[k] = static_cast<float>(finish(acc[k], g.blocks, g.plane, [xp](std::size_t j) {
      return static_cast<double>(xp[j]);
    }));
  }
}

template <int G>
void sqdev_group(const Group& g, const float* x, const float* mean, float* out) {
  __m512d acc[G], m[G];
  for (int k = 0; k < G; ++k) {
    acc[k] = _mm512_setzero_pd();
    m[k] = _mm512_set1_pd(static_cast<double>(mean[k]));
  }
  for (std::size_t i = 0; i < g.blocks; i += 8) {
    for (int k = 0; k < G; ++k) {
      const __m512d d = _mm512_sub_pd(widen(x + g.at(k) + i), m[k]);
      acc[k] = _mm512_add_pd(acc[k], _mm512_mul_pd(d, d));
    }
  }
  for (int k = 0; k < G; ++k) {
    const float* xp = x + g.at(k);
    const double mk = mean[k];
    out[k] = static_cast<float>(finish(acc[k], g.blocks, g.plane, [xp, mk](std::size_t j) {
      const double d = static_cast<double>(xp[j]) - mk;
      return d * d;
    }));
  }
}

// The two sums of the backward pass (of g and of g * xhat) for G planes: g is dy, or with Masked dy where relu_y > 0
// and +0 elsewhere (the comparison in double: the float widened exactly, NaN not > 0, as the float comparison).
template <int G, bool Masked>
void bwd_group(const Group& g, const float* x, const float* relu_y, const float* dy, const float* mean,
               const float* invstd, float* sum_g, float* sum_gx) {
  __m512d acc_g[G], acc_gx[G];
  __m256 m[G], is[G];
  for (int k = 0; k < G; ++k) {
    acc_g[k] = _mm512_setzero_pd();
    acc_gx[k] = _mm512_setzero_pd();
    m[k] = _mm256_set1_ps(mean[k]);
    is[k] = _mm256_set1_ps(invstd[k]);
  }
  for (std::size_t i = 0; i < g.blocks; i += 8) {
    for (int k = 0; k < G; ++k) {
      const std::size_t e = g.at(k) + i;
      __m512d gd = widen(dy + e);
      if constexpr (Masked) {
        gd = _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(widen(relu_y + e), _mm512_setzero_pd(), _CMP_GT_OQ), gd);
      }
      const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + e), m[k]), is[k]);
      acc_g[k] = _mm512_add_pd(acc_g[k], gd);
      acc_gx[k] = _mm512_add_pd(acc_gx[k], _mm512_mul_pd(gd, widen(xhat)));
    }
  }
  for (int k = 0; k < G; ++k) {
    const float* xp = x + g.at(k);
    const float* gp = dy + g.at(k);
    const float* yp = Masked ? relu_y + g.at(k) : nullptr;
    const float mk = mean[k], ik = invstd[k];
    const auto grad = [gp, yp](std::size_t j) { return Masked ? bn_relu_masked(yp[j], gp[j]) : gp[j]; };
    sum_g[k] = static_cast<float>(finish(acc_g[k], g.blocks, g.plane, [&](std::size_t j) {
      return static_cast<double>(grad(j));
    }));
    sum_gx[k] = static_cast<float>(finish(acc_gx[k], g.blocks, g.plane, [&](std::size_t j) {
      return static_cast<double>(grad(j)) * static_cast<double>((xp[j] - mk) * ik);
    }));
  }
}

// Calls body.template operator()<G>(i, ch, group) over every sample i and its channels, kGroup at a time, then one
// at a time for the last c % kGroup.
template <class Body>
void for_each_group(int n, int c, std::size_t plane, Body&& body) {
  const std::size_t blocks = plane / 8 * 8;
  for (int i = 0; i < n; ++i) {
    int ch = 0;
    for (; ch + kGroup <= c; ch += kGroup) {
      body.template operator()<kGroup>(i, ch, Group{bn_plane_index(i, c, ch) * plane, plane, blocks});
    }
    for (; ch < c; ++ch) body.template operator()<1>(i, ch, Group{bn_plane_index(i, c, ch) * plane, plane, blocks});
  }
}

void sums_rows(int n, int c, std::size_t plane, const float* x, float* partials) {
  for_each_group(n, c, plane, [&]<int G>(int i, int ch, const Group& g) {
    sums_group<G>(g, x, partials + bn_plane_index(i, c, ch));
  });
}

void sqdev_sums_rows(int n, int c, std::size_t plane, const float* x, const float* mean, float* partials) {
  for_each_group(n, c, plane, [&]<int G>(int i, int ch, const Group& g) {
    sqdev_group<G>(g, x, mean + ch, partials + bn_plane_index(i, c, ch));
  });
}

void bwd_sums_masked_rows(int n, int c, std::size_t plane, const float* x, const float* relu_y, const float* dy,
                          const float* mean, const float* invstd, float* partials) {
  for_each_group(n, c, plane, [&]<int G>(int i, int ch, const Group& g) {
    float* row = partials + static_cast<std::size_t>(i) * 2 * static_cast<std::size_t>(c);
    if (relu_y != nullptr) {
      bwd_group<G, true>(g, x, relu_y, dy, mean + ch, invstd + ch, row + ch, row + c + ch);
    } else {
      bwd_group<G, false>(g, x, nullptr, dy, mean + ch, invstd + ch, row + ch, row + c + ch);
    }
  });
}

constexpr BatchNormPasses kPasses{sums_rows, sqdev_sums_rows, bn_fwd_fused_rows, bwd_sums_masked_rows,
                                  bn_bwd_data_masked_rows};

}  // namespace

const BatchNormPasses& batch_norm_passes_avx512() { return kPasses; }

}  // namespace dtnn::kernels::cpu
