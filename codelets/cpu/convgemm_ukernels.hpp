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

namespace dtnn::kernels::cpu {

// MR x NR in the name. AVX-512F: MR = 16 x vectors.
void sgemm_ukr_avx512_32x8(dim_t m, dim_t n, dim_t k, float* alpha, float* a, float* b, float* beta, float* c,
                           inc_t rs_c, inc_t cs_c, auxinfo_t* aux, cntx_t* cntx);
void sgemm_ukr_avx512_48x8(dim_t m, dim_t n, dim_t k, float* alpha, float* a, float* b, float* beta, float* c,
                           inc_t rs_c, inc_t cs_c, auxinfo_t* aux, cntx_t* cntx);
// AVX2 + FMA: MR = 8 x vectors.
void sgemm_ukr_avx2_24x4(dim_t m, dim_t n, dim_t k, float* alpha, float* a, float* b, float* beta, float* c,
                         inc_t rs_c, inc_t cs_c, auxinfo_t* aux, cntx_t* cntx);

}  // namespace dtnn::kernels::cpu
