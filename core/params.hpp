// SPDX-License-Identifier: Apache-2.0
// Per-call parameters of the optimizer updates, the BatchNorm statistics and dropout, shared by the CPU and
// CUDA kernels, the codelets that carry them and the layers and optimizers that fill them in.
#pragma once

#include <cstdint>

namespace dtnn {

// SGD with momentum (PyTorch's formulation): g' = g + weight_decay * w; v = momentum * v + g';
// w -= lr * (nesterov ? g' + momentum * v : v).
struct SgdParams {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  int nesterov = 0;
};

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

// The statistics step of a BatchNorm in training: how the batch statistics become running statistics.
struct BatchNormUpdate {
  double count = 1.0;     // values per channel in the batch: n * plane
  double eps = 1e-5;
  double momentum = 0.1;  // running = (1 - momentum) * running + momentum * batch (PyTorch's convention)
};

// Dropout of one step: an element's keep decision is a pure function of (seed, step, row, element)
// (kernels::cpu::dropout_params and dropout_draw).
struct DropoutParams {
  std::uint64_t seed = 0;
  std::int64_t step = 0;
  std::uint64_t threshold = 0;  // an element is kept when its 32-bit draw is >= threshold (= rate * 2^32)
  float scale = 1.0f;           // 1 / (1 - rate)
};

// Cross-entropy of token logits against int32 target ids (PyTorch's CrossEntropyLoss with class indices): a row
// whose target is ignore_index adds nothing and gets a zero gradient; the others are scored against
// (1 - label_smoothing) on their target plus label_smoothing / classes on every class.
struct TokenXentParams {
  std::int32_t ignore_index = -100;
  float label_smoothing = 0.0f;
};

}  // namespace dtnn
