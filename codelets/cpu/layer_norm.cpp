// SPDX-License-Identifier: Apache-2.0
#include <cmath>
#include <cstddef>

#include "codelets/cpu/nn_kernels.hpp"

namespace dtnn::kernels::cpu {

void layer_norm_fwd(int rows, int width, float eps, const float* x, const float* w, const float* b, float* y,
                    float* stats) {
  const auto e = static_cast<std::size_t>(width);
  for (int i = 0; i < rows; ++i) {
    const float* xr = x + static_cast<std::size_t>(i) * e;
    float* yr = y + static_cast<std::size_t>(i) * e;
    // Two passes in double: the variance of values far from zero keeps its digits.
    double sum = 0.0;
    for (std::size_t j = 0; j < e; ++j) sum += xr[j];
    const double mean = sum / static_cast<double>(width);
    double squares = 0.0;
    for (std::size_t j = 0; j < e; ++j) {
      const double d = xr[j] - mean;
      squares += d * d;
    }
    const auto mean_f = static_cast<float>(mean);
    const auto rstd = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(width) + eps));
    for (std::size_t j = 0; j < e; ++j) {
      const float xhat = (xr[j] - mean_f) * rstd;
      yr[j] = w != nullptr ? xhat * w[j] + b[j] : xhat;
    }
    stats[2 * i] = mean_f;
    stats[2 * i + 1] = rstd;
  }
}

void layer_norm_bwd_data(int rows, int width, const float* x, const float* stats, const float* w, const float* dy,
                         float* dx) {
  const auto e = static_cast<std::size_t>(width);
  for (int i = 0; i < rows; ++i) {
    const float* xr = x + static_cast<std::size_t>(i) * e;
    const float* dyr = dy + static_cast<std::size_t>(i) * e;
    float* dxr = dx + static_cast<std::size_t>(i) * e;
    const float mean = stats[2 * i];
    const float rstd = stats[2 * i + 1];
    double sum_g = 0.0;
    double sum_gx = 0.0;
    for (std::size_t j = 0; j < e; ++j) {
      const float g = w != nullptr ? dyr[j] * w[j] : dyr[j];
      const float xhat = (xr[j] - mean) * rstd;
      sum_g += g;
      sum_gx += static_cast<double>(g) * xhat;
    }
    const auto mean_g = static_cast<float>(sum_g / static_cast<double>(width));
    const auto mean_gx = static_cast<float>(sum_gx / static_cast<double>(width));
    for (std::size_t j = 0; j < e; ++j) {
      const float g = w != nullptr ? dyr[j] * w[j] : dyr[j];
      const float xhat = (xr[j] - mean) * rstd;
      dxr[j] = rstd * (g - mean_g - xhat * mean_gx);
    }
  }
}

void layer_norm_bwd_weights(int rows, int width, const float* x, const float* stats, const float* dy, int accumulate,
                            float* dw, float* db) {
  const auto e = static_cast<std::size_t>(width);
  if (accumulate == 0) {
    for (std::size_t j = 0; j < e; ++j) {
      dw[j] = 0.0f;
      db[j] = 0.0f;
    }
  }
  // Row order, and tiles one after another: the sums do not depend on the workers or on the tile count.
  for (int i = 0; i < rows; ++i) {
    const float* xr = x + static_cast<std::size_t>(i) * e;
    const float* dyr = dy + static_cast<std::size_t>(i) * e;
    const float mean = stats[2 * i];
    const float rstd = stats[2 * i + 1];
    for (std::size_t j = 0; j < e; ++j) {
      dw[j] += dyr[j] * ((xr[j] - mean) * rstd);
      db[j] += dyr[j];
    }
  }
}

}  // namespace dtnn::kernels::cpu
