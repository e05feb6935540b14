// SPDX-License-Identifier: Apache-2.0
// Adaptive optimizer updates (PyTorch's formulas), in place on one parameter's fp32 buffer, no StarPU.
// Every scalar that depends on the step (bias corrections, NAdam's momentum schedule) arrives precomputed in
// the params struct: the caller works them out in double once per update, so the loops stay element-wise and
// vectorise, and the kernels carry no step counter of their own.
#pragma once

#include <cstddef>

namespace dtnn::kernels::cpu {

// RMSprop: g' = g + weight_decay * w; sq = alpha * sq + (1 - alpha) * g'^2;
// centered: ga = alpha * ga + (1 - alpha) * g', denom = sqrt(max(sq - ga^2, 0)) + eps, else denom = sqrt(sq) + eps;
// momentum > 0: buf = momentum * buf + g' / denom, w -= lr * buf; otherwise w -= lr * g' / denom.
// The max(., 0) guards the centered variance against rounding below zero once sq and ga^2 nearly cancel.
struct RmspropParams {
  float lr = 0.01f;
  float alpha = 0.99f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  float momentum = 0.0f;
  int centered = 0;
};
// momentum_buf is read only when momentum != 0, grad_avg only when centered; either may be null otherwise.
void rmsprop_update(std::size_t count, const RmspropParams& p, float* w, const float* g, float* square_avg,
                    float* momentum_buf, float* grad_avg);

// Adam and AdamW: g' = g + weight_decay * w (Adam's L2 term; 0 for AdamW); w *= decay_factor (AdamW's decoupled
// decay 1 - lr * wd; 1 for Adam); m = beta1 * m + (1 - beta1) * g'; v = beta2 * v + (1 - beta2) * g'^2;
// w -= step_size * m / (sqrt(v) * inv_sqrt_bias_correction2 + eps), which is lr * mhat / (sqrt(vhat) + eps):
// eps sits outside the square root.
struct AdamParams {
  float step_size = 0.001f;                // lr / (1 - beta1^t)
  float inv_sqrt_bias_correction2 = 1.0f;  // 1 / sqrt(1 - beta2^t)
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  float decay_factor = 1.0f;
};
void adam_update(std::size_t count, const AdamParams& p, float* w, const float* g, float* exp_avg,
                 float* exp_avg_sq);

// NAdam (Dozat's Nesterov Adam with PyTorch's momentum schedule mu_t = beta1 * (1 - 0.5 * 0.96^(t * psi))):
// g' = g + weight_decay * w; m and v as in Adam; denom = sqrt(v) * inv_sqrt_bias_correction2 + eps;
// w -= (grad_coef * g' + momentum_coef * m) / denom.
struct NadamParams {
  float grad_coef = 0.0f;      // lr * (1 - mu_t) / (1 - mu_1 * ... * mu_t)
  float momentum_coef = 0.0f;  // lr * mu_{t+1} / (1 - mu_1 * ... * mu_{t+1})
  float inv_sqrt_bias_correction2 = 1.0f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};
void nadam_update(std::size_t count, const NadamParams& p, float* w, const float* g, float* exp_avg,
                  float* exp_avg_sq);

}  // namespace dtnn::kernels::cpu
