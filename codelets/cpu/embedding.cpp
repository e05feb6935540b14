// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "codelets/cpu/nn_kernels.hpp"
#include "core/errors.hpp"

namespace dtnn::kernels::cpu {

void embedding_fwd(int rows, int dim, int num, const std::int32_t* ids, const float* w, float* y) {
  const auto d = static_cast<std::size_t>(dim);
  for (int i = 0; i < rows; ++i) {
    const std::int32_t id = ids[i];
    if (id < 0 || id >= num) {
      throw DataError("embedding: token id " + std::to_string(id) + " in row " + std::to_string(i) +
                      " of the tile, expected 0 <= id < num_embeddings=" + std::to_string(num));
    }
    std::memcpy(y + static_cast<std::size_t>(i) * d, w + static_cast<std::size_t>(id) * d, d * sizeof(float));
  }
}

void embedding_bwd_weights(int rows, int dim, int num, int padding_idx, const std::int32_t* ids, const float* dy,
                           int accumulate, float* dw) {
  const auto d = static_cast<std::size_t>(dim);
  if (accumulate == 0) std::fill(dw, dw + static_cast<std::size_t>(num) * d, 0.0f);
  for (int i = 0; i < rows; ++i) {
    const std::int32_t id = ids[i];
    // The forward pass refused ids outside the table; a row with one has no gradient to give.
    if (id == padding_idx || id < 0 || id >= num) continue;
    float* row = dw + static_cast<std::size_t>(id) * d;
    const float* g = dy + static_cast<std::size_t>(i) * d;
    for (std::size_t j = 0; j < d; ++j) row[j] += g[j];
  }
}

}  // namespace dtnn::kernels::cpu
