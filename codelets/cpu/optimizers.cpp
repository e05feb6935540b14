// SPDX-License-Identifier: Apache-2.0
// Each variant is its own loop, chosen outside it, so that no loop carries a branch that blocks vectorisation.
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "codelets/cpu/optim_kernels.hpp"

namespace dtnn::kernels::cpu {
namespace {

template <int kCentered, int kMomentum>
void rmsprop_loop(std::size_t count, const RmspropParams& p, float* __restrict w, const float* __restrict g,
                  float* __restrict sq, float* __restrict buf, float* __restrict ga) {
  const float lr = p.lr;
  const float alpha = p.alpha;
  const float one_minus_alpha = 1.0f - p.alpha;
  const float eps = p.eps;
  const float wd = p.weight_decay;
  const float mu = p.momentum;
  for (std::size_t i = 0; i < count; ++i) {
    const float grad = g[i] + wd * w[i];
    const float s = alpha * sq[i] + one_minus_alpha * grad * grad;
    sq[i] = s;
    float denom;
    if constexpr (kCentered != 0) {
      const float a = alpha * ga[i] + one_minus_alpha * grad;
      ga[i] = a;
      denom = std::sqrt(std::max(s - a * a, 0.0f)) + eps;
    } else {
      denom = std::sqrt(s) + eps;
    }
    if constexpr (kMomentum != 0) {
      const float b = mu * buf[i] + grad / denom;
      buf[i] = b;
      w[i] -= lr * b;
    } else {
      w[i] -= lr * grad / denom;
    }
  }
}

}  // namespace

void rmsprop_update(std::size_t count, const RmspropParams& p, float* w, const float* g, float* square_avg,
                    float* momentum_buf, float* grad_avg) {
  const int momentum = p.momentum != 0.0f ? 1 : 0;
  const int centered = p.centered != 0 ? 1 : 0;
  switch (centered * 2 + momentum) {
    case 0:
      rmsprop_loop<0, 0>(count, p, w, g, square_avg, nullptr, nullptr);
      break;
    case 1:
      rmsprop_loop<0, 1>(count, p, w, g, square_avg, momentum_buf, nullptr);
      break;
    case 2:
      rmsprop_loop<1, 0>(count, p, w, g, square_avg, nullptr, grad_avg);
      break;
    default:
      rmsprop_loop<1, 1>(count, p, w, g, square_avg, momentum_buf, grad_avg);
      break;
  }
}

void adam_update(std::size_t count, const AdamParams& p, float* __restrict w, const float* __restrict g,
                 float* __restrict exp_avg, float* __restrict exp_avg_sq) {
  const float beta1 = p.beta1;
  const float one_minus_beta1 = 1.0f - p.beta1;
  const float beta2 = p.beta2;
  const float one_minus_beta2 = 1.0f - p.beta2;
  const float step_size = p.step_size;
  const float inv_bc2 = p.inv_sqrt_bias_correction2;
  const float eps = p.eps;
  const float wd = p.weight_decay;
  const float decay = p.decay_factor;
  for (std::size_t i = 0; i < count; ++i) {
    const float grad = g[i] + wd * w[i];
    const float m = beta1 * exp_avg[i] + one_minus_beta1 * grad;
    const float v = beta2 * exp_avg_sq[i] + one_minus_beta2 * grad * grad;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    w[i] = w[i] * decay - step_size * m / (std::sqrt(v) * inv_bc2 + eps);
  }
}

void nadam_update(std::size_t count, const NadamParams& p, float* __restrict w, const float* __restrict g,
                  float* __restrict exp_avg, float* __restrict exp_avg_sq) {
  const float beta1 = p.beta1;
  const float one_minus_beta1 = 1.0f - p.beta1;
  const float beta2 = p.beta2;
  const float one_minus_beta2 = 1.0f - p.beta2;
  const float grad_coef = p.grad_coef;
  const float momentum_coef = p.momentum_coef;
  const float inv_bc2 = p.inv_sqrt_bias_correction2;
  const float eps = p.eps;
  const float wd = p.weight_decay;
  for (std::size_t i = 0; i < count; ++i) {
    const float grad = g[i] + wd * w[i];
    const float m = beta1 * exp_avg[i] + one_minus_beta1 * grad;
    const float v = beta2 * exp_avg_sq[i] + one_minus_beta2 * grad * grad;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    w[i] -= (grad_coef * grad + momentum_coef * m) / (std::sqrt(v) * inv_bc2 + eps);
  }
}

void sgd_update(std::size_t count, const SgdParams& p, float* w, const float* g, float* v) {
  const float lr = p.lr;
  const float mu = p.momentum;
  const float wd = p.weight_decay;
  // PyTorch keeps no velocity without momentum, so callers may pass v = null then; the momentum term is
  // meaningless without a velocity buffer, and a null v with momentum != 0 is a caller error.
  if (v == nullptr) {
    for (std::size_t i = 0; i < count; ++i) {
      const float grad = g[i] + wd * w[i];
      w[i] -= lr * grad;
    }
    return;
  }
  if (p.nesterov != 0) {
    for (std::size_t i = 0; i < count; ++i) {
      const float grad = g[i] + wd * w[i];
      const float vel = mu * v[i] + grad;
      v[i] = vel;
      w[i] -= lr * (grad + mu * vel);
    }
  } else {
    for (std::size_t i = 0; i < count; ++i) {
      const float grad = g[i] + wd * w[i];
      const float vel = mu * v[i] + grad;
      v[i] = vel;
      w[i] -= lr * vel;
    }
  }
}

double sum_of_squares(std::size_t count, const float* g) {
  constexpr std::size_t kLanes = 8;
  double lane[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (std::size_t k = 0; k < kLanes; ++k) {
      const double v = g[i + k];
      lane[k] += v * v;
    }
  }
  for (std::size_t k = 0; i < count; ++i, ++k) {
    const double v = g[i];
    lane[k] += v * v;
  }
  double sum = 0.0;
  for (double l : lane) sum += l;
  return sum;
}

float clip_coefficient(double sum_of_squares, float max_norm) {
  const double coefficient = static_cast<double>(max_norm) / (std::sqrt(sum_of_squares) + 1e-6);
  return coefficient < 1.0 ? static_cast<float>(coefficient) : 1.0f;
}

void scale_in_place(std::size_t count, float factor, float* g) {
  for (std::size_t i = 0; i < count; ++i) g[i] *= factor;
}

}  // namespace dtnn::kernels::cpu
