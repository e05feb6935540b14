// SPDX-License-Identifier: Apache-2.0
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "codelets/cpu/nn_kernels.hpp"

namespace dtnn::kernels::cpu {
namespace {

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ull;

// splitmix64's output function: a bijection of 64-bit words with full avalanche.
inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline std::uint64_t splitmix64(std::uint64_t x) { return mix64(x + kGolden); }

// One splitmix64 stream per (seed, step, row); element e is the stream's (e + 1)-th output.
inline std::uint64_t row_key(std::uint64_t seed, std::int64_t step, std::int64_t row) {
  return splitmix64(splitmix64(splitmix64(seed) ^ static_cast<std::uint64_t>(step)) ^ static_cast<std::uint64_t>(row));
}

}  // namespace

DropoutParams dropout_params(std::uint64_t seed, std::int64_t step, double rate) {
  DropoutParams p;
  p.seed = seed;
  p.step = step;
  p.threshold = static_cast<std::uint64_t>(std::llround(rate * 4294967296.0));
  p.scale = static_cast<float>(1.0 / (1.0 - rate));
  return p;
}

std::uint32_t dropout_draw(std::uint64_t seed, std::int64_t step, std::int64_t row, std::uint64_t e) {
  const std::uint64_t h = mix64(row_key(seed, step, row) + (e / 2 + 1) * kGolden);
  return static_cast<std::uint32_t>(e % 2 == 0 ? h >> 32 : h);
}

namespace {

// The keep decision selects the scale through a bit mask: a branch would be mispredicted on every other element.
inline void apply(std::uint32_t draw, std::uint64_t threshold, std::uint32_t scale_bits, float x, float& mask,
                  float& y) {
  const std::uint32_t keep = 0u - static_cast<std::uint32_t>(draw >= threshold);
  const float m = std::bit_cast<float>(scale_bits & keep);
  mask = m;
  y = x * m;
}

}  // namespace

void dropout_fwd(const DropoutParams& p, std::int64_t first_row, int rows, std::size_t row_elements, const float* x,
                 float* mask, float* y) {
  const auto scale_bits = std::bit_cast<std::uint32_t>(p.scale);
  for (int i = 0; i < rows; ++i) {
    const std::uint64_t key = row_key(p.seed, p.step, first_row + i);
    const std::size_t base = static_cast<std::size_t>(i) * row_elements;
    const float* xr = x + base;
    float* mr = mask + base;
    float* yr = y + base;
    // Both halves of each 64-bit output are used (elements 2j and 2j + 1): half the hashing of one per element.
    std::size_t e = 0;
    for (; e + 1 < row_elements; e += 2) {
      const std::uint64_t h = mix64(key + (static_cast<std::uint64_t>(e / 2) + 1) * kGolden);
      apply(static_cast<std::uint32_t>(h >> 32), p.threshold, scale_bits, xr[e], mr[e], yr[e]);
      apply(static_cast<std::uint32_t>(h), p.threshold, scale_bits, xr[e + 1], mr[e + 1], yr[e + 1]);
    }
    if (e < row_elements) {
      const std::uint64_t h = mix64(key + (static_cast<std::uint64_t>(e / 2) + 1) * kGolden);
      apply(static_cast<std::uint32_t>(h >> 32), p.threshold, scale_bits, xr[e], mr[e], yr[e]);
    }
  }
}

void dropout_bwd_data(std::size_t count, const float* mask, const float* dy, float* dx) {
  for (std::size_t i = 0; i < count; ++i) {
    dx[i] = dy[i] * mask[i];
  }
}

}  // namespace dtnn::kernels::cpu
