// SPDX-License-Identifier: Apache-2.0
#include <cstddef>
#include <vector>

#include "codelets/cpu/kernels.hpp"

namespace dtnn::kernels::cpu {
namespace {

// Eight independent lanes break the add-latency chain of one long sum (and let the compiler vectorise) while
// keeping the order fixed, hence the result bitwise reproducible. Double lanes keep large planes accurate.
double sum_plane(const float* p, std::size_t len) {
  constexpr std::size_t kLanes = 8;
  double lane[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= len; i += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) {
      lane[l] += static_cast<double>(p[i + l]);
    }
  }
  double total = 0.0;
  for (; i < len; ++i) {
    total += static_cast<double>(p[i]);
  }
  for (std::size_t l = 0; l < kLanes; ++l) {
    total += lane[l];
  }
  return total;
}

}  // namespace

void bias_add_fwd(int n, int channels, std::size_t plane, const float* b, float* y) {
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < channels; ++c) {
      float* p = y + (static_cast<std::size_t>(i) * static_cast<std::size_t>(channels) + static_cast<std::size_t>(c)) *
                         plane;
      const float bc = b[c];
      for (std::size_t j = 0; j < plane; ++j) {
        p[j] += bc;
      }
    }
  }
}

void bias_bwd_weights(int n, int channels, std::size_t plane, const float* dy, float* db) {
  if (channels <= 0) {
    return;
  }
  thread_local std::vector<double> acc;
  acc.assign(static_cast<std::size_t>(channels), 0.0);
  // Samples outermost so dy is streamed once in memory order.
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < channels; ++c) {
      const float* p =
          dy + (static_cast<std::size_t>(i) * static_cast<std::size_t>(channels) + static_cast<std::size_t>(c)) * plane;
      acc[static_cast<std::size_t>(c)] += sum_plane(p, plane);
    }
  }
  for (int c = 0; c < channels; ++c) {
    db[c] = static_cast<float>(acc[static_cast<std::size_t>(c)]);
  }
}

void relu_fwd(std::size_t count, const float* x, float* y) {
  // "x < 0 ? 0 : x" rather than "x > 0 ? x : 0" so that a NaN propagates instead of hiding a divergence.
  for (std::size_t i = 0; i < count; ++i) {
    y[i] = x[i] < 0.0f ? 0.0f : x[i];
  }
}

void relu_bwd_data(std::size_t count, const float* y, const float* dy, float* dx) {
  for (std::size_t i = 0; i < count; ++i) {
    // dy is loaded whatever y holds: a load under the condition would stop the loop from vectorising.
    const float g = dy[i];
    dx[i] = y[i] > 0.0f ? g : 0.0f;
  }
}

void relu_bwd_data_add(std::size_t count, const float* y, const float* dy, const float* other, float* dx) {
  for (std::size_t i = 0; i < count; ++i) {
    const float g = dy[i];
    dx[i] = other[i] + (y[i] > 0.0f ? g : 0.0f);
  }
}

}  // namespace dtnn::kernels::cpu
