// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstddef>

#include "codelets/cpu/nn_kernels.hpp"

namespace dtnn::kernels::cpu {

void positional_add_fwd(int n, int seq, int dim, const float* x, const float* table, float* y) {
  const std::size_t plane = static_cast<std::size_t>(seq) * static_cast<std::size_t>(dim);
  for (int i = 0; i < n; ++i) {
    const std::size_t o = static_cast<std::size_t>(i) * plane;
    for (std::size_t k = 0; k < plane; ++k) y[o + k] = x[o + k] + table[k];
  }
}

void positional_bwd_weights(int n, int seq, int dim, int max_len, const float* dy, int accumulate, float* dw) {
  const std::size_t plane = static_cast<std::size_t>(seq) * static_cast<std::size_t>(dim);
  if (accumulate == 0) std::fill(dw, dw + static_cast<std::size_t>(max_len) * static_cast<std::size_t>(dim), 0.0f);
  // Sample order, and tiles one after another: the sums do not depend on the workers or on the tile count.
  for (int i = 0; i < n; ++i) {
    const float* g = dy + static_cast<std::size_t>(i) * plane;
    for (std::size_t k = 0; k < plane; ++k) dw[k] += g[k];
  }
}

}  // namespace dtnn::kernels::cpu
