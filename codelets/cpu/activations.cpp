// SPDX-License-Identifier: Apache-2.0
#include <cmath>
#include <cstddef>

#include "codelets/cpu/nn_kernels.hpp"

namespace dtnn::kernels::cpu {
void sigmoid_fwd(std::size_t count, const float* x, float* y) {
  for (std::size_t i = 0; i < count; ++i) {
    const float v = x[i];
    // exp of a non-positive argument only: exp(-v) would overflow to inf for v < -88 (giving 0 correctly, but
    // through an inf) and e / (1 + e) keeps the relative accuracy of small outputs.
    if (v >= 0.0f) {
      y[i] = 1.0f / (1.0f + std::exp(-v));
    } else {
      const float e = std::exp(v);
      y[i] = e / (1.0f + e);
    }
  }
}

void sigmoid_bwd_data(std::size_t count, const float* y, const float* dy, float* dx) {
  for (std::size_t i = 0; i < count; ++i) {
    dx[i] = dy[i] * y[i] * (1.0f - y[i]);
  }
}

void tanh_fwd(std::size_t count, const float* x, float* y) {
  for (std::size_t i = 0; i < count; ++i) {
    y[i] = std::tanh(x[i]);
  }
}

void tanh_bwd_data(std::size_t count, const float* y, const float* dy, float* dx) {
  for (std::size_t i = 0; i < count; ++i) {
    dx[i] = dy[i] * (1.0f - y[i] * y[i]);
  }
}

void leaky_relu_fwd(std::size_t count, float slope, const float* x, float* y) {
  for (std::size_t i = 0; i < count; ++i) {
    const float v = x[i];
    y[i] = v > 0.0f ? v : v * slope;
  }
}

void leaky_relu_bwd_data(std::size_t count, float slope, const float* x, const float* dy, float* dx) {
  for (std::size_t i = 0; i < count; ++i) {
    const float g = dy[i];
    dx[i] = x[i] > 0.0f ? g : g * slope;
  }
}

void elu_fwd(std::size_t count, float alpha, const float* x, float* y) {
  for (std::size_t i = 0; i < count; ++i) {
    const float v = x[i];
    // expm1 keeps the accuracy of alpha * (exp(x) - 1) for small |x|, where exp(x) - 1 would cancel.
    y[i] = v > 0.0f ? v : alpha * std::expm1(v);
  }
}

void elu_bwd_data(std::size_t count, float alpha, const float* x, const float* dy, float* dx) {
  for (std::size_t i = 0; i < count; ++i) {
    const float v = x[i];
    const float g = dy[i];
    // From x rather than from y + alpha, which cancels for very negative x.
    dx[i] = v > 0.0f ? g : g * alpha * std::exp(v);
  }
}

// gelu_fwd, gelu_bwd_data, gelu_tanh_fwd and gelu_tanh_bwd_data are vector loops: codelets/cpu/vector_math.cpp.

}  // namespace dtnn::kernels::cpu
