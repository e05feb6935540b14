// SPDX-License-Identifier: Apache-2.0
// AVX-512F micro-kernels of convgemm (convgemm_ukernels.hpp). Compiled with -mavx512f -mfma only (CMake).
#include <immintrin.h>

#include <cstring>

#include "codelets/cpu/convgemm_ukernels.hpp"

namespace dtnn::kernels::cpu {
namespace {

// MV vectors of 16 floats along MR, NR columns: MV * NR accumulators, each summing its k products in order (one
// FMA chain per element, as BLIS's kernels do).
template <int MV, int NR>
[[gnu::always_inline]] inline void ukr(dim_t m, dim_t n, dim_t k, const float* a, const float* b, float beta,
                                       float* c, inc_t rs_c, inc_t cs_c, auxinfo_t* aux) {
  constexpr int kMr = 16 * MV;
  __m512 acc[MV][NR];
  #pragma GCC unroll 16
  for (int j = 0; j < NR; ++j) {
    #pragma GCC unroll 16
    for (int i = 0; i < MV; ++i) {
      acc[i][j] = _mm512_setzero_ps();
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
    __m512 av[MV];
    #pragma GCC unroll 16
    for (int i = 0; i < MV; ++i) {
      av[i] = _mm512_load_ps(a + i * 16);
    }
    _mm_prefetch(reinterpret_cast<const char*>(a + 8 * kMr), _MM_HINT_T0);
    #pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      const __m512 bj = _mm512_set1_ps(b[j]);
      #pragma GCC unroll 16
      for (int i = 0; i < MV; ++i) {
        acc[i][j] = _mm512_fmadd_ps(av[i], bj, acc[i][j]);
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
    return;
  }
  alignas(64) float tile[kMr * NR];
  #pragma GCC unroll 16
  for (int j = 0; j < NR; ++j) {
    #pragma GCC unroll 16
    for (int i = 0; i < MV; ++i) {
      _mm512_store_ps(tile + j * kMr + i * 16, acc[i][j]);
    }
  }
  for (dim_t j = 0; j < n; ++j) {
    for (dim_t i = 0; i < m; ++i) {
      float& out = c[i * rs_c + j * cs_c];
      out = beta != 0.0f ? out + tile[j * kMr + i] : tile[j * kMr + i];
    }
  }
}

// The upper halves of x rounded to bf16 as float_to_bf16 (bf16.hpp) rounds, in the upper 16 bits of each lane
// (the lower 16 are zero).
inline __m512i round_bf16_high(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i exponent = _mm512_set1_epi32(0x7f800000);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), exponent);
  const __mmask16 tiny = _mm512_testn_epi32_mask(u, exponent);
  const __m512i odd = _mm512_and_si512(_mm512_maskz_srli_epi32(0xffff, u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x00400000)));
  r = _mm512_mask_mov_epi32(r, tiny, _mm512_and_si512(u, _mm512_set1_epi32(static_cast<int>(0x80000000u))));
  return _mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xffff0000u)));
}

// 16 floats -> their 16 bf16 halves in order (8 pair words); masked-off lanes give zeros.
inline __m256i round_bf16_16(__mmask16 mask, const float* src) {
  const __m512i halves = _mm512_maskz_srli_epi32(0xffff, round_bf16_high(_mm512_maskz_loadu_ps(mask, src)), 16);
  return _mm512_maskz_cvtepi32_epi16(0xffff, halves);
}

}  // namespace

void round_to_bf16_pairs_avx512(const float* src, dim_t count, std::uint32_t* dst) {
  dim_t i = 0;
  for (; i + 16 <= count; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i / 2), round_bf16_16(0xffff, src + i));
  }
  if (i < count) {
    const auto left = static_cast<unsigned>(count - i);
    alignas(32) std::uint32_t tail[8];
    const auto mask = static_cast<__mmask16>((1u << left) - 1u);
    _mm256_store_si256(reinterpret_cast<__m256i*>(tail), round_bf16_16(mask, src + i));
    std::memcpy(dst + i / 2, tail, (left + 1) / 2 * sizeof(std::uint32_t));
  }
}

void floats_to_bf16_avx512(const float* src, std::size_t count, std::uint16_t* dst) {
  std::size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), round_bf16_16(0xffff, src + i));
  }
  if (i < count) {
    // The tail through the same vector rounding (no inline helper of bf16.hpp in this -mavx512f file).
    const std::size_t left = count - i;
    alignas(32) std::uint16_t halves[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(halves),
                       round_bf16_16(static_cast<__mmask16>((1u << left) - 1u), src + i));
    std::memcpy(dst + i, halves, left * sizeof(std::uint16_t));
  }
}

void bf16_to_floats_avx512(const std::uint16_t* src, std::size_t count, float* dst) {
  std::size_t i = 0;
  const auto widen = [](__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); };
  for (; i + 16 <= count; i += 16) {
    _mm512_storeu_ps(dst + i, widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  }
  if (i < count) {
    const std::size_t left = count - i;
    alignas(32) std::uint16_t halves[16] = {};
    alignas(64) float out[16];
    std::memcpy(halves, src + i, left * sizeof(std::uint16_t));
    _mm512_store_ps(out, widen(_mm256_load_si256(reinterpret_cast<const __m256i*>(halves))));
    std::memcpy(dst + i, out, left * sizeof(float));
  }
}

void rows_to_bf16_pairs_avx512(const float* src, int width, dim_t rows, std::uint32_t* dst) {
  const auto w = static_cast<dim_t>(width);
  const __m512i low = _mm512_set1_epi32(0xffff);
  // Lanes of 16 (8 for the last of a width that is an odd multiple of 8): even row's halves below, odd row's above.
  const auto pair = [&](const float* even, const float* odd, __mmask16 mask, std::uint32_t* out) {
    const __m512i lo = _mm512_maskz_srli_epi32(0xffff, round_bf16_high(_mm512_maskz_loadu_ps(mask, even)), 16);
    const __m512i hi = odd != nullptr ? round_bf16_high(_mm512_maskz_loadu_ps(mask, odd)) : _mm512_setzero_si512();
    _mm512_mask_storeu_epi32(out, mask, _mm512_or_si512(_mm512_and_si512(lo, low), hi));
  };
  for (dim_t t = 0; 2 * t < rows; ++t) {
    const float* even = src + 2 * t * w;
    const float* odd = 2 * t + 1 < rows ? even + w : nullptr;
    std::uint32_t* out = dst + t * w;
    dim_t f = 0;
    for (; f + 16 <= w; f += 16) {
      pair(even + f, odd != nullptr ? odd + f : nullptr, 0xffff, out + f);
    }
    if (f < w) {
      pair(even + f, odd != nullptr ? odd + f : nullptr, static_cast<__mmask16>((1u << (w - f)) - 1u), out + f);
    }
  }
}

// beta is 0 or 1 in convgemm: with 1, "beta * C + AB" is the C + AB the kernels compute.
void sgemm_ukr_avx512_32x8(dim_t m, dim_t n, dim_t k, float* alpha, float* a, float* b, float* beta, float* c,
                           inc_t rs_c, inc_t cs_c, auxinfo_t* aux, cntx_t* cntx) {
  ukr<2, 8>(m, n, k, a, b, *beta, c, rs_c, cs_c, aux);
}
void sgemm_ukr_avx512_48x8(dim_t m, dim_t n, dim_t k, float* alpha, float* a, float* b, float* beta, float* c,
                           inc_t rs_c, inc_t cs_c, auxinfo_t* aux, cntx_t* cntx) {
  ukr<3, 8>(m, n, k, a, b, *beta, c, rs_c, cs_c, aux);
}

}  // namespace dtnn::kernels::cpu
