// SPDX-License-Identifier: Apache-2.0
// CUDA scaled dot-product attention: launchers that enqueue on a stream and return (no StarPU here). Same contracts
// as kernels::cpu::attention_fwd and attention_bwd_data (codelets/cpu/nn_kernels.hpp): the products are cuBLAS
// strided-batched GEMMs over the heads of one sample, reading each head's column slice of the packed q, k, v in place
// through its leading dimension (no copies); the softmax, causal mask, key padding and dropout are kernels of our own,
// one warp per row of probabilities with a fixed reduction tree, and the dropout masks are the CPU's bit for bit.
//
// Tile count: every call (GEMM or kernel) covers one sample with the same shape whatever the tile holding it, so a
// sample's results do not depend on how the batch is split, provided cuBLAS's choice of kernel does not either. cuBLAS
// picks it from the shape, the leading dimensions and the operands' alignment; a sample's operands start a multiple of
// seq x 3E, heads x seq x seq or seq x E floats after its tile's, which keeps their 16-byte alignment for any split
// when seq and E are even (every zoo model's). The GEMMs' summation order is cuBLAS's, not BLIS's: the results
// equal the CPU's to fp32 rounding, not bit for bit. Two runs of a call give the same bits (cuBLAS is deterministic
// on one stream; no atomics here).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/params.hpp"
#include "core/shapes.hpp"

namespace dtnn::kernels::cuda {

// The device scratch that attention_fwd (kForward) or attention_bwd_data (kBackward) needs, with dropout (dropout != 0)
// or without: one sample's probabilities after dropout, and backward's score gradients (0 bytes: none; scratch may
// then be null).
enum class AttentionPass { kForward, kBackward };
[[nodiscard]] std::size_t attention_scratch_bytes(const AttentionShape& a, AttentionPass pass, int dropout);

// qkv [n, seq, 3E]; probs [n, heads, seq, seq] (before dropout, kept for backward); ctx [n, seq, E]. drop: null for
// none. key_padding: int32 [n, seq], nonzero for a padded key; null for none. scratch: attention_scratch_bytes.
void attention_fwd(const AttentionShape& a, int n, std::int64_t first_row, const DropoutParams* drop,
                   const float* qkv, float* probs, float* ctx, const std::int32_t* key_padding, void* scratch,
                   cublasHandle_t cublas, cudaStream_t stream);
// dctx [n, seq, E] -> dqkv [n, seq, 3E] (overwritten).
void attention_bwd_data(const AttentionShape& a, int n, std::int64_t first_row, const DropoutParams* drop,
                        const float* qkv, const float* probs, const float* dctx, float* dqkv, void* scratch,
                        cublasHandle_t cublas, cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
