// SPDX-License-Identifier: Apache-2.0
// Optimizer updates (PyTorch's formulas), in place on one parameter's fp32 buffer, no StarPU.
// Every scalar that depends on the step (bias corrections, NAdam's momentum schedule) arrives precomputed in
// the params struct: the caller works them out in double once per update, so the loops stay element-wise and
// vectorise, and the kernels carry no step counter of their own.
#pragma once

#include <cstddef>

#include "core/params.hpp"

namespace dtnn::kernels::cpu {

// SGD with momentum (core/params.hpp). v may be null when momentum is 0 (PyTorch keeps no velocity then).
void sgd_update(std::size_t count, const SgdParams& p, float* w, const float* g, float* v);

// momentum_buf is read only when momentum != 0, grad_avg only when centered; either may be null otherwise.
void rmsprop_update(std::size_t count, const RmspropParams& p, float* w, const float* g, float* square_avg,
                    float* momentum_buf, float* grad_avg);

void adam_update(std::size_t count, const AdamParams& p, float* w, const float* g, float* exp_avg,
                 float* exp_avg_sq);

void nadam_update(std::size_t count, const NadamParams& p, float* w, const float* g, float* exp_avg,
                  float* exp_avg_sq);

// Gradient clipping by the global norm (PyTorch's clip_grad_norm_). The squares of g[0..count) summed in double,
// in eight interleaved partial sums added at the end: a fixed order, so the same bits on every run and machine.
double sum_of_squares(std::size_t count, const float* g);
// max_norm / (sqrt(sum_of_squares) + 1e-6), PyTorch's clip coefficient, or 1 when that is not below 1 (also for a
// non-finite norm, which clipping cannot repair: the step's finiteness check reports it).
float clip_coefficient(double sum_of_squares, float max_norm);
// g *= factor.
void scale_in_place(std::size_t count, float factor, float* g);

}  // namespace dtnn::kernels::cpu
