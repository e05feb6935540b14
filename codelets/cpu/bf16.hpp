// SPDX-License-Identifier: Apache-2.0
// bfloat16 as the bf16 kernels see it: the upper 16 bits of an fp32, rounded to nearest even. Rounding follows
// AVX512-BF16's VCVTNEPS2BF16, so that every machine rounds alike: NaNs stay NaN (quietened), denormal inputs become
// zeros of their sign (the instruction treats them as zero), everything else rounds to nearest, ties to even, the
// largest finite values overflowing to infinity as in any rounding.
//
// Packed operands of the bf16 micro-kernels are pairs: one 32-bit word holds two consecutive elements of the
// reduction, the lower index in the low half (vdpbf16ps's layout).
#pragma once

#include <cstdint>
#include <cstring>

namespace dtnn::kernels::cpu {

inline std::uint32_t float_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

inline float bits_float(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

inline std::uint16_t float_to_bf16(float x) {
  const std::uint32_t u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // quiet NaN, sign and upper payload kept
  }
  if ((u & 0x7f800000u) == 0) {
    return static_cast<std::uint16_t>((u >> 16) & 0x8000u);  // zero and denormals: a zero of the sign
  }
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float bf16_to_float(std::uint16_t h) { return bits_float(static_cast<std::uint32_t>(h) << 16); }

// x rounded to bf16 and back: the value a bf16 kernel computes with.
inline float round_to_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

// A pair word: element 2t of the reduction in the low half, 2t + 1 in the high half.
inline std::uint32_t bf16_pair(float even, float odd) {
  return static_cast<std::uint32_t>(float_to_bf16(even)) | static_cast<std::uint32_t>(float_to_bf16(odd)) << 16;
}
inline float pair_even(std::uint32_t word) { return bits_float(word << 16); }
inline float pair_odd(std::uint32_t word) { return bits_float(word & 0xffff0000u); }

// acc + a * b as one step of vdpbf16ps does it (measured on Zen 5, and Intel's DAZ/FTZ/RNE): the product of two
// bf16 exact, the sum rounded once to fp32 (to nearest, ties to even), a denormal acc read as zero and a denormal
// result flushed to a zero of its sign. In double, the product is exact and the sum correctly rounded once
// converted to float: a product of two 8-bit significands and a 24-bit acc never need the double rounding that
// could land on a float midpoint (the one is below 2^-29 of the other where the sum leaves double's 53 bits).
inline float dpbf16_step(float acc, float a, float b) {
  const auto flush = [](float x) {
    const std::uint32_t u = float_bits(x);
    return (u & 0x7f800000u) == 0 ? bits_float(u & 0x80000000u) : x;
  };
  return flush(static_cast<float>(static_cast<double>(flush(acc)) + static_cast<double>(a) * static_cast<double>(b)));
}

// One lane of vdpbf16ps: (acc + odd product) + even product.
inline float dpbf16(float acc, std::uint32_t a, std::uint32_t b) {
  return dpbf16_step(dpbf16_step(acc, pair_odd(a), pair_odd(b)), pair_even(a), pair_even(b));
}

}  // namespace dtnn::kernels::cpu
