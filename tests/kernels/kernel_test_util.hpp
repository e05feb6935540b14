// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the kernel tests: seeded inputs and tolerant comparisons against double references.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "codelets/cpu/kernels.hpp"

namespace dtnn::kernels::cpu::test {

inline std::vector<float> random_vector(std::size_t count, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (auto& e : v) {
    e = dist(gen);
  }
  return v;
}

// Outputs start as NaN so that a kernel which reads instead of overwriting them is caught.
inline std::vector<float> nan_vector(std::size_t count) {
  return std::vector<float>(count, std::numeric_limits<float>::quiet_NaN());
}

// Every |got - ref| must be within rtol * max(1, largest |ref| of the tensor). Scaling by the tensor's magnitude
// rather than each element's keeps cancellation in single elements from failing correct fp32 sums.
inline ::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<double>& ref,
                                            double rtol) {
  if (got.size() != ref.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << ref.size();
  }
  double scale = 1.0;
  for (double r : ref) {
    scale = std::max(scale, std::abs(r));
  }
  const double tol = rtol * scale;
  std::size_t bad = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - ref[i]);
    if (!(err <= tol)) {
      if (bad == 0) {
        first << "first at [" << i << "]: got " << got[i] << ", want " << ref[i] << " (tolerance " << tol << ")";
      }
      ++bad;
    }
  }
  if (bad != 0) {
    return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements differ; " << first.str();
  }
  return ::testing::AssertionSuccess();
}

// Test-name builder; an ostringstream sidesteps GCC 12's false -Wrestrict on "literal" + std::string at -O3.
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

inline ::testing::AssertionResult bitwise_equal(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i])) {
      return ::testing::AssertionFailure() << "first difference at [" << i << "]: " << got[i] << " vs " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// A convolution geometry from all of its fields, in Conv2dShape's order.
inline Conv2dShape conv_shape(int n, int c, int h, int w, int k, int r, int s, int stride_h, int stride_w, int pad_top,
                              int pad_bottom, int pad_left, int pad_right, int dil_h, int dil_w, int groups) {
  Conv2dShape sh;
  sh.n = n;
  sh.c = c;
  sh.h = h;
  sh.w = w;
  sh.k = k;
  sh.r = r;
  sh.s = s;
  sh.stride_h = stride_h;
  sh.stride_w = stride_w;
  sh.pad_top = pad_top;
  sh.pad_bottom = pad_bottom;
  sh.pad_left = pad_left;
  sh.pad_right = pad_right;
  sh.dil_h = dil_h;
  sh.dil_w = dil_w;
  sh.groups = groups;
  return sh;
}

}  // namespace dtnn::kernels::cpu::test
