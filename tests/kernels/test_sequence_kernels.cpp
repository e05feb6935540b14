// SPDX-License-Identifier: Apache-2.0
// Kernels of sequence models against float64 references: token cross-entropy (ignore_index, label smoothing),
// layer normalisation, GELU (exact and its tanh approximation), embeddings, positional encodings, attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "codelets/cpu/kernels.hpp"
#include "codelets/cpu/layer_norm.hpp"
#include "codelets/cpu/nn_kernels.hpp"
#include "codelets/cpu/vector_math.hpp"
#include "core/cpu_features.hpp"
#include "core/errors.hpp"
#include "kernel_test_util.hpp"
#include "support/throws_with.hpp"

namespace dtnn::kernels::cpu {
namespace {

using test::all_close;
using test::bitwise_equal;
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
  float stats[kTokenLossStats];
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
  float stats[kTokenLossStats];
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
  float stats[kTokenLossStats];
  token_xent_fwd_bwd(2, 3, z.data(), y.data(), TokenXentParams{-100, 0.1f}, 1.0f, dz.data(), stats);
  for (float g : dz) ASSERT_TRUE(std::isfinite(g));
  const auto ref = reference_token_xent(2, 3, z, y, TokenXentParams{-100, 0.1f}, 1.0);
  EXPECT_NEAR(stats[kLossSum], ref.loss, 1e-6 * ref.loss);
}

TEST(TokenXentKernelTest, EveryRowIgnoredCountsNothing) {
  const std::vector<float> z(8, 1.0f);
  const std::vector<std::int32_t> y = {-100, -100};
  auto dz = nan_vector(z.size());
  float stats[kTokenLossStats];
  token_xent_fwd_bwd(2, 4, z.data(), y.data(), TokenXentParams{}, 1.0f, dz.data(), stats);
  for (float g : dz) EXPECT_EQ(g, 0.0f);
  for (int k = 0; k < kTokenLossStats; ++k) EXPECT_EQ(stats[k], 0.0f) << k;
}

TEST(TokenXentKernelTest, TargetOutsideTheVocabularyIsADataErrorNamingIt) {
  const std::vector<float> z(6, 0.0f);
  std::vector<float> dz(z.size());
  float stats[kTokenLossStats];
  for (std::int32_t bad : {3, -1}) {
    const std::vector<std::int32_t> y = {1, bad};
    EXPECT_TRUE(test_support::throws_with<DataError>(
        [&] { token_xent_fwd_bwd(2, 3, z.data(), y.data(), TokenXentParams{}, 1.0f, dz.data(), stats); },
        {"token cross-entropy: target " + std::to_string(bad) + " in row 1", "expected 0 <= target < 3",
         "ignore_index=-100"}));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// LayerNorm

struct LayerNormReference {
  std::vector<double> y, dx, dw, db;
};

// Forward and both backward passes in double, straight from the definitions.
LayerNormReference reference_layer_norm(int rows, int width, double eps, const std::vector<float>& x,
                                        const std::vector<float>* w, const std::vector<float>* b,
                                        const std::vector<float>& dy) {
  LayerNormReference r;
  r.y.resize(x.size());
  r.dx.resize(x.size());
  r.dw.assign(static_cast<std::size_t>(width), 0.0);
  r.db.assign(static_cast<std::size_t>(width), 0.0);
  for (int i = 0; i < rows; ++i) {
    const std::size_t o = static_cast<std::size_t>(i) * width;
    double mean = 0.0, var = 0.0;
    for (int j = 0; j < width; ++j) mean += x[o + j];
    mean /= width;
    for (int j = 0; j < width; ++j) var += (x[o + j] - mean) * (x[o + j] - mean);
    var /= width;
    const double rstd = 1.0 / std::sqrt(var + eps);
    double mg = 0.0, mgx = 0.0;
    std::vector<double> xhat(static_cast<std::size_t>(width)), g(static_cast<std::size_t>(width));
    for (int j = 0; j < width; ++j) {
      const double wj = w != nullptr ? (*w)[static_cast<std::size_t>(j)] : 1.0;
      const double bj = b != nullptr ? (*b)[static_cast<std::size_t>(j)] : 0.0;
      xhat[static_cast<std::size_t>(j)] = (x[o + j] - mean) * rstd;
      r.y[o + j] = xhat[static_cast<std::size_t>(j)] * wj + bj;
      g[static_cast<std::size_t>(j)] = dy[o + j] * wj;
      mg += g[static_cast<std::size_t>(j)] / width;
      mgx += g[static_cast<std::size_t>(j)] * xhat[static_cast<std::size_t>(j)] / width;
      r.dw[static_cast<std::size_t>(j)] += dy[o + j] * xhat[static_cast<std::size_t>(j)];
      r.db[static_cast<std::size_t>(j)] += dy[o + j];
    }
    for (int j = 0; j < width; ++j) {
      r.dx[o + j] = rstd * (g[static_cast<std::size_t>(j)] - mg - xhat[static_cast<std::size_t>(j)] * mgx);
    }
  }
  return r;
}

struct LayerNormCase {
  int rows, width;
  float offset;  // added to every input: the variance must survive a mean far from zero
  bool affine;
};

class LayerNormKernelTest : public ::testing::TestWithParam<LayerNormCase> {};

TEST_P(LayerNormKernelTest, MatchesDoublePrecisionReference) {
  const auto [rows, width, offset, affine] = GetParam();
  const std::size_t count = static_cast<std::size_t>(rows) * width;
  auto x = random_vector(count, 31, -2.0f, 2.0f);
  for (float& v : x) v += offset;
  const auto w = random_vector(static_cast<std::size_t>(width), 32, 0.5f, 1.5f);
  const auto b = random_vector(static_cast<std::size_t>(width), 33, -0.5f, 0.5f);
  const auto dy = random_vector(count, 34);
  const float eps = 1e-5f;
  const auto ref = reference_layer_norm(rows, width, eps, x, affine ? &w : nullptr, affine ? &b : nullptr, dy);
  auto y = nan_vector(count);
  auto stats = nan_vector(2 * static_cast<std::size_t>(rows));
  layer_norm_fwd(rows, width, eps, x.data(), affine ? w.data() : nullptr, affine ? b.data() : nullptr, y.data(),
                 stats.data());
  EXPECT_TRUE(all_close(y, ref.y, 1e-5));
  auto dx = nan_vector(count);
  layer_norm_bwd_data(rows, width, x.data(), stats.data(), affine ? w.data() : nullptr, dy.data(), dx.data());
  EXPECT_TRUE(all_close(dx, ref.dx, 1e-5));
  auto dw = nan_vector(static_cast<std::size_t>(width));
  auto db = nan_vector(static_cast<std::size_t>(width));
  layer_norm_bwd_weights(rows, width, x.data(), stats.data(), dy.data(), 0, dw.data(), db.data());
  EXPECT_TRUE(all_close(dw, ref.dw, 1e-5));
  EXPECT_TRUE(all_close(db, ref.db, 1e-6));
  // The rows in two calls, the second accumulating, add in the same order: the same bits.
  const int first = rows / 2;
  auto dw2 = nan_vector(dw.size());
  auto db2 = nan_vector(db.size());
  layer_norm_bwd_weights(first, width, x.data(), stats.data(), dy.data(), 0, dw2.data(), db2.data());
  const std::size_t skip = static_cast<std::size_t>(first) * width;
  layer_norm_bwd_weights(rows - first, width, x.data() + skip, stats.data() + 2 * first, dy.data() + skip, 1,
                         dw2.data(), db2.data());
  EXPECT_EQ(dw2, dw);
  EXPECT_EQ(db2, db);
}

INSTANTIATE_TEST_SUITE_P(Shapes, LayerNormKernelTest,
                         ::testing::Values(LayerNormCase{1, 1, 0.0f, true}, LayerNormCase{3, 8, 0.0f, true},
                                           LayerNormCase{17, 64, 100.0f, true}, LayerNormCase{5, 1000, 0.0f, false},
                                           LayerNormCase{9, 256, -30.0f, false}),
                         [](const ::testing::TestParamInfo<LayerNormCase>& info) {
                           return test::concat("Rows", info.param.rows, "Width", info.param.width, "Offset",
                                               static_cast<int>(std::abs(info.param.offset)),
                                               info.param.affine ? "Affine" : "Plain");
                         });

// One instruction set's entry points (codelets/cpu/layer_norm.hpp).
struct LayerNormIsa {
  const char* name;
  decltype(&layer_norm_fwd) fwd;
  decltype(&layer_norm_bwd_data) bwd_data;
  decltype(&layer_norm_bwd_weights) bwd_weights;
};

// Plain x86-64 always, AVX2 and AVX-512 where the CPU (and DTNN_MAX_CPU_ISA) runs them.
std::vector<LayerNormIsa> layer_norm_isas() {
  std::vector<LayerNormIsa> isas = {
      {"generic", layer_norm_fwd_generic, layer_norm_bwd_data_generic, layer_norm_bwd_weights_generic}};
#if defined(__x86_64__)
  if (cpu_has_avx2_fma()) {
    isas.push_back({"avx2", layer_norm_fwd_avx2, layer_norm_bwd_data_avx2, layer_norm_bwd_weights_avx2});
  }
  if (cpu_has_avx512()) {
    isas.push_back({"avx512", layer_norm_fwd_avx512, layer_norm_bwd_data_avx512, layer_norm_bwd_weights_avx512});
  }
#endif
  return isas;
}

struct LayerNormOutputs {
  std::vector<float> y, stats, dx, dw, db;
};

// Each instruction set against the reference at widths that leave some of the 16 lanes of the row sums without an
// element (1, 7, 33, 1000) or fill them (256, 768), odd row counts, with and without the affine transform; and the
// three give the same bits: the same fixed lanes whatever the vector width, and no product fused into a sum
// (codelets/cpu/layer_norm_impl.hpp). The weight gradients are a column's fp32 chain down the rows, split in two
// calls or not.
TEST(LayerNormIsaTest, EveryInstructionSetMatchesTheReferenceAndTheOthersBits) {
  const auto isas = layer_norm_isas();
  const float eps = 1e-5f;
  for (const int width : {1, 7, 33, 256, 768, 1000}) {
    for (const int rows : {1, 5, 13}) {
      for (const bool affine : {true, false}) {
        SCOPED_TRACE(test::concat("width ", width, ", rows ", rows, affine ? ", affine" : ", plain"));
        const std::size_t count = static_cast<std::size_t>(rows) * width;
        auto x = random_vector(count, 71, -2.0f, 2.0f);
        for (float& v : x) v += 10.0f;
        const auto w = random_vector(static_cast<std::size_t>(width), 72, 0.5f, 1.5f);
        const auto b = random_vector(static_cast<std::size_t>(width), 73, -0.5f, 0.5f);
        const auto dy = random_vector(count, 74);
        const float* wp = affine ? w.data() : nullptr;
        const float* bp = affine ? b.data() : nullptr;
        const auto ref = reference_layer_norm(rows, width, eps, x, affine ? &w : nullptr, affine ? &b : nullptr, dy);
        std::vector<LayerNormOutputs> outs;
        // The weight gradients, given the statistics, as one fp32 chain per column down the rows: the operations
        // codelets/cuda/layer_norm.cu repeats for the CPU's bits.
        auto stats = nan_vector(2 * static_cast<std::size_t>(rows));
        auto scratch = nan_vector(count);
        isas[0].fwd(rows, width, eps, x.data(), wp, bp, scratch.data(), stats.data());
        std::vector<float> chain_dw(static_cast<std::size_t>(width), 0.0f), chain_db(chain_dw);
        for (int i = 0; i < rows; ++i) {
          for (int j = 0; j < width; ++j) {
            const std::size_t at = static_cast<std::size_t>(i) * width + j;
            chain_dw[static_cast<std::size_t>(j)] += dy[at] * ((x[at] - stats[2 * i]) * stats[2 * i + 1]);
            chain_db[static_cast<std::size_t>(j)] += dy[at];
          }
        }
        for (const LayerNormIsa& isa : isas) {
          SCOPED_TRACE(isa.name);
          LayerNormOutputs o{nan_vector(count), nan_vector(2 * static_cast<std::size_t>(rows)), nan_vector(count),
                             nan_vector(static_cast<std::size_t>(width)), nan_vector(static_cast<std::size_t>(width))};
          isa.fwd(rows, width, eps, x.data(), wp, bp, o.y.data(), o.stats.data());
          isa.bwd_data(rows, width, x.data(), o.stats.data(), wp, dy.data(), o.dx.data());
          isa.bwd_weights(rows, width, x.data(), o.stats.data(), dy.data(), 0, o.dw.data(), o.db.data());
          EXPECT_TRUE(all_close(o.y, ref.y, 1e-5));
          EXPECT_TRUE(all_close(o.dx, ref.dx, 1e-5));
          EXPECT_TRUE(all_close(o.dw, ref.dw, 1e-5));
          EXPECT_TRUE(all_close(o.db, ref.db, 1e-6));
          const int first = rows / 2;
          const std::size_t skip = static_cast<std::size_t>(first) * width;
          auto dw2 = nan_vector(o.dw.size());
          auto db2 = nan_vector(o.db.size());
          isa.bwd_weights(first, width, x.data(), o.stats.data(), dy.data(), 0, dw2.data(), db2.data());
          isa.bwd_weights(rows - first, width, x.data() + skip, o.stats.data() + 2 * first, dy.data() + skip, 1,
                          dw2.data(), db2.data());
          EXPECT_TRUE(bitwise_equal(dw2, o.dw));
          EXPECT_TRUE(bitwise_equal(db2, o.db));
          EXPECT_TRUE(bitwise_equal(o.dw, chain_dw));
          EXPECT_TRUE(bitwise_equal(o.db, chain_db));
          if (!outs.empty()) {
            EXPECT_TRUE(bitwise_equal(o.y, outs[0].y)) << "y against " << isas[0].name;
            EXPECT_TRUE(bitwise_equal(o.stats, outs[0].stats)) << "stats against " << isas[0].name;
            EXPECT_TRUE(bitwise_equal(o.dx, outs[0].dx)) << "dx against " << isas[0].name;
            EXPECT_TRUE(bitwise_equal(o.dw, outs[0].dw)) << "dw against " << isas[0].name;
            EXPECT_TRUE(bitwise_equal(o.db, outs[0].db)) << "db against " << isas[0].name;
          }
          outs.push_back(std::move(o));
        }
      }
    }
  }
  if (isas.size() < 3) {
    GTEST_SKIP() << (isas.size() == 1 ? "generic only: AVX2 and AVX-512 need a CPU that has them"
                                      : "generic and avx2: AVX-512 needs a CPU that has it")
                 << ", DTNN_MAX_CPU_ISA not below";
  }
}

// ---------------------------------------------------------------------------------------------------------------
// GELU, tanh approximation

TEST(GeluTanhKernelTest, MatchesTheFormulaAndItsDerivativeInDouble) {
  const auto x = random_vector(4096, 41, -8.0f, 8.0f);
  const auto dy = random_vector(x.size(), 42);
  std::vector<float> y(x.size()), dx(x.size());
  gelu_tanh_fwd(x.size(), x.data(), y.data());
  gelu_tanh_bwd_data(x.size(), x.data(), dy.data(), dx.data());
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  auto f = [k](double v) { return 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v))); };
  std::vector<double> want_y(x.size()), want_dx(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    want_y[i] = f(v);
    const double h = 1e-6;
    want_dx[i] = dy[i] * (f(v + h) - f(v - h)) / (2.0 * h);
  }
  EXPECT_TRUE(all_close(y, want_y, 1e-6));
  EXPECT_TRUE(all_close(dx, want_dx, 1e-5));
  // It is not the exact GELU: at x = 1 the two differ by about 1.6e-4.
  float exact = 0.0f;
  float approx = 0.0f;
  const float one = 1.0f;
  gelu_fwd(1, &one, &exact);
  gelu_tanh_fwd(1, &one, &approx);
  EXPECT_GT(std::abs(exact - approx), 1e-4f);
}

// The tails: no cancellation on the left (x / (1 + exp(-2u)) keeps the relative accuracy), x itself on the right,
// and no NaN or inf at the arguments the exponential's clamp meets.
TEST(GeluTanhKernelTest, TailsKeepTheirRelativeAccuracy) {
  const std::vector<float> x = {-5.0f, -7.0f, -30.0f, -1e30f, 5.0f, 30.0f, 1e30f, 0.0f};
  std::vector<float> y(x.size());
  gelu_tanh_fwd(x.size(), x.data(), y.data());
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double u = k * (v + 0.044715 * v * v * v);
    const double want = v / (1.0 + std::exp(std::min(-2.0 * u, 700.0)));
    EXPECT_TRUE(std::isfinite(y[i])) << x[i];
    // u's own float rounding (~1 ulp of ~28 at x = -7) moves exp(-2u) by ~2e-6 relative, as in any float GELU.
    EXPECT_NEAR(y[i], want, 1e-5 * std::abs(want) + 1e-37) << x[i];
  }
}

// exp(x - shift) within 2 ulp over the softmax's range of arguments, the same bits from the AVX2 and AVX-512 loops
// (the lanes are independent: the vector width changes no bit), and the clamp's ends: tiny, finite to 88.3, inf.
TEST(VectorMathTest, ExpIsWithinTwoUlpAndTheSameBitsOnEveryVectorWidth) {
  auto x = random_vector(10007, 61, -87.0f, 0.0f);
  x.push_back(0.0f);
  x.push_back(-87.3f);
  std::vector<float> y(x.size());
  exp_shifted(x.size(), x.data(), 0.0f, y.data());
  double worst_ulp = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(static_cast<double>(x[i]));
    const double ulp = std::nextafter(static_cast<float>(want), std::numeric_limits<float>::infinity()) -
                       static_cast<float>(want);
    worst_ulp = std::max(worst_ulp, std::abs(y[i] - want) / ulp);
  }
  EXPECT_LE(worst_ulp, 2.0);
  const float ends[3] = {-1e30f, 88.3f, 1e30f};
  float at_ends[3] = {0.0f, 0.0f, 0.0f};
  exp_shifted(3, ends, 0.0f, at_ends);
  EXPECT_TRUE(at_ends[0] >= 0.0f && at_ends[0] < 1e-37f) << at_ends[0];
  EXPECT_NEAR(at_ends[1], std::exp(double{88.3f}), 2.5e-7 * std::exp(double{88.3f}));
  EXPECT_EQ(at_ends[2], std::numeric_limits<float>::infinity());
  if (!cpu_has_avx512()) GTEST_SKIP() << "the AVX-512 loop needs a CPU with AVX-512 (the AVX2 one ran above)";
  std::vector<float> wide(x.size()), narrow(x.size());
  exp_shifted_avx512(x.size(), x.data(), 0.5f, wide.data());
  exp_shifted_avx2(x.size(), x.data(), 0.5f, narrow.data());
  EXPECT_TRUE(std::equal(wide.begin(), wide.end(), narrow.begin()));
  // An odd split of the array changes no bit either.
  std::vector<float> split(x.size());
  exp_shifted_avx512(13, x.data(), 0.5f, split.data());
  exp_shifted_avx512(x.size() - 13, x.data() + 13, 0.5f, split.data() + 13);
  EXPECT_TRUE(std::equal(wide.begin(), wide.end(), split.begin()));
}

// ---------------------------------------------------------------------------------------------------------------
// GELU, exact: x Phi(x) with Phi through the normal tail (vector_math_impl.hpp), per instruction set

struct GeluIsa {
  const char* name;
  void (*fwd)(std::size_t, const float*, float*);
  void (*bwd)(std::size_t, const float*, const float*, float*);
};

// The dispatch (the level DTNN_MAX_CPU_ISA leaves: plain x86-64 under DTNN_MAX_CPU_ISA=generic) and each
// instruction set's entry point this CPU runs.
std::vector<GeluIsa> gelu_isas() {
  std::vector<GeluIsa> isas = {{"dispatch", gelu_fwd, gelu_bwd_data}};
  if (cpu_has_avx2_fma()) isas.push_back({"avx2", gelu_fwd_avx2, gelu_bwd_data_avx2});
  if (cpu_has_avx512()) isas.push_back({"avx512", gelu_fwd_avx512, gelu_bwd_data_avx512});
  return isas;
}

// The float spacing at a double value, on the side of the nearest float that the value lies (denormals included).
double float_ulp_at(double ref) {
  const float f = static_cast<float>(std::abs(ref));
  if (f == 0.0f) return std::numeric_limits<float>::denorm_min();
  const float next = std::abs(ref) >= f ? std::nextafter(f, std::numeric_limits<float>::infinity())
                                        : std::nextafter(f, 0.0f);
  return std::abs(double{next} - double{f});
}

// x in [-15, 15] every 1e-4 and a few tiny ones: the left tail down past where x Phi(x) underflows (x = -14.36).
std::vector<float> gelu_sweep() {
  std::vector<float> x;
  for (int i = -150000; i <= 150000; ++i) x.push_back(static_cast<float>(i * 1e-4));
  for (float v : {1e-30f, 1e-38f, 1e-45f, 3e-3f}) {
    x.push_back(v);
    x.push_back(-v);
  }
  return x;
}

// Against erfc and exp in double: y within 5 ulp of x Phi(x) wherever it is, denormals included (measured over every
// float of [-13.2, 13.2] by bench/gelu_exact --accuracy: 4.6, 4.9 without FMA); the derivative Phi(x) + x phi(x)
// within 6 ulp plus 5e-8, the absolute part for its zero at x ~ -0.75, where it cancels (measured: 1.6e-7 absolute at
// most, 2.6 ulp of ~0.5).
TEST(GeluKernelTest, MatchesErfcInDoubleOnEveryInstructionSetIncludingTheTails) {
  const auto x = gelu_sweep();
  const auto dy = random_vector(x.size(), 81, 0.5f, 2.0f);
  const std::vector<float> ones(x.size(), 1.0f);
  const double inv_sqrt2 = 1.0 / std::sqrt(2.0);
  const double inv_sqrt2pi = 1.0 / std::sqrt(2.0 * 3.14159265358979323846);
  for (const auto& isa : gelu_isas()) {
    auto y = nan_vector(x.size());
    auto d1 = nan_vector(x.size());
    auto dx = nan_vector(x.size());
    isa.fwd(x.size(), x.data(), y.data());
    isa.bwd(x.size(), x.data(), ones.data(), d1.data());
    isa.bwd(x.size(), x.data(), dy.data(), dx.data());
    double worst_y = 0.0;
    double worst_d = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      const double phi = 0.5 * std::erfc(-v * inv_sqrt2);
      const double want = v * phi;
      const double want_d = phi + v * inv_sqrt2pi * std::exp(-0.5 * v * v);
      const double ulps_y = std::abs(y[i] - want) / float_ulp_at(want);
      const double ulps_d = std::max(0.0, std::abs(d1[i] - want_d) - 5e-8) / float_ulp_at(want_d);
      worst_y = std::max(worst_y, ulps_y);
      worst_d = std::max(worst_d, ulps_d);
      ASSERT_LE(ulps_y, 5.0) << isa.name << " x = " << x[i] << ": y = " << y[i] << ", want " << want;
      ASSERT_LE(ulps_d, 6.0) << isa.name << " x = " << x[i] << ": dy/dx = " << d1[i] << ", want " << want_d;
      // The incoming gradient only scales the derivative (one more rounding).
      ASSERT_NEAR(dx[i], dy[i] * double{d1[i]}, 0.6 * float_ulp_at(dy[i] * double{d1[i]}))
          << isa.name << " x = " << x[i];
    }
    RecordProperty(std::string(isa.name) + "_worst_ulps", test::concat(worst_y, " fwd, ", worst_d, " bwd"));
  }
}

// The left tail goes to -0 smoothly: |y| falls with x until it underflows, then stays -0, with no jump where the
// exponential's range or the clamp at |x| = 16.2 is met; the derivative likewise to -0, and to 1 on the right. The
// infinities give what x Phi(x) and Phi(x) + x phi(x) give in IEEE arithmetic (inf times 0 is NaN), as PyTorch's GELU
// and the CUDA kernels, which tests/cuda/test_elementwise.cpp holds the CPU's results to.
TEST(GeluKernelTest, TailsGoSmoothlyToZeroAndInfinitiesGiveWhatTheFormulaGives) {
  std::vector<float> x;
  for (int i = 0; i <= 20000; ++i) x.push_back(-3.0f - static_cast<float>(i) * 1e-3f);  // -3 down to -23
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> special = {inf, -inf, nan, -0.0f, 0.0f, -1e30f, 1e30f, -3.4e38f, 3.4e38f};
  const std::vector<float> ones(std::max(x.size(), special.size()), 1.0f);
  for (const auto& isa : gelu_isas()) {
    std::vector<float> y(x.size()), d(x.size());
    isa.fwd(x.size(), x.data(), y.data());
    isa.bwd(x.size(), x.data(), ones.data(), d.data());
    for (std::size_t i = 1; i < x.size(); ++i) {
      ASSERT_TRUE(y[i] <= 0.0f && std::signbit(y[i])) << isa.name << " x = " << x[i] << ": y = " << y[i];
      ASSERT_TRUE(d[i] <= 0.0f && std::signbit(d[i])) << isa.name << " x = " << x[i] << ": dy/dx = " << d[i];
      // Strictly falling while it is a normal float; then non-increasing through the denormals to -0.
      if (std::abs(y[i - 1]) >= std::numeric_limits<float>::min()) {
        ASSERT_LT(std::abs(y[i]), std::abs(y[i - 1])) << isa.name << " x = " << x[i];
      } else {
        ASSERT_LE(std::abs(y[i]), std::abs(y[i - 1])) << isa.name << " x = " << x[i];
      }
      ASSERT_LE(std::abs(d[i]), std::abs(d[i - 1])) << isa.name << " x = " << x[i];
    }
    EXPECT_EQ(y.back(), 0.0f) << isa.name;  // underflowed at x = -14.36, long before -23
    std::vector<float> sy(special.size()), sd(special.size());
    isa.fwd(special.size(), special.data(), sy.data());
    isa.bwd(special.size(), special.data(), ones.data(), sd.data());
    const std::vector<float> want_y = {inf, nan, nan, -0.0f, 0.0f, -0.0f, 1e30f, -0.0f, 3.4e38f};
    const std::vector<float> want_d = {nan, nan, nan, 0.5f, 0.5f, -0.0f, 1.0f, -0.0f, 1.0f};
    for (std::size_t i = 0; i < special.size(); ++i) {
      // Bit equality: -0 is not 0 here, and NaN is whichever NaN as long as it is one.
      const auto same = [](float got, float want) {
        if (std::isnan(want)) return std::isnan(got);
        return std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want);
      };
      EXPECT_TRUE(same(sy[i], want_y[i])) << isa.name << " x = " << special[i] << ": y = " << sy[i];
      EXPECT_TRUE(same(sd[i], want_d[i])) << isa.name << " x = " << special[i] << ": dy/dx = " << sd[i];
    }
  }
}

// The same bits from the AVX2 and AVX-512 loops (the lanes are independent) and from an odd split of the array.
TEST(GeluKernelTest, SameBitsOnEveryVectorWidthAndSplit) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "needs a CPU with AVX-512 to compare with the AVX2 loop";
  const auto x = random_vector(10007, 83, -16.0f, 16.0f);
  const auto dy = random_vector(x.size(), 84);
  std::vector<float> wide(x.size()), narrow(x.size()), split(x.size());
  gelu_fwd_avx512(x.size(), x.data(), wide.data());
  gelu_fwd_avx2(x.size(), x.data(), narrow.data());
  EXPECT_TRUE(std::equal(wide.begin(), wide.end(), narrow.begin()));
  gelu_fwd_avx512(13, x.data(), split.data());
  gelu_fwd_avx512(x.size() - 13, x.data() + 13, split.data() + 13);
  EXPECT_TRUE(std::equal(wide.begin(), wide.end(), split.begin()));
  gelu_bwd_data_avx512(x.size(), x.data(), dy.data(), wide.data());
  gelu_bwd_data_avx2(x.size(), x.data(), dy.data(), narrow.data());
  EXPECT_TRUE(std::equal(wide.begin(), wide.end(), narrow.begin()));
  gelu_bwd_data_avx512(13, x.data(), dy.data(), split.data());
  gelu_bwd_data_avx512(x.size() - 13, x.data() + 13, dy.data() + 13, split.data() + 13);
  EXPECT_TRUE(std::equal(wide.begin(), wide.end(), split.begin()));
}

// ---------------------------------------------------------------------------------------------------------------
// Embedding

TEST(EmbeddingKernelTest, LooksUpRowsAndAddsGradientsInRowOrderSkippingPadding) {
  const int num = 5, dim = 3;
  const auto w = random_vector(static_cast<std::size_t>(num) * dim, 51);
  const std::vector<std::int32_t> ids = {4, 0, 4, 2, 1, 4};
  const int rows = static_cast<int>(ids.size());
  auto y = nan_vector(static_cast<std::size_t>(rows) * dim);
  embedding_fwd(rows, dim, num, ids.data(), w.data(), y.data());
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < dim; ++j) {
      EXPECT_EQ(y[static_cast<std::size_t>(i * dim + j)], w[static_cast<std::size_t>(ids[i] * dim + j)]);
    }
  }
  const auto dy = random_vector(y.size(), 52);
  for (int padding : {-1, 2}) {
    auto dw = nan_vector(w.size());
    embedding_bwd_weights(rows, dim, num, padding, ids.data(), dy.data(), 0, dw.data());
    // Rows 0-2 and then 3-5 accumulated: the same additions in the same order.
    auto split = nan_vector(w.size());
    embedding_bwd_weights(3, dim, num, padding, ids.data(), dy.data(), 0, split.data());
    embedding_bwd_weights(rows - 3, dim, num, padding, ids.data() + 3, dy.data() + 3 * dim, 1, split.data());
    EXPECT_EQ(split, dw);
    for (int v = 0; v < num; ++v) {
      for (int j = 0; j < dim; ++j) {
        float want = 0.0f;  // float, in row order: the kernel's sums are exactly these
        for (int i = 0; i < rows; ++i) {
          if (ids[static_cast<std::size_t>(i)] == v && v != padding) want += dy[static_cast<std::size_t>(i * dim + j)];
        }
        EXPECT_EQ(dw[static_cast<std::size_t>(v * dim + j)], want) << "row " << v << " padding " << padding;
      }
    }
  }
}

TEST(EmbeddingKernelTest, IdOutsideTheTableIsADataErrorNamingIt) {
  const std::vector<float> w(6, 1.0f);
  std::vector<float> y(6);
  for (std::int32_t bad : {3, -2}) {
    const std::vector<std::int32_t> ids = {0, bad};
    EXPECT_TRUE(test_support::throws_with<DataError>([&] { embedding_fwd(2, 2, 3, ids.data(), w.data(), y.data()); },
                                                     {"embedding: token id " + std::to_string(bad) + " in row 1",
                                                      "expected 0 <= id < num_embeddings=3"}));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Positional encodings

TEST(PositionalKernelTest, AddsTheTableAndSumsItsGradientInSampleOrder) {
  const int n = 4, seq = 3, dim = 5, max_len = 6;
  const auto x = random_vector(static_cast<std::size_t>(n * seq * dim), 71);
  const auto table = random_vector(static_cast<std::size_t>(max_len * dim), 72);
  auto y = nan_vector(x.size());
  positional_add_fwd(n, seq, dim, x.data(), table.data(), y.data());
  for (std::size_t k = 0; k < x.size(); ++k) EXPECT_EQ(y[k], x[k] + table[k % (seq * dim)]) << k;
  const auto dy = random_vector(x.size(), 73);
  auto dw = nan_vector(table.size());
  positional_bwd_weights(n, seq, dim, max_len, dy.data(), 0, dw.data());
  for (int k = 0; k < max_len * dim; ++k) {
    float want = 0.0f;  // float, in sample order: the kernel's sums are exactly these
    for (int i = 0; i < n && k < seq * dim; ++i) want += dy[static_cast<std::size_t>(i * seq * dim + k)];
    EXPECT_EQ(dw[static_cast<std::size_t>(k)], want) << k;
  }
  auto split = nan_vector(table.size());
  positional_bwd_weights(1, seq, dim, max_len, dy.data(), 0, split.data());
  positional_bwd_weights(n - 1, seq, dim, max_len, dy.data() + seq * dim, 1, split.data());
  EXPECT_EQ(split, dw);
}

// ---------------------------------------------------------------------------------------------------------------
// Scaled dot-product attention

struct AttentionReference {
  std::vector<double> probs, ctx, dqkv;
};

// Forward and backward-data in double from the definitions, one (sample, head) at a time; with drop, probability
// (h, q, k) of sample first_row + i is kept (times the scale) when its dropout_draw is >= the threshold.
AttentionReference reference_attention(const AttentionShape& a, int n, const std::vector<float>& qkv,
                                       const std::vector<float>& dctx, const DropoutParams* drop = nullptr,
                                       std::int64_t first_row = 0) {
  const int s = a.seq, d = a.head_dim, e = a.heads * a.head_dim, row = 3 * e;
  AttentionReference r;
  r.probs.assign(static_cast<std::size_t>(n * a.heads * s * s), 0.0);
  r.ctx.assign(static_cast<std::size_t>(n * s * e), 0.0);
  r.dqkv.assign(qkv.size(), 0.0);
  auto at = [&](int i, int pos, int part, int h, int j) {
    return static_cast<std::size_t>((i * s + pos) * row + part * e + h * d + j);
  };
  for (int i = 0; i < n; ++i) {
    for (int h = 0; h < a.heads; ++h) {
      double* p = r.probs.data() + static_cast<std::size_t>((i * a.heads + h) * s * s);
      auto mask = [&](int q, int k) {
        if (drop == nullptr) return 1.0;
        const auto e = static_cast<std::uint64_t>((h * s + q) * s + k);
        const bool keep = dropout_draw(drop->seed, drop->step, first_row + i, e) >= drop->threshold;
        return keep ? static_cast<double>(drop->scale) : 0.0;
      };
      for (int q = 0; q < s; ++q) {
        const int keys = a.causal ? q + 1 : s;
        double m = -INFINITY;
        for (int k = 0; k < keys; ++k) {
          double dot = 0.0;
          for (int j = 0; j < d; ++j) dot += static_cast<double>(qkv[at(i, q, 0, h, j)]) * qkv[at(i, k, 1, h, j)];
          p[q * s + k] = dot * a.scale;
          m = std::max(m, p[q * s + k]);
        }
        double sum = 0.0;
        for (int k = 0; k < keys; ++k) sum += p[q * s + k] = std::exp(p[q * s + k] - m);
        for (int k = 0; k < keys; ++k) p[q * s + k] /= sum;
        for (int j = 0; j < d; ++j) {
          double c = 0.0;
          for (int k = 0; k < keys; ++k) c += p[q * s + k] * mask(q, k) * qkv[at(i, k, 2, h, j)];
          r.ctx[static_cast<std::size_t>((i * s + q) * e + h * d + j)] = c;
        }
        // Backward of this query's row: dp, ds, then its share of dq, dk, dv.
        std::vector<double> dp(static_cast<std::size_t>(keys));
        double shift = 0.0;
        for (int k = 0; k < keys; ++k) {
          double g = 0.0;
          for (int j = 0; j < d; ++j) {
            g += dctx[static_cast<std::size_t>((i * s + q) * e + h * d + j)] * qkv[at(i, k, 2, h, j)];
          }
          dp[static_cast<std::size_t>(k)] = g * mask(q, k);
          shift += dp[static_cast<std::size_t>(k)] * p[q * s + k];
        }
        for (int k = 0; k < keys; ++k) {
          const double ds = p[q * s + k] * (dp[static_cast<std::size_t>(k)] - shift) * a.scale;
          for (int j = 0; j < d; ++j) {
            r.dqkv[at(i, q, 0, h, j)] += ds * qkv[at(i, k, 1, h, j)];
            r.dqkv[at(i, k, 1, h, j)] += ds * qkv[at(i, q, 0, h, j)];
            r.dqkv[at(i, k, 2, h, j)] +=
                p[q * s + k] * mask(q, k) * dctx[static_cast<std::size_t>((i * s + q) * e + h * d + j)];
          }
        }
      }
    }
  }
  return r;
}

struct AttentionCase {
  int n, seq, heads, head_dim;
  bool causal;
};

class AttentionKernelTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionKernelTest, MatchesDoublePrecisionReference) {
  const auto [n, seq, heads, d, causal] = GetParam();
  const AttentionShape a{seq, heads, d, causal ? 1 : 0, static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)))};
  const std::size_t e = static_cast<std::size_t>(heads) * d;
  const auto qkv = random_vector(static_cast<std::size_t>(n * seq) * 3 * e, 61, -2.0f, 2.0f);
  const auto dctx = random_vector(static_cast<std::size_t>(n * seq) * e, 62);
  const auto ref = reference_attention(a, n, qkv, dctx);
  auto probs = nan_vector(ref.probs.size());
  auto ctx = nan_vector(ref.ctx.size());
  attention_fwd(a, n, 0, nullptr, qkv.data(), probs.data(), ctx.data());
  EXPECT_TRUE(all_close(probs, ref.probs, 1e-6));
  EXPECT_TRUE(all_close(ctx, ref.ctx, 1e-5));
  auto dqkv = nan_vector(qkv.size());
  attention_bwd_data(a, n, 0, nullptr, qkv.data(), probs.data(), dctx.data(), dqkv.data());
  EXPECT_TRUE(all_close(dqkv, ref.dqkv, 1e-5));
}

// Attention dropout (rate 0.25): the masks are dropout_draw's elements (h seq + q) seq + k of the sample's row in
// the batch, so the kernel matches the reference, and two calls on rows [0, 1) and [1, n) with first_row 0 and 1
// give the bits of one call on all rows.
TEST(AttentionKernelTest, DropoutMasksFollowTheSampleRowAndMatchTheReference) {
  const int n = 3, seq = 9, heads = 2, d = 4;
  const AttentionShape a{seq, heads, d, 1, 0.5f};
  const std::size_t e = static_cast<std::size_t>(heads) * d;
  const DropoutParams drop = dropout_params(77, 5, 0.25);
  const auto qkv = random_vector(static_cast<std::size_t>(n * seq) * 3 * e, 63, -2.0f, 2.0f);
  const auto dctx = random_vector(static_cast<std::size_t>(n * seq) * e, 64);
  const auto ref = reference_attention(a, n, qkv, dctx, &drop, 0);
  const auto plain = reference_attention(a, n, qkv, dctx);
  std::vector<float> probs(ref.probs.size()), ctx(ref.ctx.size()), dqkv(qkv.size());
  attention_fwd(a, n, 0, &drop, qkv.data(), probs.data(), ctx.data());
  attention_bwd_data(a, n, 0, &drop, qkv.data(), probs.data(), dctx.data(), dqkv.data());
  EXPECT_TRUE(all_close(probs, ref.probs, 1e-6));  // kept before dropout, for the softmax's backward
  EXPECT_TRUE(all_close(ctx, ref.ctx, 1e-5));
  EXPECT_TRUE(all_close(dqkv, ref.dqkv, 1e-5));
  EXPECT_FALSE(all_close(ctx, plain.ctx, 1e-3));  // something was dropped
  std::vector<float> ctx_split(ctx.size()), probs_split(probs.size()), dqkv_split(dqkv.size());
  const std::size_t per_qkv = static_cast<std::size_t>(seq) * 3 * e;
  const std::size_t per_ctx = static_cast<std::size_t>(seq) * e;
  const std::size_t per_probs = static_cast<std::size_t>(heads * seq * seq);
  attention_fwd(a, 1, 0, &drop, qkv.data(), probs_split.data(), ctx_split.data());
  attention_fwd(a, n - 1, 1, &drop, qkv.data() + per_qkv, probs_split.data() + per_probs, ctx_split.data() + per_ctx);
  attention_bwd_data(a, 1, 0, &drop, qkv.data(), probs_split.data(), dctx.data(), dqkv_split.data());
  attention_bwd_data(a, n - 1, 1, &drop, qkv.data() + per_qkv, probs_split.data() + per_probs,
                     dctx.data() + per_ctx, dqkv_split.data() + per_qkv);
  EXPECT_EQ(ctx_split, ctx);
  EXPECT_EQ(dqkv_split, dqkv);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionKernelTest,
                         ::testing::Values(AttentionCase{2, 1, 1, 3, false}, AttentionCase{3, 5, 2, 4, true},
                                           AttentionCase{1, 17, 4, 8, false}, AttentionCase{2, 33, 3, 16, true}),
                         [](const ::testing::TestParamInfo<AttentionCase>& info) {
                           return test::concat("N", info.param.n, "Seq", info.param.seq, "Heads", info.param.heads,
                                               "Dim", info.param.head_dim, info.param.causal ? "Causal" : "Full");
                         });

}  // namespace
}  // namespace dtnn::kernels::cpu
