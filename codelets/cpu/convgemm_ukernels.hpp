// SPDX-License-Identifier: Apache-2.0
// convgemm's own sgemm micro-kernels, beside BLIS's: C(MR x NR) = beta * C + A(MR x k) B(k x NR) on panels packed
// as BLIS packs them (A: MR-wide micro-panels, element (i, p) at a[p * MR + i]; B: NR-wide, (p, j) at b[p * NR +
// j]), with BLIS's micro-kernel signature, so that the convgemm driver calls either. C is stored with unit stride
// along MR (rs_c == 1, "column-preferring" as BLIS's skx kernel); other strides are handled, more slowly. Edges
// (m < MR, n < NR) are stored under masks rather than through a temporary. alpha is ignored (convgemm passes 1);
// a beta of 0 never reads C.
//
// Their point is shapes: MR and NR that divide the channel counts of real networks (64, 128, 256, 512) where
// BLIS's 32x12 (skx) and 6x16 (haswell) leave a part-empty panel, and register blocks chosen per pass by
// measurement (docs/design.md, Convolution). Each file is compiled for its instruction set only (CMake sets the
// flags per file); callers must check the CPU first (core/cpu_features.hpp).
#pragma once

#include <blis.h>

#include <cstdint>

namespace dtnn::kernels::cpu {

// MR x NR in the name. AVX-512F: MR = 16 x vectors.
void sgemm_ukr_avx512_32x8(dim_t m, dim_t n, dim_t k, float* alpha, float* a, float* b, float* beta, float* c,
                           inc_t rs_c, inc_t cs_c, auxinfo_t* aux, cntx_t* cntx);
void sgemm_ukr_avx512_48x8(dim_t m, dim_t n, dim_t k, float* alpha, float* a, float* b, float* beta, float* c,
                           inc_t rs_c, inc_t cs_c, auxinfo_t* aux, cntx_t* cntx);
// AVX2 + FMA: MR = 8 x vectors.
void sgemm_ukr_avx2_24x4(dim_t m, dim_t n, dim_t k, float* alpha, float* a, float* b, float* beta, float* c,
                         inc_t rs_c, inc_t cs_c, auxinfo_t* aux, cntx_t* cntx);

// ---- bf16 (codelets/cpu/bf16.hpp) ----
// C(MR x NR) = beta * C + A(MR x 2 kp) B(2 kp x NR) in fp32, on panels of bf16 pairs: A's micro-panel holds word
// (i, t) = elements (i, 2t) and (i, 2t + 1) at a[t * MR + i], B's (t, j) at b[t * NR + j]; each word's two products
// are added to the fp32 accumulator as vdpbf16ps adds them ((acc + odd) + even, pair after pair). C has unit
// stride along MR (cs_c between columns); edges are stored under masks; beta is 0 (C never read) or 1.
using bf16gemm_ukr_ft = void (*)(dim_t m, dim_t n, dim_t kp, const std::uint32_t* a, const std::uint32_t* b,
                                 float beta, float* c, inc_t cs_c);
// AVX512-BF16's vdpbf16ps (with AVX-512F; callers check cpu_has_avx512_bf16()).
void bf16gemm_ukr_avx512bf16_32x8(dim_t m, dim_t n, dim_t kp, const std::uint32_t* a, const std::uint32_t* b,
                                  float beta, float* c, inc_t cs_c);
// AMX's TDPBF16PS (Intel Sapphire Rapids and later; callers check cpu_has_amx_bf16() and run it between
// bf16_amx_begin(), which configures the tiles on the calling thread, and bf16_amx_end()), 32 x 32: a is the u-side
// pair panel as above (MR 32, word (i, t) at a[t * 32 + i]) and b the v-side as rows, word (j, t) at b[j * kp + t]
// (32 rows, those past n read but unused); kp a multiple of 16 (pairs past the reduction zero on both sides). Its
// sums are not vdpbf16ps's: the hardware adds the pairs of a tile row in an order and precision of its own, which
// no emulation here reproduces (measured: neither (acc + even) + odd nor (acc + odd) + even), so its results are
// its own, within fp32 accumulation of the double sums of the rounded inputs.
void bf16gemm_ukr_amx_32x32(dim_t m, dim_t n, dim_t kp, const std::uint32_t* a, const std::uint32_t* b, float beta,
                            float* c, inc_t cs_c);
void bf16_amx_begin();
void bf16_amx_end();
// The same results, bit for bit, in portable C++ (any CPU): the emulation of vdpbf16ps in bf16.hpp.
void bf16gemm_ukr_emulated_32x8(dim_t m, dim_t n, dim_t kp, const std::uint32_t* a, const std::uint32_t* b,
                                float beta, float* c, inc_t cs_c);

// A row of count floats -> ceil(count / 2) pair words, dst[t] = src[2t] and src[2t + 1] rounded as bf16.hpp's
// float_to_bf16 (an odd last element is paired with zero). The AVX-512F variant gives the same words, faster.
void round_to_bf16_pairs(const float* src, dim_t count, std::uint32_t* dst);
void round_to_bf16_pairs_avx512(const float* src, dim_t count, std::uint32_t* dst);
// Rows of `width` floats taken two by two -> rows of pair words: dst[t * width + f] = src[2t * width + f] (low half)
// and src[(2t + 1) * width + f] (high half), rounded as float_to_bf16; an odd last row pairs with zeros. Turns a
// block of fp32 micro-panels (element (f, p) at [p * width + f]) into the pair panels of the bf16 micro-kernels.
// The AVX-512F variant gives the same words, faster; width a multiple of 8.
void rows_to_bf16_pairs(const float* src, int width, dim_t rows, std::uint32_t* dst);
void rows_to_bf16_pairs_avx512(const float* src, int width, dim_t rows, std::uint32_t* dst);
// count floats -> count bf16 halves in order, rounded as float_to_bf16; and back (exact). AVX-512F bodies of
// bf16_arrays.hpp's functions, which pick them on CPUs that have it.
void floats_to_bf16_avx512(const float* src, std::size_t count, std::uint16_t* dst);
void bf16_to_floats_avx512(const std::uint16_t* src, std::size_t count, float* dst);

}  // namespace dtnn::kernels::cpu
