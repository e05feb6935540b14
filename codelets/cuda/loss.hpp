// SPDX-License-Identifier: Apache-2.0
// CUDA losses fused with their output activation: launchers that enqueue on a stream and return (no StarPU here).
// Same names and contracts as the CPU kernels (codelets/cpu/kernels.hpp, codelets/cpu/loss.cpp): outputs
// overwritten, sums in double, the same NaN behaviour and argmax ties. Reductions over a row run in one thread block
// with a fixed tree, never with atomics: the results are bitwise reproducible.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/params.hpp"

namespace dtnn::kernels::cuda {

// Device scratch that the loss launchers need for n rows (per-row metrics before their sum in row order).
[[nodiscard]] std::size_t loss_scratch_bytes(int n);
// logits, targets, dlogits: [n, classes]; stats: kLossStats values (overwritten). dlogits may alias
// logits, as on the CPU. scratch: loss_scratch_bytes(n) bytes of device memory.
void softmax_xent_fwd_bwd(int n, int classes, const float* logits, const float* targets, float grad_scale,
                          float* dlogits, float* stats, void* scratch, cudaStream_t stream);
void sigmoid_bce_fwd_bwd(int n, int classes, const float* logits, const float* targets, float grad_scale,
                         float* dlogits, float* stats, void* scratch, cudaStream_t stream);

// Token cross-entropy (kernels::cpu::token_xent_fwd_bwd): logits, dlogits [n, classes], targets int32 [n]; stats:
// kTokenLossStats values; scratch: token_loss_scratch_bytes(n). A target outside [0, classes) that is not
// ignore_index cannot throw from the device: its row counts with a NaN loss and NaN gradients instead, which the
// training step's finiteness check reports.
[[nodiscard]] std::size_t token_loss_scratch_bytes(int n);
void token_xent_fwd_bwd(int n, int classes, const float* logits, const std::int32_t* targets,
                        const TokenXentParams& p, float grad_scale, float* dlogits, float* stats, void* scratch,
                        cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
