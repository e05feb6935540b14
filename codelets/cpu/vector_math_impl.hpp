// SPDX-License-Identifier: Apache-2.0
// The loops behind codelets/cpu/vector_math.hpp, written once and compiled three times: vector_math.cpp (any x86-64),
// vector_math_avx2.cpp (-mavx2 -mfma) and vector_math_avx512.cpp (-mavx512f -mfma). Each element's arithmetic is
// branch-free straight-line code, so GCC turns the loops into the instruction set's widest vectors; the lanes are
// independent, so an element's bits do not depend on the vector width or on where a call splits an array (the
// FMA-capable files fuse the products the generic one rounds apart: their bits differ from it by rounding). Internal
// linkage: each file keeps its own copy, compiled for its instruction set.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace dtnn::kernels::cpu {
namespace {

// c ? a : b through the bits. GCC 12 turns `c ? a : b` of floats, std::min and std::max included, into a branch
// that it cannot vectorise under -ftrapping-math (the default) unless the instruction set has masks (AVX-512): the
// AVX2 and x86-64 loops stayed scalar. The masks here are plain integer logic, which it vectorises everywhere.
inline float select_bits(bool c, float a, float b) {
  const std::uint32_t mask = c ? 0xffffffffu : 0u;
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(a) & mask) | (std::bit_cast<std::uint32_t>(b) & ~mask));
}

// std::min(x, hi) and std::max(x, lo) through select_bits: NaN stays NaN.
inline float min_bits(float x, float hi) { return select_bits(hi < x, hi, x); }
inline float max_bits(float x, float lo) { return select_bits(x < lo, lo, x); }

// exp(x) within ~2 ulp for x in [-87.3, 88.37]: 2^n exp(r), n = round(x / ln 2), |r| <= ln(2) / 2 with ln 2 split in
// two parts (Cody and Waite) so that x - n ln 2 loses nothing, exp(r) by a degree-7 polynomial (1 + r + r^2 p(r),
// the coefficients of Cephes' expf), 2^n built in the exponent bits. Arguments are clamped to [-87.33, 88.75]: below,
// ~1.2e-38 (the smallest normal float's order) instead of a denormal or 0; above 88.37 (n = 128, the exponent's
// all-ones pattern) inf, a little before libm's overflow at 88.72; NaN stays NaN.
inline float exp_approx(float x) {
  x = min_bits(max_bits(x, -87.33f), 88.75f);
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to the nearest integer
  const float n = (x * kLog2e + kRound) - kRound;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const auto scale = std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
  return p * scale;
}

constexpr float kSqrt2OverPiV = 0.79788456080286535588f;
constexpr float kGeluCubicV = 0.044715f;

// GELU's tanh form through 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)): y = x / (1 + exp(-2u)), which keeps the left
// tail's relative accuracy where 1 + tanh(u) would cancel (and exp(-2u) = inf sends it to -0).
inline void gelu_tanh_fwd_loop(std::size_t count, const float* x, float* y) {
  for (std::size_t i = 0; i < count; ++i) {
    const float v = x[i];
    const float u = kSqrt2OverPiV * (v + kGeluCubicV * v * v * v);
    y[i] = v / (1.0f + exp_approx(-2.0f * u));
  }
}

// With s = 1 / (1 + e), e = exp(-2u): 0.5 (1 + t) = s and 1 - t^2 = 4 s (1 - s), 1 - s = e s, so
// d/dx = s + 2 x s (1 - s) sqrt(2 / pi) (1 + 3 * 0.044715 x^2).
inline void gelu_tanh_bwd_data_loop(std::size_t count, const float* x, const float* dy, float* dx) {
  for (std::size_t i = 0; i < count; ++i) {
    const float v = x[i];
    const float u = kSqrt2OverPiV * (v + kGeluCubicV * v * v * v);
    const float e = exp_approx(-2.0f * u);
    const float s = 1.0f / (1.0f + e);
    const float inner = kSqrt2OverPiV * (1.0f + 3.0f * kGeluCubicV * v * v);
    dx[i] = dy[i] * (s + 2.0f * v * s * (e * s) * inner);
  }
}

inline void exp_shifted_loop(std::size_t count, const float* x, float shift, float* y) {
  for (std::size_t i = 0; i < count; ++i) y[i] = exp_approx(x[i] - shift);
}

}  // namespace
}  // namespace dtnn::kernels::cpu
