// SPDX-License-Identifier: Apache-2.0
#include "layers/random.hpp"

#include <cmath>
#include <numbers>

namespace dtnn {

std::uint64_t Rng::below(std::uint64_t n) {
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
  std::uint64_t v = engine_();
  while (v >= limit) {
    v = engine_();
  }
  return v % n;
}

float Rng::normal() {
  // 53-bit uniforms; 1 - u keeps the logarithm's argument in (0, 1].
  const double u1 = 1.0 - static_cast<double>(engine_() >> 11) * 0x1.0p-53;
  const double u2 = static_cast<double>(engine_() >> 11) * 0x1.0p-53;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

}  // namespace dtnn
