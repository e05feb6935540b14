// SPDX-License-Identifier: Apache-2.0
// AVX2 + FMA micro-kernels of convgemm (convgemm_ukernels.hpp). Compiled with -mavx2 -mfma only (CMake).
#include <immintrin.h>

#include "codelets/cpu/convgemm_ukernels.hpp"

namespace dtnn::kernels::cpu {
namespace {

// Lanes [0, count) of a mask for _mm256_maskload_ps / _mm256_maskstore_ps.
__m256i first_lanes(dim_t count) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), lanes);
}

// MV vectors of 8 floats along MR, NR columns: MV * NR accumulators (at most 12 of the 16 ymm registers), each
// summing its k products in order.
template <int MV, int NR>
[[gnu::always_inline]] inline void ukr(dim_t m, dim_t n, dim_t k, const float* a, const float* b, float beta,
                                       float* c, inc_t rs_c, inc_t cs_c, auxinfo_t* aux) {
  constexpr int kMr = 8 * MV;
  __m256 acc[MV][NR];
  #pragma GCC unroll 16
  for (int j = 0; j < NR; ++j) {
    #pragma GCC unroll 16
    for (int i = 0; i < MV; ++i) {
      acc[i][j] = _mm256_setzero_ps();
    }
  }
  if (rs_c == 1) {
    #pragma GCC unroll 16
    for (dim_t j = 0; j < NR && j < n; ++j) {
      _mm_prefetch(reinterpret_cast<const char*>(c + j * cs_c), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + j * cs_c + kMr - 1), _MM_HINT_T0);
    }
  }
  #pragma GCC unroll 4
  for (dim_t p = 0; p < k; ++p) {
    __m256 av[MV];
    #pragma GCC unroll 16
    for (int i = 0; i < MV; ++i) {
      av[i] = _mm256_load_ps(a + i * 8);
    }
    _mm_prefetch(reinterpret_cast<const char*>(a + 8 * kMr), _MM_HINT_T0);
    #pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      const __m256 bj = _mm256_broadcast_ss(b + j);
      #pragma GCC unroll 16
      for (int i = 0; i < MV; ++i) {
        acc[i][j] = _mm256_fmadd_ps(av[i], bj, acc[i][j]);
      }
    }
    a += kMr;
    b += NR;
  }
  _mm_prefetch(static_cast<const char*>(bli_auxinfo_next_a(aux)), _MM_HINT_T0);
  _mm_prefetch(static_cast<const char*>(bli_auxinfo_next_b(aux)), _MM_HINT_T0);

  if (rs_c == 1) {
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
        const dim_t left = m - i * 8;
        if (full || left >= 8) {
          __m256 v = acc[i][j];
          if (beta != 0.0f) {
            v = _mm256_add_ps(_mm256_loadu_ps(cj + i * 8), v);
          }
          _mm256_storeu_ps(cj + i * 8, v);
        } else if (left > 0) {
          const __m256i mask = first_lanes(left);
          __m256 v = acc[i][j];
          if (beta != 0.0f) {
            v = _mm256_add_ps(_mm256_maskload_ps(cj + i * 8, mask), v);
          }
          _mm256_maskstore_ps(cj + i * 8, mask, v);
        }
      }
    }
    return;
  }
  alignas(32) float tile[kMr * NR];
  #pragma GCC unroll 16
  for (int j = 0; j < NR; ++j) {
    #pragma GCC unroll 16
    for (int i = 0; i < MV; ++i) {
      _mm256_store_ps(tile + j * kMr + i * 8, acc[i][j]);
    }
  }
  for (dim_t j = 0; j < n; ++j) {
    for (dim_t i = 0; i < m; ++i) {
      float& out = c[i * rs_c + j * cs_c];
      out = beta != 0.0f ? out + tile[j * kMr + i] : tile[j * kMr + i];
    }
  }
}

}  // namespace

// beta is 0 or 1 in convgemm: with 1, "beta * C + AB" is the C + AB the kernels compute.
void sgemm_ukr_avx2_24x4(dim_t m, dim_t n, dim_t k, float* alpha, float* a, float* b, float* beta, float* c,
                         inc_t rs_c, inc_t cs_c, auxinfo_t* aux, cntx_t* cntx) {
  ukr<3, 4>(m, n, k, a, b, *beta, c, rs_c, cs_c, aux);
}

}  // namespace dtnn::kernels::cpu
