// SPDX-License-Identifier: Apache-2.0
// Sequences [batch, seq, dim] through the graph: Dense and Softmax on the last axis, the losses over the last axis
// of sequence logits, token cross-entropy against int32 targets in tiles; the layers of transformers: LayerNorm,
// Embedding, positional encodings, GELU's tanh approximation, MultiHeadAttention.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "codelets/loss.hpp"
#include "runtime/engine.hpp"
#include "core/errors.hpp"
#include "layers/activations.hpp"
#include "layers/attention.hpp"
#include "layers/dense.hpp"
#include "layers/embedding.hpp"
#include "layers/init.hpp"
#include "layers/layer_norm.hpp"
#include "layers/positional.hpp"
#include "models/sequential.hpp"
#include "support/gradient_check.hpp"
#include "support/throws_with.hpp"
#include "support/tensor_checks.hpp"

namespace dtnn {
namespace {

using test_support::bitwise_equal;
using test_support::fill_random;
using test_support::throws_with;
using testing::check_layer_gradients;
using testing::GradCheckOptions;

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
  EXPECT_EQ(s[kCorrect] + s[kLossStats + kCorrect], want_stats[kCorrect]);
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
    Tensor logits({n, seq, vocab}, tiles), dlogits({n, seq, vocab}, tiles), stats({tiles, kTokenLossStats}, tiles);
    fill_random(logits, 8, -4.0f, 4.0f);
    const Tensor targets = token_ids({n, seq}, tiles, ids);
    for (int tile = 0; tile < tiles; ++tile) {
      codelets::submit_token_xent_fwd_bwd({"lm_head", 0}, params, logits, targets, scale, dlogits, stats, tile);
    }
    const auto z = logits.to_vector();
    std::vector<float> want(z.size());
    float want_stats[kTokenLossStats];
    kernels::cpu::token_xent_fwd_bwd(n * seq, vocab, z.data(), ids.data(), params, scale, want.data(), want_stats);
    const auto got = dlogits.to_vector();
    EXPECT_TRUE(bitwise_equal(got, want)) << tiles << " tiles";
    if (first.empty()) first = got;
    EXPECT_TRUE(bitwise_equal(got, first)) << tiles << " tiles";
    const auto s = stats.to_vector();
    double counted = 0.0, loss = 0.0;
    for (int tile = 0; tile < tiles; ++tile) {
      counted += s[static_cast<std::size_t>(tile * kTokenLossStats + kCounted)];
      loss += s[static_cast<std::size_t>(tile * kTokenLossStats + kLossSum)];
    }
    EXPECT_EQ(counted, 17.0);
    EXPECT_NEAR(loss, want_stats[kLossSum], 1e-5);
  }
}

TEST(TokenCrossEntropyTest, RefusesFloatTargetsMismatchedShapesAndBadSmoothing) {
  Tensor logits({2, 3, 5}), dlogits({2, 3, 5}), stats({1, kTokenLossStats});
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

// ---------------------------------------------------------------------------------------------------------------
// LayerNorm

// Weights away from PyTorch's ones and zeros, so that the checker sees the affine transform in every gradient.
class LayerNormWithRandomAffine : public LayerNorm {
 public:
  using LayerNorm::LayerNorm;
  void reset_parameters(Rng& rng) override {
    auto params = parameters();
    if (params.empty()) return;
    init::uniform(params[0]->value, 0.5f, 1.5f, rng);
    init::uniform(params[1]->value, -0.5f, 0.5f, rng);
  }
};

TEST(LayerNormTest, BackwardMatchesNumericalGradient) {
  LayerNormWithRandomAffine seq(LayerNormOptions(8));
  check_layer_gradients(seq, {5, 8}, GradCheckOptions{.batch = 3, .tiles = 2});
  LayerNormWithRandomAffine features(LayerNormOptions(6).eps(1e-3));
  check_layer_gradients(features, {6}, GradCheckOptions{.batch = 4, .tiles = 3});
  LayerNorm plain(LayerNormOptions(4).elementwise_affine(false));
  check_layer_gradients(plain, {2, 3, 4}, GradCheckOptions{.batch = 2, .tiles = 2});
}

TEST(LayerNormTest, ParametersHavePyTorchsNamesShapesAndInitialValues) {
  LayerNorm ln(LayerNormOptions(5));
  ln.set_name("ln_f");
  EXPECT_EQ(ln.build({3, 5}), (Shape{3, 5}));
  Rng rng(1);
  ln.reset_parameters(rng);
  const auto params = ln.parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0]->name, "weight");
  EXPECT_EQ(params[0]->value.shape(), (Shape{5}));
  EXPECT_EQ(params[0]->value.to_vector(), std::vector<float>(5, 1.0f));
  EXPECT_EQ(params[1]->name, "bias");
  EXPECT_EQ(params[1]->value.to_vector(), std::vector<float>(5, 0.0f));
  EXPECT_EQ(ln.parameter_count(), 10);
  EXPECT_EQ(ln.describe(), "5, eps 1e-05");
  LayerNorm plain(LayerNormOptions(5).elementwise_affine(false));
  plain.build({5});
  EXPECT_TRUE(plain.parameters().empty());
  EXPECT_EQ(plain.describe(), "5, eps 1e-05, no affine");
}

// Each row normalised on its own, the weight gradients adding the rows in batch order tile after tile: outputs,
// input gradients and weight gradients are the same bits whatever the tile count.
TEST(LayerNormTest, TileCountNeverChangesABit) {
  const int n = 6, seq = 4, e = 16;
  auto run = [&](int tiles) {
    LayerNormWithRandomAffine ln{LayerNormOptions(e)};
    ln.set_name("ln");
    ln.build({seq, e});
    Rng rng(5);
    ln.reset_parameters(rng);
    ln.prepare_tiles(tiles);
    Tensor x({n, seq, e}, tiles), y({n, seq, e}, tiles), dy({n, seq, e}, tiles), dx({n, seq, e}, tiles);
    fill_random(x, 6, -3.0f, 3.0f);
    fill_random(dy, 7);
    ln.forward(x, y, PassContext{});
    ln.backward(x, y, dy, &dx, PassContext{});
    auto p = ln.parameters();
    return std::vector<std::vector<float>>{y.to_vector(), dx.to_vector(), p[0]->grad.to_vector(),
                                           p[1]->grad.to_vector()};
  };
  const auto one = run(1);
  for (int tiles : {2, 3}) {
    const auto r = run(tiles);
    EXPECT_TRUE(bitwise_equal(r[0], one[0])) << tiles << " tiles, y";
    EXPECT_TRUE(bitwise_equal(r[1], one[1])) << tiles << " tiles, dx";
    EXPECT_TRUE(bitwise_equal(r[2], one[2])) << tiles << " tiles, weight gradient";
    EXPECT_TRUE(bitwise_equal(r[3], one[3])) << tiles << " tiles, bias gradient";
  }
}

TEST(LayerNormTest, RejectsBadOptionsAndInputs) {
  EXPECT_TRUE(throws_with<InvalidArgument>([] { LayerNorm(LayerNormOptions(0)); },
                                           {"LayerNorm: normalized_shape=0, expected 1 <= normalized_shape"}));
  EXPECT_TRUE(throws_with<InvalidArgument>([] { LayerNorm(LayerNormOptions(4).eps(0.0)); },
                                           {"LayerNorm: eps=0, expected a finite value > 0"}));
  LayerNorm ln(LayerNormOptions(8));
  ln.set_name("blocks.0.ln_1");
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { ln.build({5, 6}); },
                                           {"LayerNorm blocks.0.ln_1: input (5, 6), expected a last axis of "
                                            "normalized_shape=8"}));
}

// ---------------------------------------------------------------------------------------------------------------
// GELU

TEST(GeluTest, TanhApproximationMatchesNumericalGradientAndTheFormula) {
  GELU approx(GELUOptions().approximate("tanh"));
  check_layer_gradients(approx, {3, 5}, GradCheckOptions{.batch = 3, .tiles = 2});
  EXPECT_EQ(approx.describe(), "tanh approximation");
  GELU exact;
  EXPECT_EQ(exact.describe(), "exact (erf)");
  approx.set_name("mlp.act");
  Tensor x({1, 3, 5}), y({1, 3, 5});
  fill_random(x, 3, -4.0f, 4.0f);
  approx.forward(x, y, PassContext{});
  const auto xv = x.to_vector();
  const auto yv = y.to_vector();
  for (std::size_t i = 0; i < xv.size(); ++i) {
    const double v = xv[i];
    const double want = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(yv[i], want, 1e-6 * std::max(1.0, std::abs(want))) << i;
  }
  EXPECT_TRUE(throws_with<InvalidArgument>([] { GELU(GELUOptions().approximate("erf")); },
                                           {"GELU: approximate='erf', expected 'none' or 'tanh'"}));
}

// ---------------------------------------------------------------------------------------------------------------
// Embedding

Tensor embedding_input(int n, int seq, int num, int tiles, std::uint32_t seed) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n * seq));
  Rng rng(seed);
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.uniform01() * static_cast<float>(num)) % num;
  return token_ids({n, seq}, tiles, ids);
}

// Forward picks rows; the table's gradient is, in double, the sum of dy over the positions holding each id, the
// padding row gets none, and the tile count changes no bit of it.
TEST(EmbeddingTest, ForwardPicksRowsAndTheTableGradientMatchesADoubleReference) {
  const int n = 5, seq = 6, num = 7, dim = 4;
  std::vector<float> one_tile;
  for (int tiles : {1, 2, 3}) {
    Embedding emb(EmbeddingOptions(num, dim).padding_idx(-2));
    emb.set_name("wte");
    EXPECT_EQ(emb.build({seq}), (Shape{seq, dim}));
    Rng rng(2);
    emb.reset_parameters(rng);
    emb.prepare_tiles(tiles);
    EXPECT_EQ(emb.padding_row(), 5);
    const Tensor ids = embedding_input(n, seq, num, tiles, 9);
    Tensor y({n, seq, dim}, tiles), dy({n, seq, dim}, tiles);
    fill_random(dy, 4);
    emb.forward(ids, y, PassContext{});
    emb.backward(ids, y, dy, nullptr, PassContext{});
    const auto idv = ids.values_as<std::int32_t>();
    const auto w = emb.parameters()[0]->value.to_vector();
    const auto yv = y.to_vector();
    const auto dyv = dy.to_vector();
    const auto dw = emb.parameters()[0]->grad.to_vector();
    for (int j = 0; j < dim; ++j) EXPECT_EQ(w[static_cast<std::size_t>(5 * dim + j)], 0.0f) << "padding row";
    std::vector<double> want(static_cast<std::size_t>(num * dim), 0.0);
    for (int p = 0; p < n * seq; ++p) {
      const int id = idv[static_cast<std::size_t>(p)];
      for (int j = 0; j < dim; ++j) {
        EXPECT_EQ(yv[static_cast<std::size_t>(p * dim + j)], w[static_cast<std::size_t>(id * dim + j)]);
        if (id != 5) want[static_cast<std::size_t>(id * dim + j)] += dyv[static_cast<std::size_t>(p * dim + j)];
      }
    }
    for (std::size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(dw[k], want[k], 1e-5) << tiles << " tiles, " << k;
    if (one_tile.empty()) one_tile = dw;
    EXPECT_TRUE(bitwise_equal(dw, one_tile)) << tiles << " tiles";
  }
}

TEST(EmbeddingTest, HasPyTorchsNameShapeAndInitialisation) {
  Embedding emb(EmbeddingOptions(300, 64));
  emb.build({10});
  Rng rng(3);
  emb.reset_parameters(rng);
  const auto params = emb.parameters();
  ASSERT_EQ(params.size(), 1u);
  EXPECT_EQ(params[0]->name, "weight");
  EXPECT_EQ(params[0]->value.shape(), (Shape{300, 64}));
  EXPECT_EQ(emb.input_dtype(), DType::kInt32);
  // N(0, 1): the mean and variance of 19,200 draws.
  const auto w = params[0]->value.to_vector();
  double sum = 0.0, squares = 0.0;
  for (float v : w) {
    sum += v;
    squares += static_cast<double>(v) * v;
  }
  const double mean = sum / static_cast<double>(w.size());
  EXPECT_NEAR(mean, 0.0, 0.03);
  EXPECT_NEAR(squares / static_cast<double>(w.size()) - mean * mean, 1.0, 0.05);
}

TEST(EmbeddingTest, AnIdOutsideTheTableFailsItsTaskNamingTheLayer) {
  Embedding emb(EmbeddingOptions(4, 2));
  emb.set_name("wte");
  emb.build({3});
  const Tensor ids = token_ids({2, 3}, 1, {0, 1, 2, 3, 4, 1});
  Tensor y({2, 3, 2});
  emb.forward(ids, y, PassContext{});
  EXPECT_TRUE(throws_with<RuntimeError>([&] { runtime::Engine::current()->wait_all(); },
                                        {"wte:fwd", "token id 4 in row 4", "expected 0 <= id < num_embeddings=4"}));
}

TEST(EmbeddingTest, RejectsBadOptionsFloatIdsAndAPlaceOtherThanFirst) {
  EXPECT_TRUE(throws_with<InvalidArgument>([] { Embedding(EmbeddingOptions(0, 8)); },
                                           {"Embedding: num_embeddings=0 embedding_dim=8, expected both in 1.."}));
  EXPECT_TRUE(throws_with<InvalidArgument>([] { Embedding(EmbeddingOptions(10, 8).padding_idx(10)); },
                                           {"Embedding: padding_idx=10, expected -10 <= padding_idx < 10"}));
  Embedding emb(EmbeddingOptions(10, 8));
  emb.set_name("wte");
  emb.build({4});
  Tensor float_ids({2, 4}), y({2, 4, 8});
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { emb.forward(float_ids, y, PassContext{}); },
                                           {"wte: ids (2, 4) is float32, expected int32"}));
  Sequential model;
  model.add<Dense>(DenseOptions(4, 4));
  model.add<Embedding>(EmbeddingOptions(10, 8));
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { model.build({4}, 1); },
                                           {"Sequential: layer 1 (Embedding) takes int32 input, expected it first"}));
}

// In a model: int32 ids in, LayerNorm, causal attention, Dense on the last axis, GELU (tanh), Dense back;
// Sequential allocates the input as int32. Two backward passes from the same seed give the same bits, and so do
// transient activations released at their last reader (the scratch of LayerNorm and attention included).
TEST(SequenceModelTest, EmbeddingFirstAllocatesTokenIdsAndTrainsReproducibly) {
  auto make = [] {
    Sequential m;
    m.add<Embedding>(EmbeddingOptions(11, 8).padding_idx(0));
    m.add<LayerNorm>(LayerNormOptions(8));
    m.add<MultiHeadAttention>(MultiHeadAttentionOptions(8, 2).causal(true));
    m.add<Dense>(DenseOptions(8, 16));
    m.add<GELU>(GELUOptions().approximate("tanh"));
    m.add<Dense>(DenseOptions(16, 11));
    m.build({5}, 3);
    return m;
  };
  auto train = [&](Sequential& m, Storage storage) {
    std::vector<Tensor> acts, grads;
    m.allocate(4, 2, acts, &grads, storage);
    EXPECT_EQ(acts[0].dtype(), DType::kInt32);
    EXPECT_EQ(acts.back().shape(), (Shape{4, 5, 11}));
    std::vector<std::int32_t> ids(20);
    for (int i = 0; i < 20; ++i) ids[static_cast<std::size_t>(i)] = (i * 7) % 11;
    acts[0].copy_from_values<std::int32_t>(ids);
    m.forward(acts, PassContext{});
    fill_random(grads.back(), 12);
    m.backward(acts, grads, PassContext{}, [](Layer&) {});
    std::vector<float> all;
    for (const NamedParameter& p : m.named_parameters()) {
      const auto g = p.parameter->grad.to_vector();
      all.insert(all.end(), g.begin(), g.end());
    }
    return all;
  };
  Sequential a = make();
  Sequential b = make();
  Sequential c = make();
  const auto ga = train(a, Storage::kOwned);
  const auto gb = train(b, Storage::kOwned);
  const auto gc = train(c, Storage::kTransient);
  EXPECT_TRUE(bitwise_equal(ga, gb));
  EXPECT_TRUE(bitwise_equal(gc, ga));
  const auto names = a.named_parameters();
  ASSERT_EQ(names.size(), 11u);
  EXPECT_EQ(names[0].name, "0.weight");
  EXPECT_EQ(names[0].parameter->value.shape(), (Shape{11, 8}));
  EXPECT_EQ(names[3].name, "2.in_proj_weight");
  EXPECT_EQ(names[6].name, "2.out_proj.bias");
  // Nothing reaches the padding row.
  for (int j = 0; j < 8; ++j) EXPECT_EQ(ga[static_cast<std::size_t>(j)], 0.0f);
}

// ---------------------------------------------------------------------------------------------------------------
// Positional encodings

TEST(PositionalEncodingTest, LearnedTableMatchesNumericalGradientAndIgnoresTheTileCount) {
  PositionalEncoding learned(PositionalEncodingOptions(7, 4).learned(true));
  check_layer_gradients(learned, {5, 4}, GradCheckOptions{.batch = 3, .tiles = 2});
  EXPECT_EQ(learned.parameters()[0]->name, "weight");
  EXPECT_EQ(learned.parameters()[0]->value.shape(), (Shape{7, 4}));
  EXPECT_EQ(learned.describe(), "learned 7 x 4");
  // The table's gradient: rows past seq are zero, the others the sum over samples, the same bits for 1 to 3 tiles.
  std::vector<float> one;
  for (int tiles : {1, 2, 3}) {
    PositionalEncoding pe(PositionalEncodingOptions(7, 4).learned(true));
    pe.set_name("wpe");
    pe.build({5, 4});
    Rng rng(1);
    pe.reset_parameters(rng);
    pe.prepare_tiles(tiles);
    Tensor x({6, 5, 4}, tiles), y({6, 5, 4}, tiles), dy({6, 5, 4}, tiles), dx({6, 5, 4}, tiles);
    fill_random(x, 2);
    fill_random(dy, 3);
    pe.forward(x, y, PassContext{});
    pe.backward(x, y, dy, &dx, PassContext{});
    const auto g = pe.parameters()[0]->grad.to_vector();
    const auto dyv = dy.to_vector();
    EXPECT_TRUE(bitwise_equal(dx.to_vector(), dyv));
    for (int k = 0; k < 7 * 4; ++k) {
      double want = 0.0;
      for (int i = 0; i < 6 && k < 5 * 4; ++i) want += dyv[static_cast<std::size_t>(i * 20 + k)];
      EXPECT_NEAR(g[static_cast<std::size_t>(k)], want, 1e-6) << tiles << " tiles, " << k;
    }
    if (one.empty()) one = g;
    EXPECT_TRUE(bitwise_equal(g, one)) << tiles << " tiles";
  }
}

TEST(PositionalEncodingTest, SinusoidsFollowTheFormulaAndAreAdded) {
  PositionalEncoding pe(PositionalEncodingOptions(50, 6));
  EXPECT_EQ(pe.build({9, 6}), (Shape{9, 6}));
  EXPECT_TRUE(pe.parameters().empty());
  EXPECT_EQ(pe.describe(), "sinusoidal 50 x 6");
  const auto table = pe.table().to_vector();
  for (int s = 0; s < 50; ++s) {
    for (int i = 0; i < 6; i += 2) {
      const double angle = s / std::pow(10000.0, static_cast<double>(i) / 6.0);
      EXPECT_NEAR(table[static_cast<std::size_t>(s * 6 + i)], std::sin(angle), 1e-6) << s << " " << i;
      EXPECT_NEAR(table[static_cast<std::size_t>(s * 6 + i + 1)], std::cos(angle), 1e-6) << s << " " << i;
    }
  }
  Tensor x({2, 9, 6}, 2), y({2, 9, 6}, 2);
  fill_random(x, 5);
  pe.forward(x, y, PassContext{});
  const auto xv = x.to_vector();
  const auto yv = y.to_vector();
  for (std::size_t k = 0; k < xv.size(); ++k) EXPECT_EQ(yv[k], xv[k] + table[k % 54]) << k;
  PositionalEncoding grad(PositionalEncodingOptions(10, 4));
  check_layer_gradients(grad, {10, 4}, GradCheckOptions{.batch = 2, .tiles = 2});
}

TEST(PositionalEncodingTest, RefusesASequenceLongerThanTheTableAndBadOptions) {
  PositionalEncoding pe(PositionalEncodingOptions(256, 8).learned(true));
  pe.set_name("wpe");
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { pe.build({300, 8}); },
                                           {"PositionalEncoding wpe: input (300, 8), expected (seq, 8) with seq <= "
                                            "max_len=256"}));
  EXPECT_TRUE(throws_with<InvalidArgument>([] { PositionalEncoding(PositionalEncodingOptions(16, 5)); },
                                           {"PositionalEncoding: sinusoidal with dim=5, expected an even dim"}));
  EXPECT_TRUE(throws_with<InvalidArgument>([] { PositionalEncoding(PositionalEncodingOptions(0, 4)); },
                                           {"PositionalEncoding: max_len=0 dim=4, expected both in 1.."}));
}

// ---------------------------------------------------------------------------------------------------------------
// MultiHeadAttention

// Every parameter drawn from U(-0.5, 0.5): the biases too, which PyTorch starts at zero.
class AttentionWithRandomParameters : public MultiHeadAttention {
 public:
  using MultiHeadAttention::MultiHeadAttention;
  void reset_parameters(Rng& rng) override {
    for (Parameter* p : parameters()) init::uniform(p->value, -0.5f, 0.5f, rng);
  }
};

TEST(MultiHeadAttentionTest, BackwardMatchesNumericalGradient) {
  AttentionWithRandomParameters causal(MultiHeadAttentionOptions(6, 2).causal(true));
  check_layer_gradients(causal, {4, 6}, GradCheckOptions{.batch = 3, .tiles = 2});
  AttentionWithRandomParameters full(MultiHeadAttentionOptions(6, 3));
  check_layer_gradients(full, {5, 6}, GradCheckOptions{.batch = 2, .tiles = 2});
  AttentionWithRandomParameters nobias(MultiHeadAttentionOptions(4, 1).bias(false).causal(true));
  check_layer_gradients(nobias, {3, 4}, GradCheckOptions{.batch = 3, .tiles = 3});
  // The masks are a function of (seed, step, row): the same in every evaluation of the checker.
  AttentionWithRandomParameters dropped(MultiHeadAttentionOptions(6, 2).dropout(0.3).seed(4));
  check_layer_gradients(dropped, {5, 6}, GradCheckOptions{.batch = 2, .tiles = 2});
}

// Attention dropout: evaluation is the layer without dropout, bit for bit; training differs from it, changes with
// the step and repeats for a step.
TEST(MultiHeadAttentionTest, DropoutActsInTrainingOnlyAndFollowsTheStep) {
  const int n = 2, seq = 6, e = 8;
  auto run = [&](double rate, int training, std::int64_t step) {
    AttentionWithRandomParameters attn(MultiHeadAttentionOptions(e, 2).dropout(rate).causal(true));
    attn.set_name("attn");
    attn.build({seq, e});
    Rng rng(8);
    attn.reset_parameters(rng);
    Tensor x({n, seq, e}, 2), y({n, seq, e}, 2);
    fill_random(x, 2);
    PassContext ctx;
    ctx.training = training;
    ctx.step = step;
    attn.forward(x, y, ctx);
    return y.to_vector();
  };
  const auto plain = run(0.0, 1, 0);
  EXPECT_TRUE(bitwise_equal(run(0.4, 0, 0), plain));
  const auto step0 = run(0.4, 1, 0);
  EXPECT_FALSE(bitwise_equal(step0, plain));
  EXPECT_TRUE(bitwise_equal(run(0.4, 1, 0), step0));
  EXPECT_FALSE(bitwise_equal(run(0.4, 1, 1), step0));
  EXPECT_TRUE(throws_with<InvalidArgument>([] { MultiHeadAttention(MultiHeadAttentionOptions(8, 2).dropout(1.0)); },
                                           {"MultiHeadAttention: dropout=1, expected 0 <= dropout < 1"}));
  MultiHeadAttention described(MultiHeadAttentionOptions(8, 2).dropout(0.1));
  EXPECT_EQ(described.describe(), "2 heads of 4, dropout 0.1");
}

// nn.MultiheadAttention's forward in double from the same weights: q, k, v = x W_in^T + b_in split in three and
// by head, softmax(q k^T / sqrt(d)) (causal: keys after the query masked out), heads concatenated, out_proj.
std::vector<double> reference_attention(const std::vector<float>& x, int n, int seq, int e, int heads, bool causal,
                                        const std::vector<float>& w_in, const std::vector<float>& b_in,
                                        const std::vector<float>& w_out, const std::vector<float>& b_out) {
  const int d = e / heads;
  std::vector<double> y(static_cast<std::size_t>(n * seq * e));
  for (int i = 0; i < n; ++i) {
    std::vector<double> qkv(static_cast<std::size_t>(seq * 3 * e));
    for (int s = 0; s < seq; ++s) {
      for (int o = 0; o < 3 * e; ++o) {
        double v = b_in[static_cast<std::size_t>(o)];
        for (int k = 0; k < e; ++k) {
          v += static_cast<double>(w_in[static_cast<std::size_t>(o * e + k)]) *
               x[static_cast<std::size_t>((i * seq + s) * e + k)];
        }
        qkv[static_cast<std::size_t>(s * 3 * e + o)] = v;
      }
    }
    std::vector<double> context(static_cast<std::size_t>(seq * e), 0.0);
    for (int h = 0; h < heads; ++h) {
      for (int r = 0; r < seq; ++r) {
        std::vector<double> score(static_cast<std::size_t>(seq), -INFINITY);
        double m = -INFINITY;
        for (int c = 0; c < seq; ++c) {
          if (causal && c > r) continue;
          double dot = 0.0;
          for (int j = 0; j < d; ++j) {
            dot += qkv[static_cast<std::size_t>(r * 3 * e + h * d + j)] *
                   qkv[static_cast<std::size_t>(c * 3 * e + e + h * d + j)];
          }
          score[static_cast<std::size_t>(c)] = dot / std::sqrt(static_cast<double>(d));
          m = std::max(m, score[static_cast<std::size_t>(c)]);
        }
        double sum = 0.0;
        for (double& sc : score) {
          sc = std::exp(sc - m);
          sum += sc;
        }
        for (int c = 0; c < seq; ++c) {
          for (int j = 0; j < d; ++j) {
            context[static_cast<std::size_t>(r * e + h * d + j)] +=
                score[static_cast<std::size_t>(c)] / sum * qkv[static_cast<std::size_t>(c * 3 * e + 2 * e + h * d + j)];
          }
        }
      }
    }
    for (int s = 0; s < seq; ++s) {
      for (int o = 0; o < e; ++o) {
        double v = b_out[static_cast<std::size_t>(o)];
        for (int k = 0; k < e; ++k) {
          v += static_cast<double>(w_out[static_cast<std::size_t>(o * e + k)]) *
               context[static_cast<std::size_t>(s * e + k)];
        }
        y[static_cast<std::size_t>((i * seq + s) * e + o)] = v;
      }
    }
  }
  return y;
}

TEST(MultiHeadAttentionTest, ForwardMatchesADoubleReferenceOfPyTorchsDefinition) {
  const int n = 3, seq = 7, e = 8;
  for (const bool causal : {false, true}) {
    for (const int heads : {1, 2, 4}) {
      AttentionWithRandomParameters attn(MultiHeadAttentionOptions(e, heads).causal(causal));
      attn.build({seq, e});
      Rng rng(17);
      attn.reset_parameters(rng);
      Tensor x({n, seq, e}, 2), y({n, seq, e}, 2);
      fill_random(x, 23, -2.0f, 2.0f);
      attn.forward(x, y, PassContext{});
      const auto p = attn.parameters();
      const auto want = reference_attention(x.to_vector(), n, seq, e, heads, causal, p[0]->value.to_vector(),
                                            p[1]->value.to_vector(), p[2]->value.to_vector(), p[3]->value.to_vector());
      const auto got = y.to_vector();
      for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 2e-5) << "causal " << causal << " heads " << heads << " value " << i;
      }
    }
  }
}

// Changing the input at position t changes no output before t; and a gradient on the outputs before t reaches no
// input from t on.
TEST(MultiHeadAttentionTest, CausalMaskKeepsTheFutureOut) {
  const int n = 2, seq = 6, e = 4, t = 3;
  AttentionWithRandomParameters attn(MultiHeadAttentionOptions(e, 2).causal(true));
  attn.build({seq, e});
  Rng rng(4);
  attn.reset_parameters(rng);
  attn.prepare_tiles(2);
  Tensor x({n, seq, e}, 2), y({n, seq, e}, 2), changed({n, seq, e}, 2), y2({n, seq, e}, 2);
  fill_random(x, 1);
  {
    const auto xv = x.to_vector();
    auto c = changed.write();
    for (std::size_t i = 0; i < xv.size(); ++i) c[static_cast<std::int64_t>(i)] = xv[i];
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < e; ++j) c[(i * seq + t) * e + j] += 5.0f;
    }
  }
  attn.forward(x, y, PassContext{});
  attn.forward(changed, y2, PassContext{});
  const auto a = y.to_vector();
  const auto b = y2.to_vector();
  for (int i = 0; i < n; ++i) {
    for (int s = 0; s < seq; ++s) {
      bool same = true;
      for (int j = 0; j < e; ++j) {
        const std::size_t k = static_cast<std::size_t>((i * seq + s) * e + j);
        same = same && std::bit_cast<std::uint32_t>(a[k]) == std::bit_cast<std::uint32_t>(b[k]);
      }
      EXPECT_EQ(same, s < t) << "sample " << i << " position " << s;
    }
  }
  Tensor dy({n, seq, e}, 2), dx({n, seq, e}, 2);
  {
    auto g = dy.write();
    Rng r(9);
    for (int i = 0; i < n; ++i) {
      for (int s = 0; s < t; ++s) {
        for (int j = 0; j < e; ++j) g[(i * seq + s) * e + j] = r.uniform(-1.0f, 1.0f);
      }
    }
  }
  attn.backward(x, y, dy, &dx, PassContext{});
  const auto g = dx.to_vector();
  for (int i = 0; i < n; ++i) {
    for (int s = 0; s < seq; ++s) {
      double magnitude = 0.0;
      for (int j = 0; j < e; ++j) magnitude += std::abs(g[static_cast<std::size_t>((i * seq + s) * e + j)]);
      if (s >= t) {
        EXPECT_EQ(magnitude, 0.0) << "sample " << i << " position " << s;
      } else {
        EXPECT_GT(magnitude, 0.0) << "sample " << i << " position " << s;
      }
    }
  }
}

TEST(MultiHeadAttentionTest, HasPyTorchsParameterNamesShapesAndCount) {
  MultiHeadAttention attn(MultiHeadAttentionOptions(12, 3).causal(true));
  attn.set_name("attn");
  EXPECT_EQ(attn.build({5, 12}), (Shape{5, 12}));
  Rng rng(1);
  attn.reset_parameters(rng);
  const auto p = attn.parameters();
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0]->name, "in_proj_weight");
  EXPECT_EQ(p[0]->value.shape(), (Shape{36, 12}));
  EXPECT_EQ(p[1]->name, "in_proj_bias");
  EXPECT_EQ(p[1]->value.to_vector(), std::vector<float>(36, 0.0f));
  EXPECT_EQ(p[2]->name, "out_proj.weight");
  EXPECT_EQ(p[2]->value.shape(), (Shape{12, 12}));
  EXPECT_EQ(p[3]->name, "out_proj.bias");
  // nn.MultiheadAttention(12, 3): 4 E^2 + 4 E.
  EXPECT_EQ(attn.parameter_count(), 4 * 144 + 48);
  // The probabilities kept for backward: 3 heads x 5 x 5 floats a sample.
  EXPECT_EQ(attn.describe(), "3 heads of 4, causal, scores 300 B/sample");
  const float bound = std::sqrt(6.0f / 48.0f);  // xavier_uniform_ on [3E, E]
  for (float v : p[0]->value.to_vector()) ASSERT_LE(std::abs(v), bound);
  MultiHeadAttention nobias(MultiHeadAttentionOptions(12, 3).bias(false));
  nobias.build({5, 12});
  EXPECT_EQ(nobias.parameter_count(), 4 * 144);
}

TEST(MultiHeadAttentionTest, RejectsHeadsNotDividingEmbedDimAndBadInputs) {
  EXPECT_TRUE(throws_with<InvalidArgument>([] { MultiHeadAttention(MultiHeadAttentionOptions(10, 3)); },
                                           {"MultiHeadAttention: embed_dim=10 with num_heads=3: embed_dim must be "
                                            "divisible by num_heads"}));
  EXPECT_TRUE(throws_with<InvalidArgument>([] { MultiHeadAttention(MultiHeadAttentionOptions(8, 0)); },
                                           {"embed_dim=8 num_heads=0, expected both >= 1"}));
  MultiHeadAttention attn(MultiHeadAttentionOptions(8, 2));
  attn.set_name("blocks.1.attn");
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { attn.build({5, 6}); },
                                           {"MultiHeadAttention blocks.1.attn: input (5, 6), expected (seq, "
                                            "embed_dim=8)"}));
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { attn.build({2, 5, 8}); }, {"input (2, 5, 8)"}));
}

}  // namespace
}  // namespace dtnn
