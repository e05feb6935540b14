// SPDX-License-Identifier: Apache-2.0
// The instruction sets' versions of nn_kernels.hpp's batch normalisation training passes (batch_norm_impl.hpp's
// rows compiled for plain x86-64, AVX2 and AVX-512), for their dispatch and the tests; the three give the same bits.
// Each pass takes the arguments of its nn_kernels.hpp namesake.
#pragma once

#include <cstddef>

namespace dtnn::kernels::cpu {

struct BatchNormPasses {
  void (*sums)(int n, int c, std::size_t plane, const float* x, float* partials);
  void (*sqdev_sums)(int n, int c, std::size_t plane, const float* x, const float* mean, float* partials);
  void (*fwd_fused)(int n, int c, std::size_t plane, const float* x, const float* mean, const float* invstd,
                    const float* gamma, const float* beta, const float* residual, int relu, float* y);
  void (*bwd_sums_masked)(int n, int c, std::size_t plane, const float* x, const float* relu_y, const float* dy,
                          const float* mean, const float* invstd, float* partials);
  void (*bwd_data_masked)(int n, int c, std::size_t plane, const float* x, const float* relu_y, const float* dy,
                          const float* mean, const float* invstd, const float* gamma, const float* mean_dy,
                          const float* mean_dy_xhat, float* dx);
};

const BatchNormPasses& batch_norm_passes_generic();  // batch_norm.cpp
const BatchNormPasses& batch_norm_passes_avx2();     // batch_norm_avx2.cpp
const BatchNormPasses& batch_norm_passes_avx512();   // batch_norm_avx512.cpp
// The dispatch's choice: AVX-512, AVX2 or plain x86-64 after checking the CPU, DTNN_MAX_CPU_ISA capping it.
const BatchNormPasses& batch_norm_passes();

}  // namespace dtnn::kernels::cpu
