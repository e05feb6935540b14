// SPDX-License-Identifier: Apache-2.0
// The fused kernels (models/fusion.hpp) against the compositions of the separate kernels they replace. The order
// and rounding of every operation is the same, so the results must be equal bit for bit, on a sweep of shapes
// (planes of 1, odd sizes, more than the eight lanes of the plane sums), with and without gamma and beta, and with
// negative zeros, exact zeros and NaNs among the values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "codelets/cpu/nn_kernels.hpp"
#include "kernels/kernel_test_util.hpp"

namespace dtnn::kernels::cpu {
namespace {

using test::nan_vector;
using test::random_vector;

::testing::AssertionResult same_bits(const std::vector<float>& want, const std::vector<float>& got) {
  if (want.size() != got.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  }
  for (std::size_t i = 0; i < want.size(); ++i) {
    const bool same = std::bit_cast<std::uint32_t>(want[i]) == std::bit_cast<std::uint32_t>(got[i]) ||
                      (std::isnan(want[i]) && std::isnan(got[i]));
    if (!same) {
      return ::testing::AssertionFailure() << "first difference at [" << i << "]: unfused " << want[i] << " (0x"
                                           << std::hex << std::bit_cast<std::uint32_t>(want[i]) << "), fused "
                                           << std::dec << got[i] << " (0x" << std::hex
                                           << std::bit_cast<std::uint32_t>(got[i]) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

struct Geometry {
  int n;
  int c;
  std::size_t plane;
};

const Geometry kShapes[] = {{1, 1, 1}, {3, 2, 1}, {2, 3, 7}, {4, 5, 9}, {3, 4, 64}, {2, 3, 121}};

// Random values with the cases a ReLU mask must get right: exact zeros (masked), -0 and a NaN.
std::vector<float> values(std::size_t count, std::uint32_t seed) {
  std::vector<float> v = random_vector(count, seed, -2.0f, 2.0f);
  for (std::size_t i = 0; i < v.size(); i += 11) v[i] = 0.0f;
  for (std::size_t i = 5; i < v.size(); i += 13) v[i] = -0.0f;
  if (v.size() > 20) v[17] = std::numeric_limits<float>::quiet_NaN();
  return v;
}

// The per-channel statistics of a training step: mean and invstd (rows of [2, c]).
struct Stats {
  std::vector<float> mean_invstd;
  std::vector<float> gamma;
  std::vector<float> beta;
};

Stats stats_for(int c, std::uint32_t seed) {
  Stats s;
  s.mean_invstd = random_vector(2 * static_cast<std::size_t>(c), seed, 0.2f, 1.5f);
  s.gamma = random_vector(static_cast<std::size_t>(c), seed + 1, -1.5f, 1.5f);
  s.beta = random_vector(static_cast<std::size_t>(c), seed + 2, -0.5f, 0.5f);
  return s;
}

std::vector<float> add_of(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> out = nan_vector(a.size());
  const float* src[2] = {a.data(), b.data()};
  sum_fixed_order(a.size(), 2, src, out.data());
  return out;
}

std::vector<float> relu_of(const std::vector<float>& x) {
  std::vector<float> y = nan_vector(x.size());
  relu_fwd(x.size(), x.data(), y.data());
  return y;
}

TEST(FusedKernelsTest, BatchNormForwardEpiloguesEqualTheSeparatePasses) {
  for (const Geometry& g : kShapes) {
    const std::size_t count = static_cast<std::size_t>(g.n) * g.c * g.plane;
    const std::vector<float> x = values(count, 3);
    const std::vector<float> r = values(count, 4);
    const Stats s = stats_for(g.c, 5);
    const float* mean = s.mean_invstd.data();
    const float* invstd = mean + g.c;
    for (int affine = 0; affine < 2; ++affine) {
      const float* gamma = affine ? s.gamma.data() : nullptr;
      const float* beta = affine ? s.beta.data() : nullptr;
      std::vector<float> bn = nan_vector(count);
      batch_norm_fwd(g.n, g.c, g.plane, x.data(), mean, invstd, gamma, beta, bn.data());
      for (int residual = 0; residual < 2; ++residual) {
        for (int relu = 0; relu < 2; ++relu) {
          std::vector<float> want = residual ? add_of(bn, r) : bn;
          if (relu) want = relu_of(want);
          std::vector<float> got = nan_vector(count);
          batch_norm_fwd_fused(g.n, g.c, g.plane, x.data(), mean, invstd, gamma, beta, residual ? r.data() : nullptr,
                               relu, got.data());
          EXPECT_TRUE(same_bits(want, got)) << "n " << g.n << " c " << g.c << " plane " << g.plane << " affine "
                                            << affine << " residual " << residual << " relu " << relu;
        }
      }
    }
  }
}

TEST(FusedKernelsTest, BatchNormInferenceEpiloguesEqualTheSeparatePasses) {
  for (const Geometry& g : kShapes) {
    const std::size_t count = static_cast<std::size_t>(g.n) * g.c * g.plane;
    const std::vector<float> x = values(count, 6);
    const std::vector<float> r = values(count, 7);
    const Stats s = stats_for(g.c, 8);
    const float* mean = s.mean_invstd.data();
    const float* var = mean + g.c;
    for (int affine = 0; affine < 2; ++affine) {
      const float* gamma = affine ? s.gamma.data() : nullptr;
      const float* beta = affine ? s.beta.data() : nullptr;
      std::vector<float> bn = nan_vector(count);
      batch_norm_infer_fwd(g.n, g.c, g.plane, 1e-5, x.data(), mean, var, gamma, beta, bn.data());
      for (int residual = 0; residual < 2; ++residual) {
        for (int relu = 0; relu < 2; ++relu) {
          std::vector<float> want = residual ? add_of(bn, r) : bn;
          if (relu) want = relu_of(want);
          std::vector<float> got = nan_vector(count);
          batch_norm_infer_fwd_fused(g.n, g.c, g.plane, 1e-5, x.data(), mean, var, gamma, beta,
                                     residual ? r.data() : nullptr, relu, got.data());
          EXPECT_TRUE(same_bits(want, got)) << "n " << g.n << " c " << g.c << " plane " << g.plane << " affine "
                                            << affine << " residual " << residual << " relu " << relu;
        }
      }
    }
  }
}

// The masked backward passes read the ReLU's output y and its gradient dy; the unfused graph first stores
// relu_bwd_data(y, dy) and hands that to the BatchNorm's passes.
TEST(FusedKernelsTest, BatchNormBackwardWithTheReluMaskEqualsTheSeparatePasses) {
  for (const Geometry& g : kShapes) {
    const std::size_t count = static_cast<std::size_t>(g.n) * g.c * g.plane;
    const std::vector<float> x = random_vector(count, 9, -2.0f, 2.0f);
    const std::vector<float> y = relu_of(values(count, 10));
    const std::vector<float> dy = random_vector(count, 11, -1.0f, 1.0f);
    const Stats s = stats_for(g.c, 12);
    const float* mean = s.mean_invstd.data();
    const float* invstd = mean + g.c;
    std::vector<float> masked = nan_vector(count);
    relu_bwd_data(count, y.data(), dy.data(), masked.data());

    const std::size_t width = 2 * static_cast<std::size_t>(g.c);
    std::vector<float> want_sums = nan_vector(static_cast<std::size_t>(g.n) * width);
    std::vector<float> got_sums = nan_vector(want_sums.size());
    batch_norm_bwd_sums(g.n, g.c, g.plane, x.data(), masked.data(), mean, invstd, want_sums.data());
    batch_norm_bwd_sums_masked(g.n, g.c, g.plane, x.data(), y.data(), dy.data(), mean, invstd, got_sums.data());
    EXPECT_TRUE(same_bits(want_sums, got_sums)) << "sums, plane " << g.plane;

    const std::vector<float> grad_stats = random_vector(width, 13, -0.3f, 0.3f);
    for (int affine = 0; affine < 2; ++affine) {
      for (int batch_stats = 0; batch_stats < 2; ++batch_stats) {
        const float* gamma = affine ? s.gamma.data() : nullptr;
        const float* mean_dy = batch_stats ? grad_stats.data() : nullptr;
        const float* mean_dy_xhat = batch_stats ? grad_stats.data() + g.c : nullptr;
        std::vector<float> want = nan_vector(count);
        std::vector<float> got = nan_vector(count);
        batch_norm_bwd_data(g.n, g.c, g.plane, x.data(), masked.data(), mean, invstd, gamma, mean_dy, mean_dy_xhat,
                            want.data());
        batch_norm_bwd_data_masked(g.n, g.c, g.plane, x.data(), y.data(), dy.data(), mean, invstd, gamma, mean_dy,
                                   mean_dy_xhat, got.data());
        EXPECT_TRUE(same_bits(want, got)) << "data, plane " << g.plane << " affine " << affine << " batch statistics "
                                          << batch_stats;
      }
    }
    // Without a mask the masked kernels are the plain ones.
    std::vector<float> plain = nan_vector(want_sums.size());
    batch_norm_bwd_sums(g.n, g.c, g.plane, x.data(), dy.data(), mean, invstd, want_sums.data());
    batch_norm_bwd_sums_masked(g.n, g.c, g.plane, x.data(), nullptr, dy.data(), mean, invstd, plain.data());
    EXPECT_TRUE(same_bits(want_sums, plain));
  }
}

TEST(FusedKernelsTest, ResidualReluBackwardAddsTheMaskedShareAsTheSeparatePasses) {
  for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{513}, std::size_t{2000}}) {
    const std::vector<float> y = relu_of(values(count, 14));
    const std::vector<float> dy = values(count, 15);
    const std::vector<float> other = random_vector(count, 16, -1.0f, 1.0f);
    std::vector<float> masked = nan_vector(count);
    relu_bwd_data(count, y.data(), dy.data(), masked.data());
    std::vector<float> got = nan_vector(count);
    relu_bwd_data_add(count, y.data(), dy.data(), other.data(), got.data());
    // The block's paths in either order: two-term float sums commute exactly.
    EXPECT_TRUE(same_bits(add_of(other, masked), got)) << count;
    EXPECT_TRUE(same_bits(add_of(masked, other), got)) << count;
  }
}

TEST(FusedKernelsTest, SumWithReluEqualsTheSumThenTheRelu) {
  for (std::size_t count : {std::size_t{1}, std::size_t{511}, std::size_t{512}, std::size_t{1537}}) {
    for (int nsrc = 1; nsrc <= 4; ++nsrc) {
      std::vector<std::vector<float>> parts;
      std::vector<const float*> src;
      for (int s = 0; s < nsrc; ++s) parts.push_back(values(count, 20 + static_cast<std::uint32_t>(s)));
      for (const auto& p : parts) src.push_back(p.data());
      std::vector<float> sum = nan_vector(count);
      sum_fixed_order(count, nsrc, src.data(), sum.data());
      std::vector<float> got = nan_vector(count);
      sum_fixed_order_relu(count, nsrc, src.data(), got.data());
      EXPECT_TRUE(same_bits(relu_of(sum), got)) << count << " values, " << nsrc << " sources";
    }
  }
}

TEST(FusedKernelsTest, DenseWithReluEqualsDenseThenRelu) {
  const int n = 5, in = 13, out = 9;
  const std::vector<float> x = random_vector(static_cast<std::size_t>(n) * in, 30);
  const std::vector<float> w = random_vector(static_cast<std::size_t>(out) * in, 31);
  const std::vector<float> b = random_vector(static_cast<std::size_t>(out), 32);
  for (int bias = 0; bias < 2; ++bias) {
    std::vector<float> plain = nan_vector(static_cast<std::size_t>(n) * out);
    dense_fwd(n, in, out, x.data(), w.data(), bias ? b.data() : nullptr, plain.data());
    std::vector<float> got = nan_vector(plain.size());
    dense_fwd(n, in, out, x.data(), w.data(), bias ? b.data() : nullptr, 1, got.data());
    EXPECT_TRUE(same_bits(relu_of(plain), got)) << "bias " << bias;
    dense_fwd(n, in, out, x.data(), w.data(), bias ? b.data() : nullptr, 0, got.data());
    EXPECT_TRUE(same_bits(plain, got)) << "bias " << bias;
  }
}

}  // namespace
}  // namespace dtnn::kernels::cpu
