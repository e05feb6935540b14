// SPDX-License-Identifier: Apache-2.0
// The portable side of convgemm's bf16 passes (convgemm_ukernels.hpp): the emulated micro-kernel, which gives
// vdpbf16ps's results bit for bit on any CPU, and the packing into bf16 pairs.
#include <cstdint>

#include "codelets/cpu/bf16.hpp"
#include "codelets/cpu/convgemm_ukernels.hpp"

namespace dtnn::kernels::cpu {

void bf16gemm_ukr_emulated_32x8(dim_t m, dim_t n, dim_t kp, const std::uint32_t* a, const std::uint32_t* b,
                                float beta, float* c, inc_t cs_c) {
  constexpr int kMr = 32;
  constexpr int kNr = 8;
  float acc[kNr][kMr] = {};
  for (dim_t t = 0; t < kp; ++t) {
    for (int j = 0; j < kNr; ++j) {
      for (int i = 0; i < kMr; ++i) {
        acc[j][i] = dpbf16(acc[j][i], a[i], b[j]);
      }
    }
    a += kMr;
    b += kNr;
  }
  for (dim_t j = 0; j < n && j < kNr; ++j) {
    float* cj = c + j * cs_c;
    for (dim_t i = 0; i < m && i < kMr; ++i) {
      cj[i] = beta != 0.0f ? cj[i] + acc[j][i] : acc[j][i];
    }
  }
}

void round_to_bf16_pairs(const float* src, dim_t count, std::uint32_t* dst) {
  dim_t t = 0;
  for (; 2 * t + 1 < count; ++t) {
    dst[t] = bf16_pair(src[2 * t], src[2 * t + 1]);
  }
  if (2 * t < count) {
    dst[t] = bf16_pair(src[2 * t], 0.0f);
  }
}

void rows_to_bf16_pairs(const float* src, int width, dim_t rows, std::uint32_t* dst) {
  const auto w = static_cast<dim_t>(width);
  for (dim_t t = 0; 2 * t < rows; ++t) {
    const float* even = src + 2 * t * w;
    const bool has_odd = 2 * t + 1 < rows;
    for (dim_t f = 0; f < w; ++f) {
      dst[t * w + f] = bf16_pair(even[f], has_odd ? even[w + f] : 0.0f);
    }
  }
}

}  // namespace dtnn::kernels::cpu
