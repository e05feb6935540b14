// SPDX-License-Identifier: Apache-2.0
// The vdpbf16ps micro-kernel of convgemm's bf16 passes (convgemm_ukernels.hpp). Compiled with -mavx512f
// -mavx512bf16 only (CMake); callers check cpu_has_avx512_bf16() first.
#include <immintrin.h>

#include "codelets/cpu/convgemm_ukernels.hpp"

namespace dtnn::kernels::cpu {
namespace {

// MV vectors of 16 fp32 accumulators along MR, NR columns; one vdpbf16ps per accumulator and pair of the
// reduction, in order: the same chain of roundings as the emulation (bf16.hpp's dpbf16).
template <int MV, int NR>
[[gnu::always_inline]] inline void ukr(dim_t m, dim_t n, dim_t kp, const std::uint32_t* a, const std::uint32_t* b,
                                       float beta, float* c, inc_t cs_c) {
  constexpr int kMr = 16 * MV;
  __m512 acc[MV][NR];
  #pragma GCC unroll 16
  for (int j = 0; j < NR; ++j) {
    #pragma GCC unroll 16
    for (int i = 0; i < MV; ++i) {
      acc[i][j] = _mm512_setzero_ps();
    }
  }
  #pragma GCC unroll 16
  for (dim_t j = 0; j < NR && j < n; ++j) {
    _mm_prefetch(reinterpret_cast<const char*>(c + j * cs_c), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + j * cs_c + kMr - 1), _MM_HINT_T0);
  }
  #pragma GCC unroll 4
  for (dim_t t = 0; t < kp; ++t) {
    __m512bh av[MV];
    #pragma GCC unroll 16
    for (int i = 0; i < MV; ++i) {
      av[i] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(a + i * 16));
    }
    _mm_prefetch(reinterpret_cast<const char*>(a + 8 * kMr), _MM_HINT_T0);
    #pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      const auto bj = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(b[j])));
      #pragma GCC unroll 16
      for (int i = 0; i < MV; ++i) {
        acc[i][j] = _mm512_dpbf16_ps(acc[i][j], av[i], bj);
      }
    }
    a += kMr;
    b += NR;
  }
  const bool full = m == kMr;
  const auto jn = static_cast<int>(n < NR ? n : NR);
  #pragma GCC unroll 16
  for (int j = 0; j < NR; ++j) {
    if (j >= jn) {
      continue;
    }
    float* cj = c + j * cs_c;
    #pragma GCC unroll 16
    for (int i = 0; i < MV; ++i) {
      const dim_t left = m - i * 16;
      if (full || left >= 16) {
        __m512 v = acc[i][j];
        if (beta != 0.0f) {
          v = _mm512_add_ps(_mm512_loadu_ps(cj + i * 16), v);
        }
        _mm512_storeu_ps(cj + i * 16, v);
      } else if (left > 0) {
        const auto mask = static_cast<__mmask16>((1u << left) - 1u);
        __m512 v = acc[i][j];
        if (beta != 0.0f) {
          v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, cj + i * 16), v);
        }
        _mm512_mask_storeu_ps(cj + i * 16, mask, v);
      }
    }
  }
}

}  // namespace

void bf16gemm_ukr_avx512bf16_32x8(dim_t m, dim_t n, dim_t kp, const std::uint32_t* a, const std::uint32_t* b,
                                  float beta, float* c, inc_t cs_c) {
  ukr<2, 8>(m, n, kp, a, b, beta, c, cs_c);
}

}  // namespace dtnn::kernels::cpu
