// SPDX-License-Identifier: Apache-2.0
// Elementwise transcendental functions as vector loops (AVX-512, AVX2 or plain x86-64, chosen at run time after
// checking the CPU, DTNN_MAX_CPU_ISA capping it as for the other kernels): the exponentials of the attention's
// softmax and GELU's tanh form (nn_kernels.hpp's gelu_tanh_*), which libm's scalar exp and tanh made the largest
// cost of a transformer step. The arithmetic is in vector_math_impl.hpp.
#pragma once

#include <cstddef>

namespace dtnn::kernels::cpu {

// y[i] = exp(x[i] - shift), within ~2 ulp; y may alias x.
void exp_shifted(std::size_t count, const float* x, float shift, float* y);

// The instruction sets' entry points (vector_math_avx2.cpp, vector_math_avx512.cpp), for the dispatch and the tests.
void exp_shifted_avx2(std::size_t count, const float* x, float shift, float* y);
void exp_shifted_avx512(std::size_t count, const float* x, float shift, float* y);
void gelu_tanh_fwd_avx2(std::size_t count, const float* x, float* y);
void gelu_tanh_fwd_avx512(std::size_t count, const float* x, float* y);
void gelu_tanh_bwd_data_avx2(std::size_t count, const float* x, const float* dy, float* dx);
void gelu_tanh_bwd_data_avx512(std::size_t count, const float* x, const float* dy, float* dx);

}  // namespace dtnn::kernels::cpu
