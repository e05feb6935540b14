// SPDX-License-Identifier: Apache-2.0
// CUDA element-wise activation kernels: launchers that enqueue on a stream and return (no StarPU here). Same
// names, contracts and formulas as the CPU kernels (codelets/cpu/nn_kernels.hpp); only expf, tanhf, expm1f and
// erfcf may differ from the host's libm in the last bits (CUDA documents at most 2 ulp). The host's exact GELU, the
// tanh form's exponential and the softmax's are vector loops of their own (codelets/cpu/vector_math_impl.hpp, within
// a few ulp): the GPU's differ from them by rounding.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace dtnn::kernels::cuda {

void sigmoid_fwd(std::size_t count, const float* x, float* y, cudaStream_t stream);
// dx = dy * y * (1 - y) from the output y
void sigmoid_bwd_data(std::size_t count, const float* y, const float* dy, float* dx, cudaStream_t stream);
void tanh_fwd(std::size_t count, const float* x, float* y, cudaStream_t stream);
// dx = dy * (1 - y^2) from the output y
void tanh_bwd_data(std::size_t count, const float* y, const float* dy, float* dx, cudaStream_t stream);
void leaky_relu_fwd(std::size_t count, float slope, const float* x, float* y, cudaStream_t stream);
void leaky_relu_bwd_data(std::size_t count, float slope, const float* x, const float* dy, float* dx,
                         cudaStream_t stream);
void elu_fwd(std::size_t count, float alpha, const float* x, float* y, cudaStream_t stream);
void elu_bwd_data(std::size_t count, float alpha, const float* x, const float* dy, float* dx, cudaStream_t stream);
// Exact GELU, x * Phi(x) with Phi through erfcf (the host computes Phi from the normal tail instead: in the far left
// tail, erfcf of a rounded x / sqrt 2 loses relative accuracy that the host keeps).
void gelu_fwd(std::size_t count, const float* x, float* y, cudaStream_t stream);
void gelu_bwd_data(std::size_t count, const float* x, const float* dy, float* dx, cudaStream_t stream);
// GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
void gelu_tanh_fwd(std::size_t count, const float* x, float* y, cudaStream_t stream);
void gelu_tanh_bwd_data(std::size_t count, const float* x, const float* dy, float* dx, cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
