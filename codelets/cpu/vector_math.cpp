// SPDX-License-Identifier: Apache-2.0
// The dispatch of vector_math.hpp's functions, and their plain x86-64 versions (vector_math_impl.hpp's loops at the
// library's baseline flags).
#include "codelets/cpu/vector_math.hpp"

#include "codelets/cpu/nn_kernels.hpp"
#include "codelets/cpu/vector_math_impl.hpp"
#include "core/cpu_features.hpp"

namespace dtnn::kernels::cpu {

void exp_shifted(std::size_t count, const float* x, float shift, float* y) {
#if defined(__x86_64__)
  if (cpu_has_avx512()) return exp_shifted_avx512(count, x, shift, y);
  if (cpu_has_avx2_fma()) return exp_shifted_avx2(count, x, shift, y);
#endif
  exp_shifted_loop(count, x, shift, y);
}

void gelu_fwd(std::size_t count, const float* x, float* y) {
#if defined(__x86_64__)
  if (cpu_has_avx512()) return gelu_fwd_avx512(count, x, y);
  if (cpu_has_avx2_fma()) return gelu_fwd_avx2(count, x, y);
#endif
  gelu_fwd_loop(count, x, y);
}

void gelu_bwd_data(std::size_t count, const float* x, const float* dy, float* dx) {
#if defined(__x86_64__)
  if (cpu_has_avx512()) return gelu_bwd_data_avx512(count, x, dy, dx);
  if (cpu_has_avx2_fma()) return gelu_bwd_data_avx2(count, x, dy, dx);
#endif
  gelu_bwd_data_loop(count, x, dy, dx);
}

void gelu_tanh_fwd(std::size_t count, const float* x, float* y) {
#if defined(__x86_64__)
  if (cpu_has_avx512()) return gelu_tanh_fwd_avx512(count, x, y);
  if (cpu_has_avx2_fma()) return gelu_tanh_fwd_avx2(count, x, y);
#endif
  gelu_tanh_fwd_loop(count, x, y);
}

void gelu_tanh_bwd_data(std::size_t count, const float* x, const float* dy, float* dx) {
#if defined(__x86_64__)
  if (cpu_has_avx512()) return gelu_tanh_bwd_data_avx512(count, x, dy, dx);
  if (cpu_has_avx2_fma()) return gelu_tanh_bwd_data_avx2(count, x, dy, dx);
#endif
  gelu_tanh_bwd_data_loop(count, x, dy, dx);
}

}  // namespace dtnn::kernels::cpu
