// SPDX-License-Identifier: Apache-2.0
// Sequences [batch, seq, dim] through the graph: Dense and Softmax on the last axis, the losses over the last axis
// of sequence logits, token cross-entropy against int32 targets in tiles.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "codelets/loss.hpp"
#include "core/errors.hpp"
#include "layers/activations.hpp"
#include "layers/dense.hpp"
#include "support/gradient_check.hpp"
#include "support/throws_with.hpp"

namespace dtnn {
namespace {

using test_support::throws_with;
using testing::check_layer_gradients;
using testing::GradCheckOptions;

void fill_random(Tensor& t, std::uint64_t seed, float low = -1.0f, float high = 1.0f) {
  Rng rng(seed);
  auto a = t.write();
  for (float& v : a.data()) v = rng.uniform(low, high);
}

::testing::AssertionResult bitwise_equal(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i])) {
      return ::testing::AssertionFailure() << "first difference at [" << i << "]: " << got[i] << " vs " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------------------------------------------------------
// Dense on the last axis

TEST(DenseSequenceTest, LastAxisMatchesNumericalGradient) {
  Dense layer(DenseOptions(6, 4));
  check_layer_gradients(layer, {5, 6}, GradCheckOptions{.batch = 3, .tiles = 2});
  EXPECT_EQ(layer.output_shape(), (Shape{5, 4}));
  Dense nobias(DenseOptions(3, 2).bias(false));
  check_layer_gradients(nobias, {2, 4, 3}, GradCheckOptions{.batch = 2, .tiles = 2});
  EXPECT_EQ(nobias.output_shape(), (Shape{2, 4, 2}));
}

// nn.Linear: every position through the same weights, y[i, s] = W x[i, s] + b, against a float64 reference.
TEST(DenseSequenceTest, EveryPositionGoesThroughTheSameWeights) {
  const int n = 3, seq = 7, in = 5, out = 4;
  Dense layer(DenseOptions(in, out));
  layer.set_name("fc");
  layer.build({seq, in});
  Rng rng(3);
  layer.reset_parameters(rng);
  Tensor x({n, seq, in}, 2), y({n, seq, out}, 2);
  fill_random(x, 11);
  layer.forward(x, y, PassContext{});
  const auto xv = x.to_vector();
  const auto w = layer.parameters()[0]->value.to_vector();
  const auto b = layer.parameters()[1]->value.to_vector();
  const auto yv = y.to_vector();
  for (int r = 0; r < n * seq; ++r) {
    for (int o = 0; o < out; ++o) {
      double ref = b[static_cast<std::size_t>(o)];
      for (int k = 0; k < in; ++k) {
        ref += static_cast<double>(w[static_cast<std::size_t>(o * in + k)]) * xv[static_cast<std::size_t>(r * in + k)];
      }
      EXPECT_NEAR(yv[static_cast<std::size_t>(r * out + o)], ref, 1e-5) << "row " << r << " output " << o;
    }
  }
}

// A feature map whose values number in_features is still read as flattened (the CNN classifiers' behaviour).
TEST(DenseSequenceTest, FeatureMapsStillFlattenAndBadInputsNameTheRule) {
  Dense flat(DenseOptions(2 * 3 * 4, 5));
  EXPECT_EQ(flat.build({2, 3, 4}), (Shape{5}));
  Dense last(DenseOptions(4, 5));
  EXPECT_EQ(last.build({2, 3, 4}), (Shape{2, 3, 5}));
  Dense bad(DenseOptions(7, 5));
  bad.set_name("proj");
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { bad.build({3, 6}); },
                                           {"Dense proj: input (3, 6) has 18 values per sample, expected "
                                            "in_features=7 (on the last axis, or in all)"}));
}

// ---------------------------------------------------------------------------------------------------------------
// Softmax over the last axis

TEST(SoftmaxSequenceTest, LastAxisMatchesNumericalGradientAndSumsToOne) {
  Softmax layer(SoftmaxOptions().dim(-1));
  check_layer_gradients(layer, {4, 5}, GradCheckOptions{.batch = 3, .tiles = 3});
  EXPECT_EQ(layer.describe(), "dim -1");
  Softmax middle(SoftmaxOptions().dim(2));
  check_layer_gradients(middle, {2, 3, 4}, GradCheckOptions{.batch = 2, .tiles = 2});

  Softmax sm(SoftmaxOptions().dim(-1));
  sm.build({3, 6});
  Tensor x({2, 3, 6}, 2), y({2, 3, 6}, 2);
  fill_random(x, 5, -30.0f, 30.0f);
  sm.forward(x, y, PassContext{});
  const auto xv = x.to_vector();
  const auto yv = y.to_vector();
  for (int r = 0; r < 6; ++r) {
    double m = -1e30, sum = 0.0;
    for (int j = 0; j < 6; ++j) m = std::max(m, static_cast<double>(xv[static_cast<std::size_t>(r * 6 + j)]));
    for (int j = 0; j < 6; ++j) sum += std::exp(xv[static_cast<std::size_t>(r * 6 + j)] - m);
    for (int j = 0; j < 6; ++j) {
      const double ref = std::exp(xv[static_cast<std::size_t>(r * 6 + j)] - m) / sum;
      EXPECT_NEAR(yv[static_cast<std::size_t>(r * 6 + j)], ref, 1e-6) << "row " << r << " class " << j;
    }
  }
}

TEST(SoftmaxSequenceTest, RejectsADimOutsideTheSample) {
  for (int dim : {0, 3, -3}) {
    Softmax layer(SoftmaxOptions().dim(dim));
    layer.set_name("attn");
    EXPECT_TRUE(throws_with<InvalidArgument>([&] { layer.build({4, 5}); },
                                             {"Softmax attn: input (4, 5)", "dim=" + std::to_string(dim),
                                              "1..2 or -2..-1"}));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Losses over the last axis

// Sequence logits [n, S, V] in tiles give, row for row, the kernel's result on the flattened [n * S, V] rows.
TEST(SequenceLossTest, CategoricalCrossEntropyRunsOverTheLastAxis) {
  const int n = 5, seq = 3, classes = 4;
  Tensor logits({n, seq, classes}, 2), targets({n, seq, classes}, 2), dlogits({n, seq, classes}, 2);
  Tensor stats({2, kLossStats}, 2);
  fill_random(logits, 21, -3.0f, 3.0f);
  {
    auto t = targets.write();
    for (int r = 0; r < n * seq; ++r) t[r * classes + (r * 7) % classes] = 1.0f;
  }
  for (int tile = 0; tile < 2; ++tile) {
    codelets::submit_loss_fwd_bwd({"loss", 0}, codelets::LossKind::kCategoricalCrossEntropy, logits, targets, 0.5f,
                                  dlogits, stats, tile);
  }
  const auto z = logits.to_vector();
  const auto t = targets.to_vector();
  std::vector<float> want(z.size());
  float want_stats[kLossStats];
  kernels::cpu::softmax_xent_fwd_bwd(n * seq, classes, z.data(), t.data(), 0.5f, want.data(), want_stats);
  EXPECT_TRUE(bitwise_equal(dlogits.to_vector(), want));
  const auto s = stats.to_vector();
  EXPECT_EQ(s[kCounted] + s[kLossStats + kCounted], static_cast<float>(n * seq));
  EXPECT_NEAR(s[kLossSum] + s[kLossStats + kLossSum], want_stats[kLossSum], 1e-5);
}

Tensor token_ids(Shape shape, int tiles, const std::vector<std::int32_t>& ids) {
  Tensor t(std::move(shape), TensorOptions().dtype(DType::kInt32).tiles(tiles));
  t.copy_from_values<std::int32_t>(ids);
  return t;
}

// Int32 targets [n, S] in 1 to 3 tiles: the gradient is bitwise the kernel's on all rows, the counted rows skip
// ignore_index, and the tile count changes no bit of the gradient.
TEST(TokenCrossEntropyTest, Int32TargetsInTilesMatchTheKernelWithIgnoredPositions) {
  const int n = 4, seq = 5, vocab = 7;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n * seq));
  for (int i = 0; i < n * seq; ++i) ids[static_cast<std::size_t>(i)] = i % 6 == 5 ? -100 : (i * 3) % vocab;
  const TokenXentParams params{-100, 0.1f};
  const float scale = 1.0f / 17.0f;  // the 17 counted targets
  std::vector<float> first;
  for (int tiles : {1, 2, 3}) {
    Tensor logits({n, seq, vocab}, tiles), dlogits({n, seq, vocab}, tiles), stats({tiles, kLossStats}, tiles);
    fill_random(logits, 8, -4.0f, 4.0f);
    const Tensor targets = token_ids({n, seq}, tiles, ids);
    for (int tile = 0; tile < tiles; ++tile) {
      codelets::submit_token_xent_fwd_bwd({"lm_head", 0}, params, logits, targets, scale, dlogits, stats, tile);
    }
    const auto z = logits.to_vector();
    std::vector<float> want(z.size());
    float want_stats[kLossStats];
    kernels::cpu::token_xent_fwd_bwd(n * seq, vocab, z.data(), ids.data(), params, scale, want.data(), want_stats);
    const auto got = dlogits.to_vector();
    EXPECT_TRUE(bitwise_equal(got, want)) << tiles << " tiles";
    if (first.empty()) first = got;
    EXPECT_TRUE(bitwise_equal(got, first)) << tiles << " tiles";
    const auto s = stats.to_vector();
    double counted = 0.0, loss = 0.0;
    for (int tile = 0; tile < tiles; ++tile) {
      counted += s[static_cast<std::size_t>(tile * kLossStats + kCounted)];
      loss += s[static_cast<std::size_t>(tile * kLossStats + kLossSum)];
    }
    EXPECT_EQ(counted, 17.0);
    EXPECT_NEAR(loss, want_stats[kLossSum], 1e-5);
  }
}

TEST(TokenCrossEntropyTest, RefusesFloatTargetsMismatchedShapesAndBadSmoothing) {
  Tensor logits({2, 3, 5}), dlogits({2, 3, 5}), stats({1, kLossStats});
  Tensor float_targets({2, 3});
  EXPECT_TRUE(throws_with<InvalidArgument>(
      [&] {
        codelets::submit_token_xent_fwd_bwd({"head", 0}, TokenXentParams{}, logits, float_targets, 1.0f, dlogits,
                                            stats, 0);
      },
      {"head: targets (2, 3) is float32, expected int32"}));
  const Tensor short_targets = token_ids({2, 2}, 1, {0, 1, 2, 3});
  EXPECT_TRUE(throws_with<InvalidArgument>(
      [&] {
        codelets::submit_token_xent_fwd_bwd({"head", 0}, TokenXentParams{}, logits, short_targets, 1.0f, dlogits,
                                            stats, 0);
      },
      {"head: token cross-entropy of logits (2, 3, 5) against targets (2, 2)", "(3 per sample)"}));
  const Tensor targets = token_ids({2, 3}, 1, {0, 1, 2, 3, 4, 0});
  EXPECT_TRUE(throws_with<InvalidArgument>(
      [&] {
        codelets::submit_token_xent_fwd_bwd({"head", 0}, TokenXentParams{-100, 1.5f}, logits, targets, 1.0f,
                                            dlogits, stats, 0);
      },
      {"head: label_smoothing=1.5, expected 0 <= label_smoothing <= 1"}));
}

}  // namespace
}  // namespace dtnn
