// SPDX-License-Identifier: Apache-2.0
// CUDA ReLU and the per-channel bias that dense and convolution share: launchers that enqueue on a stream and
// return (no StarPU here, as in codelets/cpu/). Same contracts as the CPU kernels (codelets/cpu/kernels.hpp,
// codelets/cpu/elementwise.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace dtnn::kernels::cuda {

void relu_fwd(std::size_t count, const float* x, float* y, cudaStream_t stream);
void relu_bwd_data(std::size_t count, const float* y, const float* dy, float* dx, cudaStream_t stream);
// dx = other + (y > 0 ? dy : 0), as kernels::cpu::relu_bwd_data_add.
void relu_bwd_data_add(std::size_t count, const float* y, const float* dy, const float* other, float* dx,
                       cudaStream_t stream);

// y[i, c, p] += b[c] over an [n, channels, plane] tensor (b nullable: nothing added), then ReLU when relu != 0
// ("x < 0 ? 0 : x", which lets a NaN through, as kernels::cpu::relu_fwd does).
void bias_add_fwd(int n, int channels, std::size_t plane, const float* b, int relu, float* y, cudaStream_t stream);
// db[c] = sum over n and the plane of dy, accumulated in double in a fixed order (one thread block per channel,
// fixed tree): bitwise reproducible. Overwrites db.
void bias_bwd_weights(int n, int channels, std::size_t plane, const float* dy, float* db, cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
