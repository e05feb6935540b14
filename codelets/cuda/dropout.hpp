// SPDX-License-Identifier: Apache-2.0
// CUDA dropout kernels: launchers that enqueue on a stream and return (no StarPU here, as in codelets/cpu/).
// The masks are those of kernels::cpu::dropout_fwd bit for bit: the same splitmix64 keyed by (seed, step, row),
// element e deciding by one 32-bit half of the stream's output number e / 2 + 1 (high half for even e).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/params.hpp"

namespace dtnn::kernels::cuda {

// Rows [first_row, first_row + rows) of a batch: mask = kept ? scale : 0, y = x * mask.
void dropout_fwd(const DropoutParams& p, std::int64_t first_row, int rows, std::size_t row_elements, const float* x,
                 float* mask, float* y, cudaStream_t stream);
// dx = dy * mask
void dropout_bwd_data(std::size_t count, const float* mask, const float* dy, float* dx, cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
