// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "codelets/cpu/nn_kernels.hpp"

namespace dtnn::kernels::cpu {
using std::size_t;

// Channels are strided by the plane; the loops run over the plane innermost (contiguous) with one running value
// per position, so an (N, C, H, W) softmax streams memory in order and (N, F) is the plane = 1 case.
void softmax_fwd(int n, int c, std::size_t plane, const float* x, float* y) {
  if (c <= 0 || plane == 0) {
    return;
  }
  thread_local std::vector<float> max;
  thread_local std::vector<double> sum;
  max.resize(plane);
  sum.resize(plane);
  const size_t sample = static_cast<size_t>(c) * plane;
  for (int i = 0; i < n; ++i) {
    const float* xs = x + static_cast<size_t>(i) * sample;
    float* ys = y + static_cast<size_t>(i) * sample;
    std::copy_n(xs, plane, max.begin());
    for (int ch = 1; ch < c; ++ch) {
      const float* xc = xs + static_cast<size_t>(ch) * plane;
      for (size_t p = 0; p < plane; ++p) {
        // "!(v <= max)" also takes a NaN, so a divergence shows in the output instead of being skipped.
        max[p] = !(xc[p] <= max[p]) ? xc[p] : max[p];
      }
    }
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int ch = 0; ch < c; ++ch) {
      const float* xc = xs + static_cast<size_t>(ch) * plane;
      float* yc = ys + static_cast<size_t>(ch) * plane;
      for (size_t p = 0; p < plane; ++p) {
        // Subtracting the maximum keeps exp from overflowing; the largest term is exactly 1.
        yc[p] = std::exp(xc[p] - max[p]);
        sum[p] += static_cast<double>(yc[p]);
      }
    }
    // One division per position, then products: the sum is at least 1 (the maximum's term), so its reciprocal
    // is well conditioned.
    for (size_t p = 0; p < plane; ++p) {
      sum[p] = 1.0 / sum[p];
    }
    for (int ch = 0; ch < c; ++ch) {
      float* yc = ys + static_cast<size_t>(ch) * plane;
      for (size_t p = 0; p < plane; ++p) {
        yc[p] = static_cast<float>(static_cast<double>(yc[p]) * sum[p]);
      }
    }
  }
}

void softmax_bwd_data(int n, int c, std::size_t plane, const float* y, const float* dy, float* dx) {
  if (c <= 0 || plane == 0) {
    return;
  }
  thread_local std::vector<double> dot;
  dot.resize(plane);
  const size_t sample = static_cast<size_t>(c) * plane;
  for (int i = 0; i < n; ++i) {
    const float* ys = y + static_cast<size_t>(i) * sample;
    const float* gs = dy + static_cast<size_t>(i) * sample;
    float* ds = dx + static_cast<size_t>(i) * sample;
    std::fill(dot.begin(), dot.end(), 0.0);
    for (int ch = 0; ch < c; ++ch) {
      const size_t off = static_cast<size_t>(ch) * plane;
      for (size_t p = 0; p < plane; ++p) {
        dot[p] += static_cast<double>(gs[off + p]) * static_cast<double>(ys[off + p]);
      }
    }
    for (int ch = 0; ch < c; ++ch) {
      const size_t off = static_cast<size_t>(ch) * plane;
      for (size_t p = 0; p < plane; ++p) {
        ds[off + p] = static_cast<float>(static_cast<double>(ys[off + p]) *
                                         (static_cast<double>(gs[off + p]) - dot[p]));
      }
    }
  }
}

}  // namespace dtnn::kernels::cpu
