// SPDX-License-Identifier: Apache-2.0
// Seeded random numbers that are the same on every platform: values are derived from the raw 64-bit draws
// of std::mt19937_64 (the standard's distributions are implementation-defined).
#pragma once

#include <cstdint>
#include <random>

namespace dtnn {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}
  // Uniform in [0, 1) with 24 random bits (exact in float).
  float uniform01() { return static_cast<float>(engine_() >> 40) * (1.0f / 16777216.0f); }
  float uniform(float low, float high) { return low + (high - low) * uniform01(); }
  // Uniform integer in [0, n) without modulo bias.
  std::uint64_t below(std::uint64_t n);
  // Standard normal (Box-Muller on two draws).
  float normal();
  std::uint64_t next() { return engine_(); }

 private:
  std::mt19937_64 engine_;
};

}  // namespace dtnn
