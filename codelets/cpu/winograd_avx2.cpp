// SPDX-License-Identifier: Apache-2.0
// Winograd F(2x2, 3x3) with AVX2 + FMA: vectors of 8 floats (4 for the weights' panels), convgemm's 24x4
// micro-kernel. Compiled with -mavx2 -mfma only (CMake); winograd.cpp calls it after checking the CPU.
#include "codelets/cpu/convgemm_ukernels.hpp"
#include "codelets/cpu/winograd_impl.hpp"

namespace dtnn::kernels::cpu {

void winograd_convolve_avx2(const WinogradCall& call) {
  using Vec = float __attribute__((vector_size(8 * sizeof(float))));
  using Panel = float __attribute__((vector_size(4 * sizeof(float))));  // NR output channels
  winograd_convolve<Vec, Panel>(call, sgemm_ukr_avx2_24x4, 24);
}

}  // namespace dtnn::kernels::cpu
