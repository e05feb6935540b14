// SPDX-License-Identifier: Apache-2.0
// CUDA softmax over the channels and the losses fused with their output activation: launchers that enqueue on a
// stream and return (no StarPU here). Same names and contracts as the CPU kernels (codelets/cpu/nn_kernels.hpp,
// codelets/cpu/kernels.hpp): outputs overwritten, sums in double, the same NaN behaviour and argmax ties.
// Reductions over a row or a channel column run in one thread (the CPU's order) or in one thread block with a
// fixed tree, never with atomics: the results are bitwise reproducible.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace dtnn::kernels::cuda {

// x, y: [n, c, plane]
void softmax_fwd(int n, int c, std::size_t plane, const float* x, float* y, cudaStream_t stream);
// dx = y * (dy - sum over channels of dy * y)
void softmax_bwd_data(int n, int c, std::size_t plane, const float* y, const float* dy, float* dx,
                      cudaStream_t stream);

// Device scratch that the loss launchers need for n rows (per-row metrics before their sum in row order).
[[nodiscard]] std::size_t loss_scratch_bytes(int n);
// logits, targets, dlogits: [n, classes]; stats: kLossStats values (overwritten). dlogits may alias
// logits, as on the CPU. scratch: loss_scratch_bytes(n) bytes of device memory.
void softmax_xent_fwd_bwd(int n, int classes, const float* logits, const float* targets, float grad_scale,
                          float* dlogits, float* stats, void* scratch, cudaStream_t stream);
void sigmoid_bce_fwd_bwd(int n, int classes, const float* logits, const float* targets, float grad_scale,
                         float* dlogits, float* stats, void* scratch, cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
