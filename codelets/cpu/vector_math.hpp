// SPDX-License-Identifier: Apache-2.0
// Elementwise transcendental functions as vector loops (AVX-512, AVX2 or plain x86-64, chosen at run time after
// checking the CPU, DTNN_MAX_CPU_ISA capping it as for the other kernels): the exponentials of the attention's
// softmax, GELU's tanh form (nn_kernels.hpp's gelu_tanh_*) and exact GELU (gelu_fwd, gelu_bwd_data: x Phi(x) from
// the normal tail, which also keeps the left tail's relative accuracy that libm's erfc of a rounded x / sqrt 2 loses),
// which libm's scalar exp, tanh and erfc made the largest cost of a transformer step. The arithmetic is in
// vector_math_impl.hpp.
#pragma once

#include <cstddef>

namespace dtnn::kernels::cpu {

// y[i] = exp(x[i] - shift), within ~2 ulp; y may alias x.
void exp_shifted(std::size_t count, const float* x, float shift, float* y);

// The instruction sets' entry points (vector_math_avx2.cpp, vector_math_avx512.cpp), for the dispatch and the tests.
void exp_shifted_avx2(std::size_t count, const float* x, float shift, float* y);
void exp_shifted_avx512(std::size_t count, const float* x, float shift, float* y);
void gelu_fwd_avx2(std::size_t count, const float* x, float* y);
void gelu_fwd_avx512(std::size_t count, const float* x, float* y);
void gelu_bwd_data_avx2(std::size_t count, const float* x, const float* dy, float* dx);
void gelu_bwd_data_avx512(std::size_t count, const float* x, const float* dy, float* dx);
void gelu_tanh_fwd_avx2(std::size_t count, const float* x, float* y);
void gelu_tanh_fwd_avx512(std::size_t count, const float* x, float* y);
void gelu_tanh_bwd_data_avx2(std::size_t count, const float* x, const float* dy, float* dx);
void gelu_tanh_bwd_data_avx512(std::size_t count, const float* x, const float* dy, float* dx);

}  // namespace dtnn::kernels::cpu
