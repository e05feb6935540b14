// SPDX-License-Identifier: Apache-2.0
// CUDA optimizer updates, in place on one parameter's fp32 device buffers: the same names, parameters and
// formulas as the CPU kernels (codelets/cpu/optimizers.cpp, declared in codelets/cpu/optim_kernels.hpp). Each
// multiply, add, divide and square root is a separately rounded IEEE fp32 operation in the CPU's evaluation order
// (no fused multiply-add), so on a CPU build that cannot fuse either (x86-64 without -mfma, the default) the results
// are bitwise identical. The launchers enqueue on the stream and return.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/params.hpp"

namespace dtnn::kernels::cuda {

// v may be null (no momentum buffer), as on the CPU.
void sgd_update(std::size_t count, const SgdParams& p, float* w, const float* g, float* v,
                cudaStream_t stream);

// momentum_buf is read only when p.momentum != 0, grad_avg only when p.centered; either may be null otherwise.
void rmsprop_update(std::size_t count, const RmspropParams& p, float* w, const float* g, float* square_avg,
                    float* momentum_buf, float* grad_avg, cudaStream_t stream);

void adam_update(std::size_t count, const AdamParams& p, float* w, const float* g, float* exp_avg,
                 float* exp_avg_sq, cudaStream_t stream);

void nadam_update(std::size_t count, const NadamParams& p, float* w, const float* g, float* exp_avg,
                  float* exp_avg_sq, cudaStream_t stream);

// Gradient clipping by the global norm (PyTorch's clip_grad_norm_): kernels::cpu::sum_of_squares, clip_coefficient
// and scale_in_place, with the accumulator (one double) in device memory, read on the device (a body never waits for
// its kernels). The squares are summed in double in a fixed tree (a fixed grid of threads, each adding its strided
// share in order, then the blocks' partials in one block), not in the CPU's eight lanes: the CPU's sum to a rounding
// of a double sum, the same bits on every run. The clip is the CPU's arithmetic: the same factor and products for a
// given accumulator.

// Device scratch that sum_of_squares needs (the blocks' partial sums).
[[nodiscard]] std::size_t sum_of_squares_scratch_bytes();
// *acc = (first != 0 ? 0 : *acc) + the sum of g[i]^2 in double.
void sum_of_squares(std::size_t count, const float* g, int first, double* acc, void* scratch, cudaStream_t stream);
// g *= max_norm / (sqrt(*acc) + 1e-6) when that factor is below 1 (never for a non-finite norm).
void clip_grad(std::size_t count, float max_norm, const double* acc, float* g, cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
