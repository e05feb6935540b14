// SPDX-License-Identifier: Apache-2.0
// Sums over one plane in double, shared by the pooling and normalisation kernels (internal to the kernels).
// Eight independent lanes break the add-latency chain and let the compiler vectorise; the order of additions
// is fixed by the length alone, so results are bitwise reproducible.
#pragma once

#include <cstddef>

namespace dtnn::kernels::cpu::detail {

template <class Term>
double sum_plane_of(std::size_t len, Term&& term) {
  constexpr std::size_t kLanes = 8;
  double lane[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= len; i += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) {
      lane[l] += term(i + l);
    }
  }
  double total = 0.0;
  for (; i < len; ++i) {
    total += term(i);
  }
  for (std::size_t l = 0; l < kLanes; ++l) {
    total += lane[l];
  }
  return total;
}

inline double sum_plane(const float* p, std::size_t len) {
  return sum_plane_of(len, [p](std::size_t i) { return static_cast<double>(p[i]); });
}

}  // namespace dtnn::kernels::cpu::detail
