// SPDX-License-Identifier: Apache-2.0
// CUDA positional-table kernels: launchers that enqueue on a stream and return (no StarPU here). Same names and
// contracts as the CPU kernels (codelets/cpu/nn_kernels.hpp, codelets/cpu/positional.cpp). The table's gradient adds
// the samples in batch order, each element by one thread, with the CPU's fp32 additions: the CPU's bits, whatever
// the tile count.
#pragma once

#include <cuda_runtime_api.h>

namespace dtnn::kernels::cuda {

// y[i, s, :] = x[i, s, :] + table[s, :].
void positional_add_fwd(int n, int seq, int dim, const float* x, const float* table, float* y, cudaStream_t stream);
// dw[s, :] += dy[i, s, :] for the samples in order, onto zeros (the whole [max_len, dim] table) when accumulate == 0.
void positional_bwd_weights(int n, int seq, int dim, int max_len, const float* dy, int accumulate, float* dw,
                            cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
