// SPDX-License-Identifier: Apache-2.0
// CUDA kernels that merge batch tiles: the fixed-order sum of several tensors (residual Add, tile sums) and channel
// concatenation with its inverse. Launchers that enqueue on a stream and return (no StarPU here); same names and
// contracts as the CPU kernels (codelets/cpu/kernels.hpp, codelets/cpu/merge.cpp). None does arithmetic but the
// sum, whose additions come in the CPU's order: the results are bitwise those of the CPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dtnn::kernels::cuda {

// Most sources of one sum and most parts of one concatenation (the pointers travel as kernel arguments).
inline constexpr int kMaxMergeSources = 16;

// dst[i] = src[0][i] + src[1][i] + ... + src[nsrc-1][i] in that order (0 for no source). nsrc <= kMaxMergeSources.
void sum_fixed_order(std::size_t count, int nsrc, const float* const* src, float* dst, cudaStream_t stream);
// dst = ((dst + src[0]) + src[1]) + ...
void accumulate_fixed_order(std::size_t count, int nsrc, const float* const* src, float* dst, cudaStream_t stream);

// sum_fixed_order, then ReLU ("v < 0 ? 0 : v") on each total (a residual Add with its ReLU fused).
void sum_fixed_order_relu(std::size_t count, int nsrc, const float* const* src, float* dst, cudaStream_t stream);

// y[i] = concat over parts p of parts[p][i] for each of n samples; part p has part_elems[p] values per sample.
// nparts <= kMaxMergeSources.
void concat_fwd(int n, int nparts, const float* const* parts, const std::int64_t* part_elems, float* y,
                cudaStream_t stream);
// parts[p][i] = the slice of dy[i] that part p contributed.
void concat_bwd_data(int n, int nparts, const float* dy, const std::int64_t* part_elems, float* const* parts,
                     cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
