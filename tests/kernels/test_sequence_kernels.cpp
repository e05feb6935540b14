// SPDX-License-Identifier: Apache-2.0
// Kernels of sequence models against float64 references: token cross-entropy (ignore_index, label smoothing).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codelets/cpu/kernels.hpp"
#include "core/errors.hpp"
#include "kernel_test_util.hpp"
#include "support/throws_with.hpp"

namespace dtnn::kernels::cpu {
namespace {

using test::all_close;
using test::nan_vector;
using test::random_vector;

struct TokenXentReference {
  std::vector<double> dlogits;
  double loss = 0.0;
  double correct = 0.0;
  double counted = 0.0;
};

// PyTorch's CrossEntropyLoss(ignore_index, label_smoothing) in double, from log-probabilities: per counted row
// (1 - eps) * -log p[y] + eps * mean_j -log p[j]; gradient p - t with t the smoothed target distribution.
TokenXentReference reference_token_xent(int n, int classes, const std::vector<float>& z,
                                        const std::vector<std::int32_t>& y, const TokenXentParams& p,
                                        double scale) {
  TokenXentReference r;
  r.dlogits.assign(z.size(), 0.0);
  const double eps = p.label_smoothing;
  for (int i = 0; i < n; ++i) {
    if (y[static_cast<std::size_t>(i)] == p.ignore_index) continue;
    const float* row = z.data() + static_cast<std::size_t>(i) * classes;
    double m = row[0];
    int arg = 0;
    for (int j = 1; j < classes; ++j) {
      if (row[j] > m) {
        m = row[j];
        arg = j;
      }
    }
    double sum = 0.0;
    for (int j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(row[j]) - m);
    const double log_sum = std::log(sum) + m;
    const int target = y[static_cast<std::size_t>(i)];
    double smooth = 0.0;
    for (int j = 0; j < classes; ++j) {
      const double logp = static_cast<double>(row[j]) - log_sum;
      smooth -= logp / classes;
      const double t = eps / classes + (j == target ? 1.0 - eps : 0.0);
      r.dlogits[static_cast<std::size_t>(i) * classes + j] = (std::exp(logp) - t) * scale;
    }
    r.loss += (1.0 - eps) * -(static_cast<double>(row[target]) - log_sum) + eps * smooth;
    r.correct += arg == target ? 1.0 : 0.0;
    r.counted += 1.0;
  }
  return r;
}

std::vector<std::int32_t> random_targets(int n, int classes, std::uint32_t seed, std::int32_t ignore_index,
                                         double ignored_share) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::int32_t> id(0, classes - 1);
  std::bernoulli_distribution ignored(ignored_share);
  std::vector<std::int32_t> y(static_cast<std::size_t>(n));
  for (auto& v : y) v = ignored(gen) ? ignore_index : id(gen);
  return y;
}

struct TokenXentCase {
  int n, classes;
  float smoothing;
  std::int32_t ignore_index;
};

class TokenXentKernelTest : public ::testing::TestWithParam<TokenXentCase> {};

TEST_P(TokenXentKernelTest, MatchesDoublePrecisionReference) {
  const auto [n, classes, smoothing, ignore_index] = GetParam();
  const TokenXentParams p{ignore_index, smoothing};
  const auto z = random_vector(static_cast<std::size_t>(n) * classes, 5, -6.0f, 6.0f);
  const auto y = random_targets(n, classes, 6, ignore_index, 0.25);
  const auto counted =
      static_cast<double>(std::count_if(y.begin(), y.end(), [&](std::int32_t v) { return v != ignore_index; }));
  const float scale = counted > 0 ? static_cast<float>(1.0 / counted) : 1.0f;
  const auto ref = reference_token_xent(n, classes, z, y, p, scale);
  auto dz = nan_vector(z.size());
  float stats[kLossStats];
  std::fill(std::begin(stats), std::end(stats), std::numeric_limits<float>::quiet_NaN());
  token_xent_fwd_bwd(n, classes, z.data(), y.data(), p, scale, dz.data(), stats);
  std::vector<float> got(dz.size());
  std::vector<double> want(dz.size());
  for (std::size_t i = 0; i < dz.size(); ++i) {
    got[i] = dz[i] / scale;
    want[i] = ref.dlogits[i] / scale;
  }
  EXPECT_TRUE(all_close(got, want, 1e-6));
  EXPECT_NEAR(stats[kLossSum], ref.loss, 1e-6 * std::max(1.0, ref.loss));
  EXPECT_EQ(stats[kCorrect], ref.correct);
  EXPECT_EQ(stats[kCounted], ref.counted);
  EXPECT_EQ(ref.counted, counted);
  // An ignored row gets exactly no gradient.
  for (int i = 0; i < n; ++i) {
    if (y[static_cast<std::size_t>(i)] != ignore_index) continue;
    for (int j = 0; j < classes; ++j) ASSERT_EQ(dz[static_cast<std::size_t>(i) * classes + j], 0.0f) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, TokenXentKernelTest,
                         ::testing::Values(TokenXentCase{1, 1, 0.0f, -100}, TokenXentCase{8, 5, 0.0f, -100},
                                           TokenXentCase{16, 256, 0.1f, -100}, TokenXentCase{33, 97, 0.3f, 0},
                                           TokenXentCase{5, 1000, 1.0f, -1}),
                         [](const ::testing::TestParamInfo<TokenXentCase>& info) {
                           return test::concat("N", info.param.n, "Classes", info.param.classes, "Smoothing",
                                               static_cast<int>(info.param.smoothing * 100), "Ignore",
                                               info.param.ignore_index < 0 ? "Negative" : "Zero");
                         });

// The loss is a function of the logits alone: its central differences are the gradient (grad_scale 1).
TEST(TokenXentKernelTest, GradientIsTheNumericalDerivativeOfTheLoss) {
  const int n = 4;
  const int classes = 6;
  const TokenXentParams p{-100, 0.2f};
  auto z = random_vector(static_cast<std::size_t>(n) * classes, 9, -2.0f, 2.0f);
  const std::vector<std::int32_t> y = {3, -100, 0, 5};
  std::vector<float> dz(z.size());
  float stats[kLossStats];
  token_xent_fwd_bwd(n, classes, z.data(), y.data(), p, 1.0f, dz.data(), stats);
  auto loss_at = [&](std::size_t k, float h) {
    std::vector<float> zk = z;
    zk[k] += h;
    return reference_token_xent(n, classes, zk, y, p, 1.0).loss;
  };
  for (std::size_t k = 0; k < z.size(); ++k) {
    const float h = 1e-2f;
    const double numeric = (loss_at(k, h) - loss_at(k, -h)) / (2.0 * h);
    EXPECT_NEAR(dz[k], numeric, 2e-4) << "logit " << k;
  }
}

TEST(TokenXentKernelTest, HugeLogitsGiveFiniteLossAndGradients) {
  const std::vector<float> z = {1e4f, -1e4f, 0.0f, -1e4f, 1e4f, 9999.0f};
  const std::vector<std::int32_t> y = {0, 2};
  std::vector<float> dz(z.size());
  float stats[kLossStats];
  token_xent_fwd_bwd(2, 3, z.data(), y.data(), TokenXentParams{-100, 0.1f}, 1.0f, dz.data(), stats);
  for (float g : dz) ASSERT_TRUE(std::isfinite(g));
  const auto ref = reference_token_xent(2, 3, z, y, TokenXentParams{-100, 0.1f}, 1.0);
  EXPECT_NEAR(stats[kLossSum], ref.loss, 1e-6 * ref.loss);
}

TEST(TokenXentKernelTest, EveryRowIgnoredCountsNothing) {
  const std::vector<float> z(8, 1.0f);
  const std::vector<std::int32_t> y = {-100, -100};
  auto dz = nan_vector(z.size());
  float stats[kLossStats];
  token_xent_fwd_bwd(2, 4, z.data(), y.data(), TokenXentParams{}, 1.0f, dz.data(), stats);
  for (float g : dz) EXPECT_EQ(g, 0.0f);
  for (int k = 0; k < kLossStats; ++k) EXPECT_EQ(stats[k], 0.0f) << k;
}

TEST(TokenXentKernelTest, TargetOutsideTheVocabularyIsADataErrorNamingIt) {
  const std::vector<float> z(6, 0.0f);
  std::vector<float> dz(z.size());
  float stats[kLossStats];
  for (std::int32_t bad : {3, -1}) {
    const std::vector<std::int32_t> y = {1, bad};
    EXPECT_TRUE(test_support::throws_with<DataError>(
        [&] { token_xent_fwd_bwd(2, 3, z.data(), y.data(), TokenXentParams{}, 1.0f, dz.data(), stats); },
        {"token cross-entropy: target " + std::to_string(bad) + " in row 1", "expected 0 <= target < 3",
         "ignore_index=-100"}));
  }
}

}  // namespace
}  // namespace dtnn::kernels::cpu
