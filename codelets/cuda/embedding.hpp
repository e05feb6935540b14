// SPDX-License-Identifier: Apache-2.0
// CUDA embedding kernels: launchers that enqueue on a stream and return (no StarPU here). Same names and contracts as
// the CPU kernels (codelets/cpu/nn_kernels.hpp, codelets/cpu/embedding.cpp), with one exception: an id outside the
// table cannot throw from the device, and a body does not wait for its kernels, so the lookup gives that row NaN
// (and its gradient adds nothing, as on the CPU), which the training step's finiteness check then reports. The
// table's gradient adds the rows in batch order, each element by one thread, with the CPU's fp32 additions: the
// CPU's bits, whatever the tile count.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dtnn::kernels::cuda {

// y[i] = w[ids[i]] for the `rows` ids (NaN for an id outside [0, num)).
void embedding_fwd(int rows, int dim, int num, const std::int32_t* ids, const float* w, float* y, cudaStream_t stream);
// dw[ids[i]] += dy[i] for i in order, onto zeros (the whole table) when accumulate == 0; ids equal to padding_idx
// (-1: none) or outside the table add nothing.
void embedding_bwd_weights(int rows, int dim, int num, int padding_idx, const std::int32_t* ids, const float* dy,
                           int accumulate, float* dw, cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
