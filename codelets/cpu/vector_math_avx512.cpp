// SPDX-License-Identifier: Apache-2.0
// vector_math_impl.hpp's loops compiled for AVX512 (CMake sets this file's flags).
#include "codelets/cpu/vector_math.hpp"
#include "codelets/cpu/vector_math_impl.hpp"

namespace dtnn::kernels::cpu {

void exp_shifted_avx512(std::size_t count, const float* x, float shift, float* y) {
  exp_shifted_loop(count, x, shift, y);
}

void gelu_tanh_fwd_avx512(std::size_t count, const float* x, float* y) { gelu_tanh_fwd_loop(count, x, y); }

void gelu_tanh_bwd_data_avx512(std::size_t count, const float* x, const float* dy, float* dx) {
  gelu_tanh_bwd_data_loop(count, x, dy, dx);
}

void gelu_fwd_avx512(std::size_t count, const float* x, float* y) { gelu_fwd_loop(count, x, y); }

void gelu_bwd_data_avx512(std::size_t count, const float* x, const float* dy, float* dx) {
  gelu_bwd_data_loop(count, x, dy, dx);
}

}  // namespace dtnn::kernels::cpu
