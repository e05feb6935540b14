// SPDX-License-Identifier: Apache-2.0
// CUDA softmax over the channels: launchers that enqueue on a stream and return (no StarPU here). Same names and
// contracts as the CPU kernels (codelets/cpu/nn_kernels.hpp, codelets/cpu/softmax.cpp): outputs overwritten, sums
// in double, the same NaN behaviour. Reductions over a channel column run in one thread (the CPU's order) or in one
// thread block with a fixed tree, never with atomics: the results are bitwise reproducible.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace dtnn::kernels::cuda {

// x, y: [n, c, plane]
void softmax_fwd(int n, int c, std::size_t plane, const float* x, float* y, cudaStream_t stream);
// dx = y * (dy - sum over channels of dy * y)
void softmax_bwd_data(int n, int c, std::size_t plane, const float* y, const float* dy, float* dx,
                      cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
