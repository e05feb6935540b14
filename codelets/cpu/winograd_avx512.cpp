// SPDX-License-Identifier: Apache-2.0
// Winograd F(2x2, 3x3) with AVX-512F: vectors of 16 floats (8 for the weights' panels), convgemm's 32x8
// micro-kernel. Compiled with -mavx512f -mfma only (CMake); winograd.cpp calls it after checking the CPU.
#include "codelets/cpu/convgemm_ukernels.hpp"
#include "codelets/cpu/winograd_impl.hpp"

namespace dtnn::kernels::cpu {

void winograd_convolve_avx512(const WinogradCall& call) {
  using Vec = float __attribute__((vector_size(16 * sizeof(float))));
  using Panel = float __attribute__((vector_size(8 * sizeof(float))));  // NR output channels
  winograd_convolve<Vec, Panel>(call, sgemm_ukr_avx512_32x8, 32);
}

}  // namespace dtnn::kernels::cpu
