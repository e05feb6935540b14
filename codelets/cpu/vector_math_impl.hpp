// SPDX-License-Identifier: Apache-2.0
// The loops behind codelets/cpu/vector_math.hpp, written once and compiled three times: vector_math.cpp (any x86-64),
// vector_math_avx2.cpp (-mavx2 -mfma) and vector_math_avx512.cpp (-mavx512f -mfma). Each element's arithmetic is
// branch-free straight-line code, so GCC turns the loops into the instruction set's widest vectors; the lanes are
// independent, so an element's bits do not depend on the vector width or on where a call splits an array (the
// FMA-capable files fuse the products the generic one rounds apart: their bits differ from it by rounding). Internal
// linkage: each file keeps its own copy, compiled for its instruction set.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

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

// exp(r) for |r| <= ~ln(2) / 2 by a degree-7 polynomial, 1 + r + r^2 p(r) with the coefficients of Cephes' expf.
inline float exp_reduced(float r) {
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * (r * r) + r + 1.0f;
}

constexpr float kLog2eV = 1.44269504088896341f;
constexpr float kRoundV = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to the nearest integer
// ln 2 in two parts (Cody and Waite): n * kLn2HiV is exact for |n| < 2^15 and x - n * kLn2HiV is exact near n ln 2.
constexpr float kLn2HiV = 0.693359375f;
constexpr float kLn2LoV = -2.12194440e-4f;

// exp(x) within ~2 ulp for x in [-87.3, 88.37]: 2^n exp(r), n = round(x / ln 2), |r| <= ln(2) / 2 with ln 2 split in
// two parts so that x - n ln 2 loses nothing, 2^n built in the exponent bits. Arguments are clamped to
// [-87.33, 88.75]: below, ~1.2e-38 (the smallest normal float's order) instead of a denormal or 0; above 88.37
// (n = 128, the exponent's all-ones pattern) inf, a little before libm's overflow at 88.72; NaN stays NaN.
inline float exp_approx(float x) {
  x = min_bits(max_bits(x, -87.33f), 88.75f);
  const float n = (x * kLog2eV + kRoundV) - kRoundV;
  float r = x - n * kLn2HiV;
  r = r - n * kLn2LoV;
  const auto scale = std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
  return exp_reduced(r) * scale;
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

// ---- Exact GELU, x Phi(x) with Phi the standard normal CDF ----
// Phi(-a) for a = |x| as exp(-a^2 / 2) R(a), with R(a) = Phi(-a) exp(a^2 / 2) (Mills' ratio over sqrt(2 pi)) falling
// smoothly from 1/2 to ~1 / (a sqrt(2 pi)), and Phi(x) = 1 - Phi(-x) for x >= 0, which loses nothing (Phi(-a) <= 1/2).
// Computing the tail itself rather than 1 + erf keeps its relative accuracy down to where x Phi(x) underflows, and
// so does computing exp(-a^2 / 2) from a itself: libm's 0.5 erfc(-x / sqrt 2) rounds x / sqrt 2 first, which moves
// erfc by up to ~x^2 ulp (206 ulp of x Phi(x) at x = -13.09).
// Measured against erfc and exp in double over every float of [-13.2, 13.2] (bench/gelu_exact --accuracy), where
// x Phi(x) is a normal float: within 4.34 ulp for x < 0 and 4.59 for x >= 0 on AVX2 and AVX-512, 4.77 and 4.94 on
// plain x86-64 (no FMA), mean 0.14 (libm's loop: 206 and 1.73). The derivative: within 1.5e-7 absolute (1.6e-7 without
// FMA; libm's 1.4e-7) and 29 ulp (33) even next to its zero at x ~ -0.75 (|x + 0.7518| > 0.05), libm's 67 ulp.

// Every a beyond this gives the a = 16.2 values, at which a Phi(-a) ~ 4e-58 and a phi(a) ~ 7e-57 are 0 in float:
// clamping keeps the exponential's 2^n in range and inf out of the arithmetic, so the results reach 0 smoothly and
// stay there.
constexpr float kNormalTailEndV = 16.2f;

// exp(-a^2 / 2) 2^64 for a in [0, kNormalTailEndV], within ~1.6 ulp. a^2 = s^2 + (a - s)(a + s) with s the upper 12
// significant bits of a, so that s^2 and the reduction s^2 / 2 - n ln 2 are exact and only the small (a - s)(a + s)
// (< a^2 / 2048) is rounded: a^2 / 2 ~ 85 rounded to float would be off by up to 2^-18, and exp(-a^2 / 2) by as
// much relatively, 32 to 64 ulp at a = 13. The 2^64 keeps the result normal down to exp(-131), which the caller's
// 2^-64 then turns into the denormals and 0 of the tail with one rounding.
inline float exp_minus_half_square_times_2_64(float a) {
  const float s = std::bit_cast<float>(std::bit_cast<std::uint32_t>(a) & 0xfffff000u);
  const float hi = -0.5f * (s * s);
  const float lo = -0.5f * ((a - s) * (a + s));
  const float n = ((hi + lo) * kLog2eV + kRoundV) - kRoundV;
  float r = hi - n * kLn2HiV;
  r = r - n * kLn2LoV;
  r = r + lo;
  const auto scale = std::bit_cast<float>((static_cast<std::int32_t>(n) + 127 + 64) << 23);
  return exp_reduced(r) * scale;
}

// R(a) = Phi(-a) exp(a^2 / 2) for a in [0, kNormalTailEndV], within ~3.5 ulp: u Q(t) with u = 1 / (a + K),
// t = 2 a u - 1 = (a - K) / (a + K) in [-1, 0.69] and Q a degree-10 polynomial, a relative minimax fit (Remez) of
// error 9.4e-10, 3.4e-9 with its coefficients rounded to float: K is the float near 3 for which the fit's constant
// and linear coefficients fall within 0.01 ulp of a float. t from 2 a u rather than from a - K: u's rounding error
// then moves Q(t) the other way from u, and R by no more than it moves u.
constexpr float kMillsKV = 2.9998884201049805f;
inline float normal_tail_ratio(float a) {
  const float u = 1.0f / (a + kMillsKV);
  const float t = (2.0f * a) * u - 1.0f;
  float p = 5.451720426e-05f;
  p = p * t + 1.313363609e-04f;
  p = p * t + -2.448615851e-04f;
  p = p * t + -1.032417873e-03f;
  p = p * t + 1.025616308e-03f;
  p = p * t + 6.968099158e-03f;
  p = p * t + -1.046647411e-02f;
  p = p * t + -4.724819958e-02f;
  p = p * t + 2.299971133e-01f;
  p = p * t + -5.093175173e-01f;
  p = p * t + 7.290796041e-01f;
  return p * u;
}

constexpr float kInvSqrt2PiV = 0.39894228040143267794f;

constexpr float kInfV = std::numeric_limits<float>::infinity();
constexpr float kNaNV = std::numeric_limits<float>::quiet_NaN();

// y = x Phi(x). For x < 0 the product a R(a) E(a) 2^-64 is formed in that order, so that the result is rounded once
// where it is denormal; it reaches -0 at x = -14.36 and stays there. x = -0 gives -0, NaN stays NaN, and inf and -inf
// give inf and NaN, what x Phi(x) gives in IEEE arithmetic (-inf times 0), as PyTorch's GELU and the CUDA kernel.
inline void gelu_fwd_loop(std::size_t count, const float* x, float* y) {
  for (std::size_t i = 0; i < count; ++i) {
    const float v = x[i];
    const float a = min_bits(std::abs(v), kNormalTailEndV);
    const float e = exp_minus_half_square_times_2_64(a);
    const float r = normal_tail_ratio(a);
    const float q = (r * e) * 0x1p-64f;  // Phi(-a)
    const float left = select_bits(v == -kInfV, kNaNV, -(((a * r) * e) * 0x1p-64f));
    const float right = v * (1.0f - q);
    y[i] = select_bits(v < 0.0f, left, right);
  }
}

// dy/dx = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi). With g = exp(-a^2 / 2) (R(a) - a / sqrt(2 pi)):
// g for x < 0 and 1 - g for x >= 0, without adding two terms of which one is tiny (Phi(x) beside x phi(x) in the left
// tail). It crosses 0 at x ~ -0.75, where R(a) - a / sqrt(2 pi) cancels: there only its absolute error, 1.6e-7 at
// most as elsewhere, means anything. It reaches -0 at x = -14.54; NaN at inf and -inf (inf times 0 in x phi(x)), as
// PyTorch's GELU and the CUDA kernel.
inline void gelu_bwd_data_loop(std::size_t count, const float* x, const float* dy, float* dx) {
  for (std::size_t i = 0; i < count; ++i) {
    const float v = x[i];
    const float a = min_bits(std::abs(v), kNormalTailEndV);
    const float e = exp_minus_half_square_times_2_64(a);
    const float d = normal_tail_ratio(a) - a * kInvSqrt2PiV;
    const float g = (d * e) * 0x1p-64f;
    const float slope = select_bits(v < 0.0f, g, 1.0f - g);
    dx[i] = dy[i] * select_bits(std::abs(v) == kInfV, kNaNV, slope);
  }
}

inline void exp_shifted_loop(std::size_t count, const float* x, float shift, float* y) {
  for (std::size_t i = 0; i < count; ++i) y[i] = exp_approx(x[i] - shift);
}

}  // namespace
}  // namespace dtnn::kernels::cpu
