// SPDX-License-Identifier: Apache-2.0
// CUDA LayerNorm over the last axis: launchers that enqueue on a stream and return (no StarPU here). Same names and
// contracts as the CPU kernels (codelets/cpu/nn_kernels.hpp, codelets/cpu/layer_norm.cpp): the statistics in double,
// stats[2 i] = mean and stats[2 i + 1] = rstd of row i, outputs overwritten.
//
// Forward and backward-data give a row to a warp, whose sums in double run in a fixed tree rather than in the CPU's
// order: results equal the CPU's to a rounding of those sums (almost always the same floats), and repeat bit for
// bit. Backward-weights gives a column to a thread, which adds the rows in row order onto what the tiles before left,
// with the CPU's fp32 operations: the CPU's bits, whatever the tile count.
#pragma once

#include <cuda_runtime_api.h>

namespace dtnn::kernels::cuda {

// x, y [rows, width]; w, b [width] (both null: no affine transform); stats [rows, 2].
void layer_norm_fwd(int rows, int width, float eps, const float* x, const float* w, const float* b, float* y,
                    float* stats, cudaStream_t stream);
// w: null without the affine transform.
void layer_norm_bwd_data(int rows, int width, const float* x, const float* stats, const float* w, const float* dy,
                         float* dx, cudaStream_t stream);
// dw[j] += dy * xhat, db[j] += dy over the rows in order, onto zeros when accumulate == 0.
void layer_norm_bwd_weights(int rows, int width, const float* x, const float* stats, const float* dy, int accumulate,
                            float* dw, float* db, cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
