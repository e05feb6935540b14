// SPDX-License-Identifier: Apache-2.0
// Filling tensors with seeded values and comparing results bit for bit, for the tests of layers and models.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <vector>

#include "layers/random.hpp"
#include "runtime/tensor.hpp"

namespace dtnn::test_support {

// Uniform values in [low, high) from seed (layers/random.hpp: the same on every machine).
inline void fill_random(Tensor& t, std::uint64_t seed, float low = -1.0f, float high = 1.0f) {
  Rng rng(seed);
  auto a = t.write();
  for (float& v : a.data()) v = rng.uniform(low, high);
}

// Equal bits (a NaN equals itself, -0 differs from +0), with the first difference named.
inline ::testing::AssertionResult bitwise_equal(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i])) {
      return ::testing::AssertionFailure() << "first difference at [" << i << "]: " << got[i] << " vs " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace dtnn::test_support
