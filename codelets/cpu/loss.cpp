// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cmath>
#include <cstddef>

#include <string>

#include "codelets/cpu/kernels.hpp"
#include "core/errors.hpp"

namespace dtnn::kernels::cpu {
namespace {

// Top-1 and top-5 hits of one row, and the argmax of its logits.
struct Hits {
  double top1;
  double top5;
};

Hits hits(const float* z, const float* t, std::size_t cols) {
  std::size_t arg_z = 0;
  std::size_t arg_t = 0;
  for (std::size_t j = 1; j < cols; ++j) {
    if (z[j] > z[arg_z]) arg_z = j;
    if (t[j] > t[arg_t]) arg_t = j;
  }
  int above = 0;
  for (std::size_t j = 0; j < cols; ++j) above += z[j] > z[arg_t] ? 1 : 0;
  return {arg_z == arg_t ? 1.0 : 0.0, above < 5 ? 1.0 : 0.0};
}

}  // namespace

void softmax_xent_fwd_bwd(int n, int classes, const float* logits, const float* targets, float grad_scale,
                          float* dlogits, float* stats) {
  // Double accumulators: the loss sums over the whole batch and the normaliser over every class.
  double loss = 0.0;
  double correct = 0.0;
  double top5 = 0.0;
  double squared = 0.0;
  double absolute = 0.0;
  const auto cols = static_cast<std::size_t>(classes > 0 ? classes : 0);
  for (int i = 0; i < n && cols > 0; ++i) {
    const float* z = logits + static_cast<std::size_t>(i) * cols;
    const float* t = targets + static_cast<std::size_t>(i) * cols;
    float* dz = dlogits + static_cast<std::size_t>(i) * cols;

    const Hits h = hits(z, t, cols);
    correct += h.top1;
    top5 += h.top5;
    std::size_t arg_z = 0;
    for (std::size_t j = 1; j < cols; ++j) {
      if (z[j] > z[arg_z]) arg_z = j;
    }

    // Shifting by the maximum keeps every exponent <= 0, so nothing overflows even for logits of 1e4. The
    // exponentials are parked in dz, each written only after its logit is read, so dlogits may alias logits.
    const float shift = z[arg_z];
    double denom = 0.0;
    double target_sum = 0.0;
    double target_dot = 0.0;  // sum t * (z - shift)
    for (std::size_t j = 0; j < cols; ++j) {
      const float shifted = z[j] - shift;
      target_sum += static_cast<double>(t[j]);
      target_dot += static_cast<double>(t[j]) * static_cast<double>(shifted);
      const float e = std::exp(shifted);
      denom += static_cast<double>(e);
      dz[j] = e;
    }
    // -sum t * log_softmax with log_softmax = (z - shift) - log(denom): never takes the log of a probability,
    // which would be -inf for classes whose exponential underflows.
    const double log_denom = std::log(denom);
    loss += target_sum * log_denom - target_dot;

    const double inv_denom = 1.0 / denom;
    double se = 0.0, ae = 0.0;
    for (std::size_t j = 0; j < cols; ++j) {
      const double p = static_cast<double>(dz[j]) * inv_denom;
      const double diff = p - static_cast<double>(t[j]);
      se += diff * diff;
      ae += std::abs(diff);
      dz[j] = static_cast<float>(diff * static_cast<double>(grad_scale));
    }
    squared += se / static_cast<double>(cols);
    absolute += ae / static_cast<double>(cols);
  }
  stats[kLossSum] = static_cast<float>(loss);
  stats[kCorrect] = static_cast<float>(correct);
  stats[kTop5Correct] = static_cast<float>(top5);
  stats[kSquaredError] = static_cast<float>(squared);
  stats[kAbsoluteError] = static_cast<float>(absolute);
}

void sigmoid_bce_fwd_bwd(int n, int classes, const float* logits, const float* targets, float grad_scale,
                         float* dlogits, float* stats) {
  double loss = 0.0, correct = 0.0, top5 = 0.0, squared = 0.0, absolute = 0.0;
  const auto cols = static_cast<std::size_t>(classes > 0 ? classes : 0);
  const double scale = static_cast<double>(grad_scale) / static_cast<double>(cols > 0 ? cols : 1);
  for (int i = 0; i < n && cols > 0; ++i) {
    const float* z = logits + static_cast<std::size_t>(i) * cols;
    const float* t = targets + static_cast<std::size_t>(i) * cols;
    float* dz = dlogits + static_cast<std::size_t>(i) * cols;
    const Hits h = hits(z, t, cols);
    correct += h.top1;
    top5 += h.top5;
    double row = 0.0, se = 0.0, ae = 0.0;
    for (std::size_t j = 0; j < cols; ++j) {
      const double x = z[j];
      const double y = t[j];
      // -[y log s(x) + (1 - y) log(1 - s(x))] = max(x, 0) - x y + log(1 + exp(-|x|)): no overflow either way.
      row += std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::abs(x)));
      const double p = x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
      const double diff = p - y;
      se += diff * diff;
      ae += std::abs(diff);
      dz[j] = static_cast<float>(diff * scale);
    }
    loss += row / static_cast<double>(cols);
    squared += se / static_cast<double>(cols);
    absolute += ae / static_cast<double>(cols);
  }
  stats[kLossSum] = static_cast<float>(loss);
  stats[kCorrect] = static_cast<float>(correct);
  stats[kTop5Correct] = static_cast<float>(top5);
  stats[kSquaredError] = static_cast<float>(squared);
  stats[kAbsoluteError] = static_cast<float>(absolute);
}

void token_xent_fwd_bwd(int n, int classes, const float* logits, const std::int32_t* targets,
                        const TokenXentParams& p, float grad_scale, float* dlogits, float* stats) {
  double loss = 0.0, correct = 0.0, top5 = 0.0, squared = 0.0, absolute = 0.0, counted = 0.0;
  const auto cols = static_cast<std::size_t>(classes > 0 ? classes : 0);
  const double smoothing = p.label_smoothing;
  const double spread = cols > 0 ? smoothing / static_cast<double>(cols) : 0.0;
  for (int i = 0; i < n && cols > 0; ++i) {
    const float* z = logits + static_cast<std::size_t>(i) * cols;
    float* dz = dlogits + static_cast<std::size_t>(i) * cols;
    const std::int32_t target = targets[i];
    if (target == p.ignore_index) {
      std::fill(dz, dz + cols, 0.0f);
      continue;
    }
    if (target < 0 || static_cast<std::size_t>(target) >= cols) {
      throw DataError("token cross-entropy: target " + std::to_string(target) + " in row " + std::to_string(i) +
                      " of the tile, expected 0 <= target < " + std::to_string(cols) +
                      " or ignore_index=" + std::to_string(p.ignore_index));
    }
    const auto y = static_cast<std::size_t>(target);
    std::size_t arg_z = 0;
    int above = 0;
    for (std::size_t j = 0; j < cols; ++j) {
      if (z[j] > z[arg_z]) arg_z = j;
      above += z[j] > z[y] ? 1 : 0;
    }
    correct += arg_z == y ? 1.0 : 0.0;
    top5 += above < 5 ? 1.0 : 0.0;
    counted += 1.0;

    // As softmax_xent_fwd_bwd: exponents <= 0 after the shift, the loss from log(denom) and never from the log of
    // a probability. With t = spread + (1 - smoothing) [j == y], sum t = 1 and
    // -sum t log p = log(denom) - (1 - smoothing) (z_y - shift) - spread * sum (z_j - shift).
    const float shift = z[arg_z];
    const float target_shifted = z[y] - shift;
    double denom = 0.0;
    double shifted_sum = 0.0;
    for (std::size_t j = 0; j < cols; ++j) {
      const float shifted = z[j] - shift;
      shifted_sum += static_cast<double>(shifted);
      const float e = std::exp(shifted);
      denom += static_cast<double>(e);
      dz[j] = e;
    }
    loss += std::log(denom) - (1.0 - smoothing) * static_cast<double>(target_shifted) - spread * shifted_sum;

    const double inv_denom = 1.0 / denom;
    double se = 0.0, ae = 0.0;
    for (std::size_t j = 0; j < cols; ++j) {
      const double t = spread + (j == y ? 1.0 - smoothing : 0.0);
      const double diff = static_cast<double>(dz[j]) * inv_denom - t;
      se += diff * diff;
      ae += std::abs(diff);
      dz[j] = static_cast<float>(diff * static_cast<double>(grad_scale));
    }
    squared += se / static_cast<double>(cols);
    absolute += ae / static_cast<double>(cols);
  }
  stats[kLossSum] = static_cast<float>(loss);
  stats[kCorrect] = static_cast<float>(correct);
  stats[kTop5Correct] = static_cast<float>(top5);
  stats[kSquaredError] = static_cast<float>(squared);
  stats[kAbsoluteError] = static_cast<float>(absolute);
  stats[kCounted] = static_cast<float>(counted);
}

}  // namespace dtnn::kernels::cpu
