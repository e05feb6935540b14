// SPDX-License-Identifier: Apache-2.0
#include <cstring>

#include "codelets/cpu/kernels.hpp"

namespace dtnn::kernels::cpu {

void concat_fwd(int n, int nparts, const float* const* parts, const std::int64_t* part_elems, float* y) {
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < nparts; ++p) {
      const std::size_t len = static_cast<std::size_t>(part_elems[p]);
      std::memcpy(y, parts[p] + i * len, len * sizeof(float));
      y += len;
    }
  }
}

void concat_bwd_data(int n, int nparts, const float* dy, const std::int64_t* part_elems, float* const* parts) {
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < nparts; ++p) {
      const std::size_t len = static_cast<std::size_t>(part_elems[p]);
      std::memcpy(parts[p] + i * len, dy, len * sizeof(float));
      dy += len;
    }
  }
}

}  // namespace dtnn::kernels::cpu
