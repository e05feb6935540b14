// SPDX-License-Identifier: Apache-2.0
// CUDA ReLU kernels: launchers that enqueue on a stream and return (no StarPU here, as in codelets/cpu/).
// Same contracts as the CPU kernels (codelets/cpu/kernels.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace dtnn::kernels::cuda {

void relu_fwd(std::size_t count, const float* x, float* y, cudaStream_t stream);
void relu_bwd_data(std::size_t count, const float* y, const float* dy, float* dx, cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
