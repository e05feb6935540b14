// SPDX-License-Identifier: Apache-2.0
#include <cmath>
#include <cstddef>

#include "codelets/cpu/kernels.hpp"

namespace dtnn::kernels::cpu {

void softmax_xent_fwd_bwd(int n, int classes, const float* logits, const float* targets, float grad_scale,
                          float* dlogits, float* stats) {
  // Double accumulators: the loss sums over the whole batch and the normaliser over every class.
  double loss = 0.0;
  double correct = 0.0;
  const auto cols = static_cast<std::size_t>(classes > 0 ? classes : 0);
  for (int i = 0; i < n && cols > 0; ++i) {
    const float* z = logits + static_cast<std::size_t>(i) * cols;
    const float* t = targets + static_cast<std::size_t>(i) * cols;
    float* dz = dlogits + static_cast<std::size_t>(i) * cols;

    std::size_t arg_z = 0;
    std::size_t arg_t = 0;
    for (std::size_t j = 1; j < cols; ++j) {
      if (z[j] > z[arg_z]) {
        arg_z = j;
      }
      if (t[j] > t[arg_t]) {
        arg_t = j;
      }
    }
    if (arg_z == arg_t) {
      correct += 1.0;
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
    for (std::size_t j = 0; j < cols; ++j) {
      const double p = static_cast<double>(dz[j]) * inv_denom;
      dz[j] = static_cast<float>((p - static_cast<double>(t[j])) * static_cast<double>(grad_scale));
    }
  }
  stats[0] = static_cast<float>(loss);
  stats[1] = static_cast<float>(correct);
}

}  // namespace dtnn::kernels::cpu
