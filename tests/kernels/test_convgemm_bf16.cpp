// SPDX-License-Identifier: Apache-2.0
// convgemm's bf16 passes (codelets/cpu/bf16.hpp, convgemm.hpp): rounding to bf16 as VCVTNEPS2BF16 rounds,
// the packing into pairs (portable and AVX-512F alike), the results against direct convolution in double computed
// from the bf16-rounded inputs (tolerance 1e-6 of the largest reference magnitude: the only error left is fp32
// accumulation; an fp32 kernel that did not round its inputs is ~1e-3 away), and the emulated micro-kernel against
// vdpbf16ps bit for bit (skipped on a CPU without AVX512-BF16: a missing instruction, not a missing tool).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codelets/cpu/bf16.hpp"
#include "codelets/cpu/bf16_arrays.hpp"
#include "codelets/cpu/convgemm.hpp"
#include "codelets/cpu/convgemm_ukernels.hpp"
#include "codelets/cpu/nn_kernels.hpp"
#include "codelets/cpu/onednn_conv.hpp"
#include "conv_reference.hpp"
#include "core/cpu_features.hpp"
#include "core/errors.hpp"
#include "kernel_test_util.hpp"

namespace dtnn::kernels::cpu {
namespace {

using test::all_close;
using test::bitwise_equal;
using test::checked_elements;
using test::conv_shape;
using test::matches_at;
using test::nan_vector;
using test::random_vector;
using test::reference_dw;
using test::reference_dx;
using test::reference_y;
using test::w_size;
using test::x_size;
using test::y_size;

constexpr double kRtol = 1e-6;

// Whether `got` matches reference(i) at a sample of its elements (checked_elements: each a sum of `macs` products).
template <typename Reference>
::testing::AssertionResult matches_reference(const std::vector<float>& got, double macs, std::uint32_t seed,
                                             double rtol, Reference&& reference) {
  const auto idx = checked_elements(got.size(), macs, seed);
  std::vector<double> ref(idx.size());
  for (std::size_t j = 0; j < idx.size(); ++j) {
    ref[j] = reference(idx[j]);
  }
  return matches_at(got, idx, ref, rtol);
}

std::vector<float> rounded(std::vector<float> v) {
  for (float& e : v) {
    e = round_to_bf16(e);
  }
  return v;
}

TEST(Bf16Test, RoundsToNearestEvenFlushesDenormalsAndQuietensNaNs) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even 1; 1 + 3 * 2^-8 goes up to the even 1 + 2^-6.
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(float_to_bf16(-2.5f), 0xc020);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_bf16(-0x1p-130f), 0x8000);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x7f800001u)), 0x7fc0);  // signalling NaN: quietened
  EXPECT_EQ(bf16_pair(1.0f, -2.0f), 0xc0003f80u);
}

std::vector<float> awkward_values(std::size_t count, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::uint32_t> bits;
  std::vector<float> v(count);
  for (auto& e : v) {
    e = std::bit_cast<float>(bits(gen));  // every exponent: denormals, infinities and NaNs included
  }
  v[0] = 1.0f + 0x1p-8f;
  v[1] = -0x1p-130f;
  v[2] = std::numeric_limits<float>::max();
  return v;
}

TEST(Bf16Test, PairsOfARowAreItsConsecutiveElementsRounded) {
  const std::vector<float> row = {1.0f, -2.0f, 1.0f + 0x1p-8f, 0x1p-130f, 3.0f};
  std::vector<std::uint32_t> words(4, 0xdeadbeefu);
  round_to_bf16_pairs(row.data(), static_cast<dim_t>(row.size()), words.data());
  EXPECT_EQ(words[0], 0xc0003f80u);
  EXPECT_EQ(words[1], 0x00003f80u);
  EXPECT_EQ(words[2], 0x00004040u) << "an odd last element pairs with zero";
  EXPECT_EQ(words[3], 0xdeadbeefu) << "written past the row's words";
}

TEST(Bf16Test, RowsArePairedTwoByTwoLaneByLane) {
  // Two rows of width 8 and an odd third: words of row pair 0 are (row 0, row 1) lane by lane; row 2 pairs with 0.
  std::vector<float> rows(24);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    rows[i] = static_cast<float>(i + 1);
  }
  std::vector<std::uint32_t> words(17, 0xdeadbeefu);
  rows_to_bf16_pairs(rows.data(), 8, 3, words.data());
  for (std::size_t f = 0; f < 8; ++f) {
    EXPECT_EQ(words[f], bf16_pair(rows[f], rows[8 + f])) << "lane " << f;
    EXPECT_EQ(words[8 + f], bf16_pair(rows[16 + f], 0.0f)) << "lane " << f;
  }
  EXPECT_EQ(words[16], 0xdeadbeefu) << "written past the pairs";
  if (!cpu_has_avx512()) {
    return;
  }
  for (const int width : {8, 16, 24, 32, 48}) {
    for (const dim_t count : {1, 2, 3, 7, 384, 385}) {
      const auto src = awkward_values(static_cast<std::size_t>(width * count), static_cast<std::uint32_t>(count));
      const auto words_out = static_cast<std::size_t>(width * ((count + 1) / 2));
      std::vector<std::uint32_t> portable(words_out + 1, 0xdeadbeefu), wide(words_out + 1, 0xdeadbeefu);
      rows_to_bf16_pairs(src.data(), width, count, portable.data());
      rows_to_bf16_pairs_avx512(src.data(), width, count, wide.data());
      EXPECT_EQ(portable, wide) << "width " << width << ", rows " << count;
      EXPECT_EQ(wide.back(), 0xdeadbeefu) << "written past the pairs, width " << width << ", rows " << count;
    }
  }
}

TEST(Bf16Test, Avx512RoundingGivesThePortableWords) {
  if (!cpu_has_avx512()) {
    GTEST_SKIP() << "no AVX-512 (or DTNN_MAX_CPU_ISA caps it): the portable rounding is the only one";
  }
  for (const dim_t count : {1, 2, 15, 16, 17, 31, 32, 33, 383, 384, 1000}) {
    const auto src = awkward_values(static_cast<std::size_t>(count), static_cast<std::uint32_t>(count));
    const auto words = static_cast<std::size_t>((count + 1) / 2);
    std::vector<std::uint32_t> portable(words + 1, 0xdeadbeefu), wide(words + 1, 0xdeadbeefu);
    round_to_bf16_pairs(src.data(), count, portable.data());
    round_to_bf16_pairs_avx512(src.data(), count, wide.data());
    EXPECT_EQ(portable, wide) << "count " << count;
    EXPECT_EQ(wide.back(), 0xdeadbeefu) << "written past the row's words, count " << count;
  }
}

// Whole arrays (bf16 activations): float_to_bf16 element by element, the AVX-512F body alike with every tail length,
// nothing written past the end, and the way back exact.
TEST(Bf16Test, ArraysRoundAsFloatToBf16AndWidenExactly) {
  for (const std::size_t count : {1u, 7u, 15u, 16u, 17u, 31u, 33u, 1000u}) {
    const auto src = awkward_values(count, static_cast<std::uint32_t>(count) + 7u);
    std::vector<std::uint16_t> want(count), portable(count + 1, 0xbeefu), wide(count + 1, 0xbeefu);
    for (std::size_t i = 0; i < count; ++i) want[i] = float_to_bf16(src[i]);
    floats_to_bf16(src.data(), count, portable.data());
    EXPECT_EQ(std::vector<std::uint16_t>(portable.begin(), portable.end() - 1), want) << "count " << count;
    EXPECT_EQ(portable.back(), 0xbeefu) << "written past the end, count " << count;
    std::vector<float> back(count + 1, -7.0f);
    bf16_to_floats(want.data(), count, back.data());
    for (std::size_t i = 0; i < count; ++i) {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(back[i]), static_cast<std::uint32_t>(want[i]) << 16) << i;
    }
    EXPECT_EQ(back.back(), -7.0f) << "written past the end, count " << count;
    if (!cpu_has_avx512()) continue;
    floats_to_bf16_avx512(src.data(), count, wide.data());
    EXPECT_EQ(wide, portable) << "AVX-512F against portable, count " << count;
    std::vector<float> wide_back(count + 1, -7.0f);
    bf16_to_floats_avx512(want.data(), count, wide_back.data());
    EXPECT_TRUE(bitwise_equal(wide_back, back)) << "count " << count;
  }
}

// BatchNorm's passes on a bf16 input (a convolution's bf16 output) are the fp32 passes on its widened values, bit
// for bit, and a bf16 dx is the fp32 dx rounded: with and without the fused ReLU's mask, batch and frozen statistics.
TEST(Bf16Test, BatchNormOnBf16InputIsTheFp32PassOnItsValues) {
  // 270 planes of 63 values: odd tails, and more than one block of the bf16 passes' widening (16384 values).
  const int n = 3, c = 90;
  const std::size_t plane = 7 * 9;
  const std::size_t count = static_cast<std::size_t>(n) * c * plane;
  std::vector<std::uint16_t> x16(count);
  const auto raw = random_vector(count, 11);
  floats_to_bf16(raw.data(), count, x16.data());
  std::vector<float> x(count);
  bf16_to_floats(x16.data(), count, x.data());
  const auto dy = random_vector(count, 12);
  const auto relu_y = random_vector(count, 13);  // half of it <= 0
  const auto mean = random_vector(static_cast<std::size_t>(c), 14);
  std::vector<float> invstd(static_cast<std::size_t>(c)), gamma = random_vector(static_cast<std::size_t>(c), 15);
  for (int ch = 0; ch < c; ++ch) invstd[static_cast<std::size_t>(ch)] = 0.5f + 0.1f * static_cast<float>(ch);
  const auto beta = random_vector(static_cast<std::size_t>(c), 16);
  const auto residual = random_vector(count, 17);
  const auto pc = static_cast<std::size_t>(n * c);

  std::vector<float> p32(pc), p16(pc);
  batch_norm_sums(n, c, plane, x.data(), p32.data());
  batch_norm_sums(n, c, plane, x16.data(), p16.data());
  EXPECT_TRUE(bitwise_equal(p16, p32)) << "sums";
  batch_norm_sqdev_sums(n, c, plane, x.data(), mean.data(), p32.data());
  batch_norm_sqdev_sums(n, c, plane, x16.data(), mean.data(), p16.data());
  EXPECT_TRUE(bitwise_equal(p16, p32)) << "squared deviations";

  std::vector<float> y32(count), y16(count);
  batch_norm_fwd_fused(n, c, plane, x.data(), mean.data(), invstd.data(), gamma.data(), beta.data(), residual.data(), 1,
                       y32.data());
  batch_norm_fwd_fused(n, c, plane, x16.data(), mean.data(), invstd.data(), gamma.data(), beta.data(),
                       residual.data(), 1, y16.data());
  EXPECT_TRUE(bitwise_equal(y16, y32)) << "forward";
  const auto var = invstd;  // any positive values
  batch_norm_infer_fwd_fused(n, c, plane, 1e-5, x.data(), mean.data(), var.data(), gamma.data(), beta.data(), nullptr,
                             0, y32.data());
  batch_norm_infer_fwd_fused(n, c, plane, 1e-5, x16.data(), mean.data(), var.data(), gamma.data(), beta.data(),
                             nullptr, 0, y16.data());
  EXPECT_TRUE(bitwise_equal(y16, y32)) << "inference forward";

  for (const float* mask : {static_cast<const float*>(nullptr), relu_y.data()}) {
    std::vector<float> s32(2 * pc), s16(2 * pc);
    batch_norm_bwd_sums_masked(n, c, plane, x.data(), mask, dy.data(), mean.data(), invstd.data(), s32.data());
    batch_norm_bwd_sums_masked(n, c, plane, x16.data(), mask, dy.data(), mean.data(), invstd.data(), s16.data());
    EXPECT_TRUE(bitwise_equal(s16, s32)) << "backward sums, mask " << (mask != nullptr);
    const auto mean_dy = random_vector(static_cast<std::size_t>(c), 18);
    const auto mean_dy_xhat = random_vector(static_cast<std::size_t>(c), 19);
    for (const bool frozen : {false, true}) {
      std::vector<float> dx32(count);
      std::vector<std::uint16_t> dx16(count + 1, 0xbeefu), want(count);
      batch_norm_bwd_data_masked(n, c, plane, x.data(), mask, dy.data(), mean.data(), invstd.data(), gamma.data(),
                                 frozen ? nullptr : mean_dy.data(), frozen ? nullptr : mean_dy_xhat.data(),
                                 dx32.data());
      batch_norm_bwd_data_masked(n, c, plane, x16.data(), mask, dy.data(), mean.data(), invstd.data(), gamma.data(),
                                 frozen ? nullptr : mean_dy.data(), frozen ? nullptr : mean_dy_xhat.data(),
                                 dx16.data());
      for (std::size_t i = 0; i < count; ++i) want[i] = float_to_bf16(dx32[i]);
      EXPECT_EQ(std::vector<std::uint16_t>(dx16.begin(), dx16.end() - 1), want)
          << "data gradient, mask " << (mask != nullptr) << ", frozen " << frozen;
      EXPECT_EQ(dx16.back(), 0xbeefu);
    }
  }
}

// Panels of random pair words whose values span many binades, so that sums cancel, round at every step and
// underflow into the flushed range.
std::vector<std::uint32_t> random_panel(std::size_t words, std::uint32_t seed, int min_exp, int max_exp) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> exponent(min_exp, max_exp);
  std::uniform_int_distribution<std::uint32_t> mantissa(0, 0x7f);
  std::uniform_int_distribution<std::uint32_t> sign(0, 1);
  const auto value = [&] {
    return static_cast<std::uint16_t>(sign(gen) << 15 | static_cast<std::uint32_t>(exponent(gen)) << 7 | mantissa(gen));
  };
  std::vector<std::uint32_t> v(words);
  for (auto& w : v) {
    w = static_cast<std::uint32_t>(value()) | static_cast<std::uint32_t>(value()) << 16;
  }
  return v;
}

TEST(Bf16MicroKernelTest, EmulationIsVdpbf16psBitForBit) {
  if (!cpu_has_avx512_bf16()) {
    GTEST_SKIP() << "this CPU has no AVX512-BF16 (or DTNN_MAX_CPU_ISA caps it): nothing to compare the emulation with";
  }
  struct Range {
    int min_exp, max_exp;
  };
  // Biased exponents: around 1; over half the range; tiny values whose products and sums fall below FLT_MIN.
  for (const Range r : {Range{120, 134}, Range{64, 190}, Range{1, 70}}) {
    for (const dim_t kp : {1, 2, 13, 192}) {
      const auto seed = static_cast<std::uint32_t>(kp);
      const auto a = random_panel(static_cast<std::size_t>(32 * kp), seed, r.min_exp, r.max_exp);
      const auto b = random_panel(static_cast<std::size_t>(8 * kp), seed + 7, r.min_exp, r.max_exp);
      for (const float beta : {0.0f, 1.0f}) {
        const inc_t ld = 37;
        auto native = random_vector(static_cast<std::size_t>(ld * 8), 3);
        auto emulated = native;
        bf16gemm_ukr_avx512bf16_32x8(32, 8, kp, a.data(), b.data(), beta, native.data(), ld);
        bf16gemm_ukr_emulated_32x8(32, 8, kp, a.data(), b.data(), beta, emulated.data(), ld);
        EXPECT_TRUE(bitwise_equal(emulated, native)) << "exponents " << r.min_exp << "-" << r.max_exp << ", kp "
                                                     << kp << ", beta " << beta;
        // Edges: a 21 x 5 tile leaves the rest of C untouched.
        auto native_edge = random_vector(static_cast<std::size_t>(ld * 8), 4);
        auto emulated_edge = native_edge;
        const auto before = native_edge;
        bf16gemm_ukr_avx512bf16_32x8(21, 5, kp, a.data(), b.data(), beta, native_edge.data(), ld);
        bf16gemm_ukr_emulated_32x8(21, 5, kp, a.data(), b.data(), beta, emulated_edge.data(), ld);
        EXPECT_TRUE(bitwise_equal(emulated_edge, native_edge));
        for (std::size_t e = 0; e < before.size(); ++e) {
          const auto row = static_cast<inc_t>(e) % ld;
          const auto col = static_cast<inc_t>(e) / ld;
          if (row >= 21 || col >= 5) {
            ASSERT_EQ(std::bit_cast<std::uint32_t>(native_edge[e]), std::bit_cast<std::uint32_t>(before[e]))
                << "element (" << row << ", " << col << ") outside the 21 x 5 tile was written";
          }
        }
      }
    }
  }
}

TEST(Bf16MicroKernelTest, EmulationAddsOddThenEvenProductsWithDazAndFtz) {
  // (acc + odd) + even in fp32: 1 + 2^-24 (odd) rounds back to 1 before 2^-23 (even) is added; even first, or a
  // single rounding of the three terms, would give 1 + 2^-22.
  EXPECT_EQ(dpbf16(1.0f, bf16_pair(0x1p-23f, 0x1p-24f), bf16_pair(1.0f, 1.0f)), 1.0f + 0x1p-23f);
  // Products of tiny values are exact (2^-128 added to FLT_MIN), results below FLT_MIN are flushed to zero, and a
  // denormal acc is read as zero (as measured on Zen 5's vdpbf16ps).
  EXPECT_EQ(dpbf16(0x1p-126f, bf16_pair(0.0f, 0x1p-64f), bf16_pair(0.0f, 0x1p-64f)), 0x1.4p-126f);
  EXPECT_EQ(dpbf16(0.0f, bf16_pair(0.0f, 0x1p-64f), bf16_pair(0.0f, 0x1p-64f)), 0.0f);
  EXPECT_EQ(dpbf16(0x1p-127f, bf16_pair(0.0f, 0x1p-63f), bf16_pair(0.0f, 0x1p-63f)), 0x1p-126f);
}

struct Bf16Case {
  std::string name;
  Conv2dShape shape;
};

void PrintTo(const Bf16Case& c, std::ostream* os) { *os << c.name; }

class Bf16ConvTest : public ::testing::TestWithParam<Bf16Case> {};

std::vector<Bf16Case> bf16_cases() {
  return {
      //                            n   c   h   w    k  r  s sh sw pt pb pl pr dh dw g
      {"Same3x3", conv_shape(2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1)},
      {"OddPixels", conv_shape(1, 5, 7, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1)},
      {"Stride2Asymmetric", conv_shape(3, 6, 11, 10, 9, 3, 3, 2, 2, 0, 1, 1, 0, 1, 1, 1)},
      {"Dilated5x3", conv_shape(2, 4, 12, 13, 6, 5, 3, 1, 2, 2, 2, 1, 1, 2, 1, 1)},
      {"Identity1x1", conv_shape(2, 40, 9, 9, 24, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1)},
      {"Strided1x1", conv_shape(2, 16, 9, 9, 32, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1)},
      {"Groups", conv_shape(2, 8, 10, 10, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2)},
      {"Depthwise", conv_shape(2, 8, 10, 10, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 8)},
      // Several KC blocks of pixels (the last of odd length), MC blocks of im2col rows and partial panels.
      {"ManyBlocks", conv_shape(3, 70, 15, 15, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1)},
      {"ResNetLayer64", conv_shape(2, 64, 32, 32, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1)},
      {"ResNetLayer256Stride2", conv_shape(2, 128, 16, 16, 256, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1)},
      // Backward-data by the dual forward convolution (same 3x3, 32 to 64 channels in and out, planes of 256+).
      {"DualForward", conv_shape(2, 32, 16, 16, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1)},
      // Odd output channels: backward-data's whole reduction of odd length, its last pair half empty.
      {"OddReduction", conv_shape(2, 6, 9, 9, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1)},
  };
}

TEST_P(Bf16ConvTest, BackwardWeightsIsTheDoubleSumOfBf16RoundedInputs) {
  const Conv2dShape& sh = GetParam().shape;
  const auto x = random_vector(x_size(sh), 21);
  const auto dy = random_vector(y_size(sh), 22);
  const bool depthwise = sh.c == sh.groups && sh.groups > 1;
  // Depthwise convolutions stay in fp32 (convgemm.hpp): their reference uses the inputs as they are.
  const auto xr = depthwise ? x : rounded(x);
  const auto dyr = depthwise ? dy : rounded(dy);
  const double macs = static_cast<double>(sh.n) * sh.out_h() * sh.out_w();
  const auto idx = checked_elements(w_size(sh), macs, 23);
  std::vector<double> ref(idx.size());
  std::vector<double> unrounded(idx.size());
  for (std::size_t j = 0; j < idx.size(); ++j) {
    ref[j] = reference_dw(sh, xr, dyr, idx[j]);
    unrounded[j] = reference_dw(sh, x, dy, idx[j]);
  }
  std::vector<double> ref_db(static_cast<std::size_t>(sh.k), 0.0);
  const std::size_t plane = static_cast<std::size_t>(sh.out_h()) * sh.out_w();
  for (std::size_t yi = 0; yi < dy.size(); ++yi) {
    ref_db[yi / plane % sh.k] += dy[yi];
  }
  auto dw = nan_vector(w_size(sh));
  auto db = nan_vector(static_cast<std::size_t>(sh.k));
  conv2d_bwd_weights_convgemm_bf16(sh, x.data(), dy.data(), dw.data(), db.data(), Bf16Math::kEmulated);
  EXPECT_TRUE(matches_at(dw, idx, ref, depthwise ? 1e-4 : kRtol));
  EXPECT_TRUE(test::all_close(db, ref_db, 1e-4)) << "db: an fp32 sum of dy as it is";
  if (!depthwise) {
    // The test can tell: the fp32 result is further from the rounded inputs' reference than the tolerance.
    EXPECT_FALSE(matches_at(dw, idx, unrounded, kRtol)) << "the inputs were not rounded to bf16";
  }

  if (!cpu_has_avx512_bf16()) {
    EXPECT_THROW(conv2d_bwd_weights_convgemm_bf16(sh, x.data(), dy.data(), dw.data(), nullptr, Bf16Math::kAvx512Bf16),
                 InvalidArgument);
    return;
  }
  auto native = nan_vector(w_size(sh));
  conv2d_bwd_weights_convgemm_bf16(sh, x.data(), dy.data(), native.data(), nullptr, Bf16Math::kAvx512Bf16);
  EXPECT_TRUE(bitwise_equal(native, dw)) << "vdpbf16ps against the emulation";
}

TEST_P(Bf16ConvTest, ForwardIsTheDoubleSumOfBf16RoundedInputs) {
  const Conv2dShape& sh = GetParam().shape;
  const auto x = random_vector(x_size(sh), 31);
  const auto w = random_vector(w_size(sh), 32);
  const auto b = random_vector(static_cast<std::size_t>(sh.k), 33);
  const bool depthwise = sh.c == sh.groups && sh.groups > 1;
  const auto xr = depthwise ? x : rounded(x);
  const auto wr = depthwise ? w : rounded(w);
  const double macs = static_cast<double>(sh.c / sh.groups) * sh.r * sh.s;
  const auto idx = checked_elements(y_size(sh), macs, 34);
  const std::size_t plane = static_cast<std::size_t>(sh.out_h()) * sh.out_w();
  std::vector<double> ref(idx.size()), unrounded(idx.size());
  for (std::size_t j = 0; j < idx.size(); ++j) {
    const double bias = b[idx[j] / plane % static_cast<std::size_t>(sh.k)];
    ref[j] = reference_y(sh, xr, wr, idx[j]) + bias;
    unrounded[j] = reference_y(sh, x, w, idx[j]) + bias;
  }
  auto y = nan_vector(y_size(sh));
  conv2d_fwd_convgemm_bf16(sh, x.data(), w.data(), b.data(), 0, y.data(), Bf16Math::kEmulated);
  EXPECT_TRUE(matches_at(y, idx, ref, depthwise ? 1e-5 : kRtol));
  if (!depthwise) {
    EXPECT_FALSE(matches_at(y, idx, unrounded, kRtol)) << "the inputs were not rounded to bf16";
  }
  // ReLU in the epilogue: the same sums, clamped.
  auto y_relu = nan_vector(y_size(sh));
  conv2d_fwd_convgemm_bf16(sh, x.data(), w.data(), b.data(), 1, y_relu.data(), Bf16Math::kEmulated);
  auto clamped = y;
  for (float& e : clamped) {
    e = e < 0.0f ? 0.0f : e;
  }
  EXPECT_TRUE(bitwise_equal(y_relu, clamped));

  if (!cpu_has_avx512_bf16()) {
    EXPECT_THROW(conv2d_fwd_convgemm_bf16(sh, x.data(), w.data(), nullptr, 0, y.data(), Bf16Math::kAvx512Bf16),
                 InvalidArgument);
    return;
  }
  auto native = nan_vector(y_size(sh));
  conv2d_fwd_convgemm_bf16(sh, x.data(), w.data(), b.data(), 0, native.data(), Bf16Math::kAvx512Bf16);
  EXPECT_TRUE(bitwise_equal(native, y)) << "vdpbf16ps against the emulation";
}

TEST_P(Bf16ConvTest, BackwardDataIsTheDoubleSumOfBf16RoundedInputs) {
  const Conv2dShape& sh = GetParam().shape;
  const auto dy = random_vector(y_size(sh), 41);
  const auto w = random_vector(w_size(sh), 42);
  const bool depthwise = sh.c == sh.groups && sh.groups > 1;
  const auto dyr = depthwise ? dy : rounded(dy);
  const auto wr = depthwise ? w : rounded(w);
  const double macs = static_cast<double>(sh.k / sh.groups) * sh.r * sh.s;
  const auto idx = checked_elements(x_size(sh), macs, 43);
  std::vector<double> ref(idx.size()), unrounded(idx.size());
  for (std::size_t j = 0; j < idx.size(); ++j) {
    ref[j] = reference_dx(sh, dyr, wr, idx[j]);
    unrounded[j] = reference_dx(sh, dy, w, idx[j]);
  }
  auto dx = nan_vector(x_size(sh));
  conv2d_bwd_data_convgemm_bf16(sh, dy.data(), w.data(), dx.data(), Bf16Math::kEmulated);
  EXPECT_TRUE(matches_at(dx, idx, ref, depthwise ? 1e-5 : kRtol));
  if (!depthwise) {
    EXPECT_FALSE(matches_at(dx, idx, unrounded, kRtol)) << "the inputs were not rounded to bf16";
  }
  if (!cpu_has_avx512_bf16()) {
    EXPECT_THROW(conv2d_bwd_data_convgemm_bf16(sh, dy.data(), w.data(), dx.data(), Bf16Math::kAvx512Bf16),
                 InvalidArgument);
    return;
  }
  auto native = nan_vector(x_size(sh));
  conv2d_bwd_data_convgemm_bf16(sh, dy.data(), w.data(), native.data(), Bf16Math::kAvx512Bf16);
  EXPECT_TRUE(bitwise_equal(native, dx)) << "vdpbf16ps against the emulation";
}

// AMX's TDPBF16PS has sums of its own (no emulation: convgemm_ukernels.hpp), so each pass is held against the double
// sums of the rounded inputs only, where the CPU has AMX-BF16; elsewhere asking for it is an error naming it.
TEST_P(Bf16ConvTest, AmxPassesAreTheDoubleSumsOfBf16RoundedInputs) {
  const Conv2dShape& sh = GetParam().shape;
  const auto x = random_vector(x_size(sh), 61);
  const auto w = random_vector(w_size(sh), 62);
  const auto dy = random_vector(y_size(sh), 63);
  auto y = nan_vector(y_size(sh));
  auto dx = nan_vector(x_size(sh));
  auto dw = nan_vector(w_size(sh));
  if (!cpu_has_amx_bf16()) {
    EXPECT_THROW(conv2d_fwd_convgemm_bf16(sh, x.data(), w.data(), nullptr, 0, y.data(), Bf16Math::kAmx),
                 InvalidArgument);
    GTEST_SKIP() << "this CPU has no AMX-BF16 (or DTNN_MAX_CPU_ISA caps it, or Linux did not grant the tile state)";
  }
  const bool depthwise = sh.c == sh.groups && sh.groups > 1;
  const double rtol = depthwise ? 1e-5 : kRtol;
  const auto xr = depthwise ? x : rounded(x);
  const auto wr = depthwise ? w : rounded(w);
  const auto dyr = depthwise ? dy : rounded(dy);
  conv2d_fwd_convgemm_bf16(sh, x.data(), w.data(), nullptr, 0, y.data(), Bf16Math::kAmx);
  conv2d_bwd_data_convgemm_bf16(sh, dy.data(), w.data(), dx.data(), Bf16Math::kAmx);
  conv2d_bwd_weights_convgemm_bf16(sh, x.data(), dy.data(), dw.data(), nullptr, Bf16Math::kAmx);
  const auto check = [&](const std::vector<float>& got, double macs, std::uint32_t seed, auto&& reference) {
    return matches_reference(got, macs, seed, rtol, reference);
  };
  const double taps = static_cast<double>(sh.r) * sh.s;
  EXPECT_TRUE(check(y, sh.c / sh.groups * taps, 64, [&](std::size_t i) { return reference_y(sh, xr, wr, i); }))
      << "forward";
  EXPECT_TRUE(check(dx, sh.k / sh.groups * taps, 65, [&](std::size_t i) { return reference_dx(sh, dyr, wr, i); }))
      << "backward-data";
  EXPECT_TRUE(check(dw, static_cast<double>(sh.n) * sh.out_h() * sh.out_w(), 66,
                    [&](std::size_t i) { return reference_dw(sh, xr, dyr, i); }))
      << "backward-weights";
  // Deterministic: the same bits again.
  auto y_again = nan_vector(y.size());
  conv2d_fwd_convgemm_bf16(sh, x.data(), w.data(), nullptr, 0, y_again.data(), Bf16Math::kAmx);
  EXPECT_TRUE(bitwise_equal(y_again, y));
}

// oneDNN's bf16 passes (onednn_conv.hpp), with the bias and ReLU of the forward pass and the bias gradient: the double
// sums of the rounded inputs as every bf16 pass, and the same bits call after call. Skipped in a build without
// oneDNN; where oneDNN has no bf16 convolution for the CPU, calling it is an error naming the geometry.
TEST_P(Bf16ConvTest, OneDnnPassesAreTheDoubleSumsOfBf16RoundedInputs) {
  const Conv2dShape& sh = GetParam().shape;
  if (!onednn_built()) {
    GTEST_SKIP() << "built without oneDNN (libdnnl-dev)";
  }
  const auto x = random_vector(x_size(sh), 71);
  const auto w = random_vector(w_size(sh), 72);
  const auto b = random_vector(static_cast<std::size_t>(sh.k), 73);
  const auto dy = random_vector(y_size(sh), 74);
  auto y = nan_vector(y_size(sh));
  auto dx = nan_vector(x_size(sh));
  auto dw = nan_vector(w_size(sh));
  auto db = nan_vector(static_cast<std::size_t>(sh.k));
  if (!onednn_bf16_fits(sh)) {
    EXPECT_THROW(conv2d_fwd_onednn_bf16(sh, x.data(), w.data(), nullptr, 0, y.data()), InvalidArgument);
    GTEST_SKIP() << "oneDNN has no bf16 convolution on this CPU";
  }
  const auto xr = rounded(x);
  const auto wr = rounded(w);
  const auto dyr = rounded(dy);
  conv2d_fwd_onednn_bf16(sh, x.data(), w.data(), b.data(), 1, y.data());
  conv2d_bwd_data_onednn_bf16(sh, dy.data(), w.data(), dx.data());
  conv2d_bwd_weights_onednn_bf16(sh, x.data(), dy.data(), dw.data(), db.data());
  const auto check = [&](const std::vector<float>& got, double macs, std::uint32_t seed, auto&& reference) {
    return matches_reference(got, macs, seed, kRtol, reference);
  };
  const double taps = static_cast<double>(sh.r) * sh.s;
  const std::size_t plane = static_cast<std::size_t>(sh.out_h()) * sh.out_w();
  EXPECT_TRUE(check(y, sh.c / sh.groups * taps, 75, [&](std::size_t i) {
    return std::max(0.0, reference_y(sh, xr, wr, i) + b[i / plane % static_cast<std::size_t>(sh.k)]);
  })) << "forward, bias and ReLU";
  EXPECT_TRUE(check(dx, sh.k / sh.groups * taps, 76, [&](std::size_t i) { return reference_dx(sh, dyr, wr, i); }))
      << "backward-data";
  EXPECT_TRUE(check(dw, static_cast<double>(sh.n) * plane, 77,
                    [&](std::size_t i) { return reference_dw(sh, xr, dyr, i); }))
      << "backward-weights";
  // The test can tell: unrounded inputs are further from the reference than the tolerance.
  EXPECT_FALSE(check(dw, static_cast<double>(sh.n) * plane, 77,
                     [&](std::size_t i) { return reference_dw(sh, x, dy, i); }))
      << "the inputs were not rounded to bf16";
  std::vector<double> ref_db(static_cast<std::size_t>(sh.k), 0.0);
  for (std::size_t yi = 0; yi < dy.size(); ++yi) {
    ref_db[yi / plane % static_cast<std::size_t>(sh.k)] += dyr[yi];
  }
  EXPECT_TRUE(test::all_close(db, ref_db, 1e-5)) << "db: the sums of dy rounded to bf16";
  // Deterministic: the same bits again, on every pass.
  auto y_again = nan_vector(y.size());
  auto dx_again = nan_vector(dx.size());
  auto dw_again = nan_vector(dw.size());
  conv2d_fwd_onednn_bf16(sh, x.data(), w.data(), b.data(), 1, y_again.data());
  conv2d_bwd_data_onednn_bf16(sh, dy.data(), w.data(), dx_again.data());
  conv2d_bwd_weights_onednn_bf16(sh, x.data(), dy.data(), dw_again.data(), nullptr);
  EXPECT_TRUE(bitwise_equal(y_again, y));
  EXPECT_TRUE(bitwise_equal(dx_again, dx));
  EXPECT_TRUE(bitwise_equal(dw_again, dw)) << "without the bias gradient, the same weight gradients";
}

// A batch's tiles compute the forward pass the whole batch computes, bit for bit (each output's reduction is its own,
// in KC blocks that do not depend on the batch), and each pass gives the same bits call after call. Backward-data
// scatters tiles of pixels that may span samples, so (as in fp32) its bits are fixed for a given tile, not across
// tilings: training is bitwise reproducible for a given tile count (docs/design.md).
TEST_P(Bf16ConvTest, ForwardOfTilesIsTheWholeBatchsBitsAndEveryPassRepeats) {
  Conv2dShape sh = GetParam().shape;
  sh.n = 3;
  const auto x = random_vector(x_size(sh), 51);
  const auto w = random_vector(w_size(sh), 52);
  const auto dy = random_vector(y_size(sh), 53);
  std::vector<float> y(y_size(sh)), dx(x_size(sh));
  conv2d_fwd_convgemm_bf16(sh, x.data(), w.data(), nullptr, 1, y.data(), Bf16Math::kEmulated);
  conv2d_bwd_data_convgemm_bf16(sh, dy.data(), w.data(), dx.data(), Bf16Math::kEmulated);
  Conv2dShape one = sh;
  one.n = 1;
  Conv2dShape two = sh;
  two.n = 2;
  std::vector<float> y_tiles(y.size());
  conv2d_fwd_convgemm_bf16(one, x.data(), w.data(), nullptr, 1, y_tiles.data(), Bf16Math::kEmulated);
  conv2d_fwd_convgemm_bf16(two, x.data() + x_size(one), w.data(), nullptr, 1, y_tiles.data() + y_size(one),
                           Bf16Math::kEmulated);
  EXPECT_TRUE(bitwise_equal(y_tiles, y)) << "forward";
  auto dx_again = nan_vector(dx.size());
  conv2d_bwd_data_convgemm_bf16(sh, dy.data(), w.data(), dx_again.data(), Bf16Math::kEmulated);
  EXPECT_TRUE(bitwise_equal(dx_again, dx)) << "backward-data";
}

INSTANTIATE_TEST_SUITE_P(Geometry, Bf16ConvTest, ::testing::ValuesIn(bf16_cases()),
                         [](const ::testing::TestParamInfo<Bf16Case>& info) { return info.param.name; });

TEST(Bf16ConvTest, NativeMathOnACpuWithoutAvx512Bf16NamesTheInstruction) {
  if (cpu_has_avx512_bf16()) {
    GTEST_SKIP() << "this CPU has AVX512-BF16 (DTNN_MAX_CPU_ISA=avx2 takes it away: ctest's kernels_isa_avx2)";
  }
  const Conv2dShape sh = conv_shape(1, 2, 4, 4, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  const auto x = random_vector(x_size(sh), 1);
  const auto dy = random_vector(y_size(sh), 2);
  std::vector<float> dw(w_size(sh));
  try {
    conv2d_bwd_weights_convgemm_bf16(sh, x.data(), dy.data(), dw.data(), nullptr, Bf16Math::kAvx512Bf16);
    FAIL() << "expected dtnn::InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("AVX512-BF16"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("emulation"), std::string::npos) << e.what();
  }
}

TEST(Bf16ConvTest, WorkspaceIsBoundedByTheCacheBlocksWhateverTheBatch) {
  const Conv2dShape sh = conv_shape(8, 256, 16, 16, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  Conv2dShape big = sh;
  big.n = 256;
  // Largest here: backward-data's blocks over its whole reduction of 256 channels, MC 480 pixels and NC 2304 im2col
  // rows, in fp32 as packed and in pairs: 4.1 MiB, as fp32's 2.7 MiB blocks and their half-size pairs.
  EXPECT_GT(convgemm_bf16_workspace_bytes(sh), 0u);
  EXPECT_LT(convgemm_bf16_workspace_bytes(sh), 5u << 20);
  EXPECT_EQ(convgemm_bf16_workspace_bytes(big), convgemm_bf16_workspace_bytes(sh));
}

}  // namespace
}  // namespace dtnn::kernels::cpu
