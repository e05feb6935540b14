// SPDX-License-Identifier: Apache-2.0
// Transformer blocks (layers/transformer.hpp) and the tied head (layers/tied_linear.hpp) as parts, and the zoo's
// transformer language models (models::transformer_lm) through the layers' API: gradients against central
// differences and a float64 reference, the blocks as the composition of their layers, causality, the tile count,
// PyTorch's names, and bad options and inputs refused at build with the values found and expected.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "layers/activations.hpp"
#include "layers/attention.hpp"
#include "layers/dense.hpp"
#include "layers/embedding.hpp"
#include "layers/init.hpp"
#include "layers/layer_norm.hpp"
#include "layers/tied_linear.hpp"
#include "layers/transformer.hpp"
#include "models/sequential.hpp"
#include "models/zoo.hpp"
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

// Every parameter of a layer and its children from U(-0.5, 0.5), LayerNorm's weights around 1: the checks see every
// term (PyTorch starts biases at zero and LayerNorm at the identity).
void randomize_parameters(Layer& layer, std::uint64_t seed) {
  Rng rng(seed);
  for (const NamedParameter& p : named_parameters(layer)) {
    const bool norm_weight = p.name.find("ln_") != std::string::npos && p.name.ends_with("weight");
    init::uniform(p.parameter->value, norm_weight ? 0.5f : -0.5f, norm_weight ? 1.5f : 0.5f, rng);
  }
}

// A layer whose parameters randomize_parameters draws, for the gradient checker (which calls reset_parameters).
class RandomizedBlock : public Layer {
 public:
  explicit RandomizedBlock(std::unique_ptr<Chain> chain) : chain_(std::move(chain)) {}
  [[nodiscard]] std::string type() const override { return chain_->type(); }
  void set_name(std::string name) override {
    Layer::set_name(name);
    chain_->set_name(std::move(name));
  }
  [[nodiscard]] std::vector<Layer*> children() override { return {chain_.get()}; }
  [[nodiscard]] std::int64_t parameter_count() const override { return chain_->parameter_count(); }
  void prepare_tiles(int tiles) override { chain_->prepare_tiles(tiles); }
  Shape build(const Shape& in) override { return record_shapes(in, chain_->build(in)); }
  void reset_parameters(Rng& rng) override { randomize_parameters(*chain_, rng.below(1u << 30)); }
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override { chain_->forward(x, y, ctx); }
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override {
    chain_->backward(x, y, dy, dx, ctx);
  }

 private:
  std::unique_ptr<Chain> chain_;
};

// ---------------------------------------------------------------------------------------------------------------
// Transformer blocks

TEST(TransformerBlockTest, PreAndPostLNMatchNumericalGradients) {
  RandomizedBlock pre(transformer_block(
      TransformerBlockOptions(8, 2).d_ff(12).causal(true).activation("gelu_tanh")));
  check_layer_gradients(pre, {5, 8}, GradCheckOptions{.batch = 3, .tiles = 2});
  RandomizedBlock post(transformer_block(TransformerBlockOptions(6, 3).d_ff(10).norm_first(false)));
  check_layer_gradients(post, {4, 6}, GradCheckOptions{.batch = 2, .tiles = 2});
  RandomizedBlock relu(transformer_block(TransformerBlockOptions(4, 1).activation("relu").causal(true)));
  check_layer_gradients(relu, {3, 4}, GradCheckOptions{.batch = 3, .tiles = 3});
}

// The block's output, bit for bit, as its parts compute it one after another: pre-LN x + attn(ln_1(x)) then
// h + c_proj(gelu(c_fc(ln_2(h)))); post-LN ln_1(x + attn(x)) then ln_2(h + c_proj(gelu(c_fc(h)))). The parts are
// separate layers given the block's parameters by name.
TEST(TransformerBlockTest, ForwardIsTheResidualCompositionOfItsLayers) {
  const int n = 3, seq = 6, d = 8, d_ff = 16;
  for (const bool pre_ln : {true, false}) {
    auto block = transformer_block(TransformerBlockOptions(d, 2).d_ff(d_ff).causal(true).norm_first(pre_ln));
    block->set_name("h.0");
    block->build({seq, d});
    randomize_parameters(*block, 3);
    std::map<std::string, Parameter*> by_name;
    for (const NamedParameter& p : named_parameters(*block)) by_name[p.name] = p.parameter;

    LayerNorm ln_1{LayerNormOptions(d)}, ln_2{LayerNormOptions(d)};
    MultiHeadAttention attn{MultiHeadAttentionOptions(d, 2).causal(true)};
    Dense c_fc{DenseOptions(d, d_ff)}, c_proj{DenseOptions(d_ff, d)};
    GELU gelu;
    const std::vector<std::pair<std::string, Layer*>> parts = {
        {"h.0.ln_1", &ln_1}, {"h.0.ln_2", &ln_2}, {"h.0.attn", &attn}, {"h.0.mlp.c_fc", &c_fc},
        {"h.0.mlp.c_proj", &c_proj}};
    for (const auto& [name, layer] : parts) {
      layer->set_name(name);
      layer->build(layer == &c_proj ? Shape{seq, d_ff} : Shape{seq, d});
      for (const NamedParameter& p : named_parameters(*layer)) {
        ASSERT_TRUE(by_name.count(p.name)) << "the block has no " << p.name;
        p.parameter->value.copy_from(by_name[p.name]->value.to_vector());
        by_name.erase(p.name);
      }
    }
    EXPECT_TRUE(by_name.empty()) << by_name.size() << " of the block's parameters left, e.g. "
                                 << by_name.begin()->first;
    gelu.build({seq, d_ff});

    Tensor x({n, seq, d}, 2), y({n, seq, d}, 2);
    fill_random(x, 4, -2.0f, 2.0f);
    block->forward(x, y, PassContext{});

    auto apply = [&](Layer& layer, const Tensor& in, int width) {
      Tensor out({n, seq, width}, 2);
      layer.forward(in, out, PassContext{});
      return out;
    };
    auto plus = [&](const Tensor& a, const Tensor& b) {
      Tensor out({n, seq, d}, 2);
      const auto av = a.to_vector();
      const auto bv = b.to_vector();
      std::vector<float> sum(av.size());
      for (std::size_t i = 0; i < av.size(); ++i) sum[i] = av[i] + bv[i];
      out.copy_from(sum);
      return out;
    };
    auto mlp = [&](const Tensor& in) {
      const Tensor hidden = apply(c_fc, in, d_ff);
      const Tensor activated = apply(gelu, hidden, d_ff);
      return apply(c_proj, activated, d);
    };
    Tensor want;
    if (pre_ln) {
      const Tensor h = plus(x, apply(attn, apply(ln_1, x, d), d));
      want = plus(h, mlp(apply(ln_2, h, d)));
    } else {
      const Tensor h = apply(ln_1, plus(x, apply(attn, x, d)), d);
      want = apply(ln_2, plus(h, mlp(h)), d);
    }
    EXPECT_TRUE(bitwise_equal(y.to_vector(), want.to_vector())) << (pre_ln ? "pre-LN" : "post-LN");
  }
}

TEST(TransformerBlockTest, HasPyTorchsNamesAndDescribesItself) {
  auto pre = transformer_block(TransformerBlockOptions(8, 2).causal(true).dropout(0.1).activation("gelu_tanh"));
  pre->set_name("h.3");
  pre->build({4, 8});
  std::vector<std::string> names;
  for (const NamedParameter& p : named_parameters(*pre)) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"h.3.ln_1.weight", "h.3.ln_1.bias", "h.3.attn.in_proj_weight",
                                             "h.3.attn.in_proj_bias", "h.3.attn.out_proj.weight",
                                             "h.3.attn.out_proj.bias", "h.3.ln_2.weight", "h.3.ln_2.bias",
                                             "h.3.mlp.c_fc.weight", "h.3.mlp.c_fc.bias", "h.3.mlp.c_proj.weight",
                                             "h.3.mlp.c_proj.bias"}));
  // 2 LayerNorms, nn.MultiheadAttention (4 E^2 + 4 E), c_fc and c_proj with d_ff = 4 E.
  EXPECT_EQ(pre->parameter_count(), 2 * 16 + (4 * 64 + 32) + (8 * 32 + 32) + (32 * 8 + 8));
  EXPECT_EQ(pre->type(), "PreLNBlock");
  EXPECT_EQ(pre->describe(), "2 heads, d_ff 32, gelu_tanh, causal, dropout 0.1");
  auto post = transformer_block(TransformerBlockOptions(8, 4).d_ff(16).norm_first(false));
  post->set_name("h.0");
  post->build({4, 8});
  names.clear();
  for (const NamedParameter& p : named_parameters(*post)) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"h.0.attn.in_proj_weight", "h.0.attn.in_proj_bias",
                                             "h.0.attn.out_proj.weight", "h.0.attn.out_proj.bias", "h.0.ln_1.weight",
                                             "h.0.ln_1.bias", "h.0.mlp.c_fc.weight", "h.0.mlp.c_fc.bias",
                                             "h.0.mlp.c_proj.weight", "h.0.mlp.c_proj.bias", "h.0.ln_2.weight",
                                             "h.0.ln_2.bias"}));
  EXPECT_EQ(post->type(), "PostLNBlock");
}

TEST(TransformerBlockTest, RefusesBadOptionsNamingTheValues) {
  EXPECT_TRUE(throws_with<InvalidArgument>([] { (void)transformer_block(TransformerBlockOptions(10, 3)); },
                                           {"TransformerBlock: d_model=10 with num_heads=3: d_model must be divisible "
                                            "by num_heads"}));
  EXPECT_TRUE(throws_with<InvalidArgument>([] { (void)transformer_block(TransformerBlockOptions(8, 0)); },
                                           {"TransformerBlock: d_model=8 num_heads=0, expected both >= 1"}));
  EXPECT_TRUE(throws_with<InvalidArgument>([] { (void)transformer_block(TransformerBlockOptions(8, 2).d_ff(-1)); },
                                           {"TransformerBlock: d_ff=-1, expected d_ff >= 1"}));
  EXPECT_TRUE(throws_with<InvalidArgument>([] { (void)transformer_block(TransformerBlockOptions(8, 2).dropout(1.0)); },
                                           {"TransformerBlock: dropout=1, expected 0 <= dropout < 1"}));
  EXPECT_TRUE(throws_with<InvalidArgument>(
      [] { (void)transformer_block(TransformerBlockOptions(8, 2).activation("swish")); },
      {"TransformerBlock: activation='swish', expected 'gelu', 'gelu_tanh' or 'relu'"}));
  auto block = transformer_block(TransformerBlockOptions(8, 2));
  block->set_name("h.1");
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { block->build({5, 6}); },
                                           {"LayerNorm h.1.ln_1: input (5, 6), expected a last axis of "
                                            "normalized_shape=8"}));
}

// ---------------------------------------------------------------------------------------------------------------
// MultiHeadAttention's key-padding mask

Tensor padding_mask(int n, int seq, int tiles, const std::vector<int>& padded_positions) {
  std::vector<std::int32_t> m(static_cast<std::size_t>(n * seq), 0);
  for (int i = 0; i < n; ++i) {
    for (int p : padded_positions) m[static_cast<std::size_t>(i * seq + p)] = 1;
  }
  Tensor t({n, seq}, TensorOptions().dtype(DType::kInt32).tiles(tiles));
  t.copy_from_values<std::int32_t>(m);
  return t;
}

// Every parameter from U(-0.5, 0.5), the biases too.
class RandomAttention : public MultiHeadAttention {
 public:
  using MultiHeadAttention::MultiHeadAttention;
  void reset_parameters(Rng& rng) override {
    for (Parameter* p : parameters()) init::uniform(p->value, -0.5f, 0.5f, rng);
  }
};

TEST(KeyPaddingMaskTest, MaskedAttentionMatchesNumericalGradient) {
  const Tensor mask = padding_mask(3, 5, 2, {1, 4});
  RandomAttention full(MultiHeadAttentionOptions(6, 2));
  full.set_key_padding_mask(&mask);
  check_layer_gradients(full, {5, 6}, GradCheckOptions{.batch = 3, .tiles = 2});
  RandomAttention causal(MultiHeadAttentionOptions(6, 3).causal(true).dropout(0.2).seed(3));
  causal.set_key_padding_mask(&mask);
  check_layer_gradients(causal, {5, 6}, GradCheckOptions{.batch = 3, .tiles = 2});
}

// Keys padded at the end: the other positions' outputs are those of the attention over the unpadded positions only.
TEST(KeyPaddingMaskTest, PaddingAtTheEndIsTheShorterSequence) {
  const int n = 2, seq = 7, kept = 4, e = 8;
  RandomAttention attn(MultiHeadAttentionOptions(e, 2));
  attn.build({seq, e});
  Rng rng(6);
  attn.reset_parameters(rng);
  RandomAttention shorter(MultiHeadAttentionOptions(e, 2));
  shorter.build({kept, e});
  for (std::size_t k = 0; k < attn.parameters().size(); ++k) {
    shorter.parameters()[k]->value.copy_from(attn.parameters()[k]->value.to_vector());
  }
  Tensor x({n, seq, e}, 2), y({n, seq, e}, 2), xs({n, kept, e}, 2), ys({n, kept, e}, 2);
  fill_random(x, 8, -2.0f, 2.0f);
  const auto xv = x.to_vector();
  std::vector<float> head;
  for (int i = 0; i < n; ++i) {
    head.insert(head.end(), xv.begin() + i * seq * e, xv.begin() + (i * seq + kept) * e);
  }
  xs.copy_from(head);
  const Tensor mask = padding_mask(n, seq, 2, {4, 5, 6});
  attn.set_key_padding_mask(&mask);
  attn.forward(x, y, PassContext{});
  shorter.forward(xs, ys, PassContext{});
  const auto yv = y.to_vector();
  const auto ysv = ys.to_vector();
  for (int i = 0; i < n; ++i) {
    for (int s = 0; s < kept; ++s) {
      for (int j = 0; j < e; ++j) {
        EXPECT_NEAR(yv[static_cast<std::size_t>((i * seq + s) * e + j)],
                    ysv[static_cast<std::size_t>((i * kept + s) * e + j)], 1e-6)
            << "sample " << i << " position " << s;
      }
    }
  }
}

// A padded key gets no attention: changing its input changes no other position's output; and no gradient: with no
// gradient on its own output (its query), its input gradient is exactly zero. A query whose every key is padded or
// (causal) in the future gets a zero context: its output is out_proj's bias.
TEST(KeyPaddingMaskTest, APaddedKeyGetsNoAttentionAndNoGradient) {
  const int n = 3, seq = 6, e = 4, padded = 0;
  RandomAttention attn(MultiHeadAttentionOptions(e, 2).causal(true));
  attn.build({seq, e});
  Rng rng(2);
  attn.reset_parameters(rng);
  attn.prepare_tiles(3);
  const Tensor mask = padding_mask(n, seq, 3, {padded, 3});
  attn.set_key_padding_mask(&mask);
  Tensor x({n, seq, e}, 3), y({n, seq, e}, 3), changed({n, seq, e}, 3), y2({n, seq, e}, 3);
  fill_random(x, 1);
  auto xv = x.to_vector();
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < e; ++j) xv[static_cast<std::size_t>((i * seq + 3) * e + j)] += 4.0f;
  }
  changed.copy_from(xv);
  attn.forward(x, y, PassContext{});
  attn.forward(changed, y2, PassContext{});
  const auto a = y.to_vector();
  const auto b = y2.to_vector();
  const auto bias = attn.parameters()[3]->value.to_vector();
  for (int i = 0; i < n; ++i) {
    for (int s = 0; s < seq; ++s) {
      for (int j = 0; j < e; ++j) {
        const std::size_t k = static_cast<std::size_t>((i * seq + s) * e + j);
        if (s != 3) {
          EXPECT_EQ(std::bit_cast<std::uint32_t>(a[k]), std::bit_cast<std::uint32_t>(b[k])) << i << " " << s;
        }
        if (s == padded) {
          EXPECT_EQ(a[k], bias[static_cast<std::size_t>(j)]) << "sample " << i;
        }
      }
    }
  }
  Tensor dy({n, seq, e}, 3), dx({n, seq, e}, 3);
  {
    auto g = dy.write();
    Rng r(4);
    for (int i = 0; i < n; ++i) {
      for (int s = 0; s < seq; ++s) {
        for (int j = 0; j < e; ++j) g[(i * seq + s) * e + j] = s == 3 ? 0.0f : r.uniform(-1.0f, 1.0f);
      }
    }
  }
  attn.forward(x, y, PassContext{});
  attn.backward(x, y, dy, &dx, PassContext{});
  const auto g = dx.to_vector();
  for (int i = 0; i < n; ++i) {
    for (int s = 0; s < seq; ++s) {
      double magnitude = 0.0;
      for (int j = 0; j < e; ++j) magnitude += std::abs(g[static_cast<std::size_t>((i * seq + s) * e + j)]);
      // Position 0 is a padded key and its query sees no key: its input reaches nothing.
      if (s == 3 || s == padded) {
        EXPECT_EQ(magnitude, 0.0) << "sample " << i << " position " << s;
      } else {
        EXPECT_GT(magnitude, 0.0) << "sample " << i << " position " << s;
      }
    }
  }
}

TEST(KeyPaddingMaskTest, RefusesAMaskOfAnotherShapeOrType) {
  MultiHeadAttention attn(MultiHeadAttentionOptions(4, 2));
  attn.set_name("attn");
  attn.build({5, 4});
  Tensor x({2, 5, 4}), y({2, 5, 4});
  const Tensor short_mask = padding_mask(2, 4, 1, {0});
  attn.set_key_padding_mask(&short_mask);
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { attn.forward(x, y, PassContext{}); },
                                           {"attn: key_padding_mask (2, 4), expected (2, 5) (batch, seq)"}));
  const Tensor float_mask({2, 5});
  attn.set_key_padding_mask(&float_mask);
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { attn.forward(x, y, PassContext{}); },
                                           {"attn: key_padding_mask (2, 5) is float32, expected int32"}));
}

// ---------------------------------------------------------------------------------------------------------------
// The tied head

// Embedding then the head on its table: logits z = E[id] E^T; the table's gradient is, in double, the head's
// sum over positions of dz^T h plus the lookup's scatter of dz E, and the same bits for 1 to 3 tiles (and both
// passes are the same bits whatever the tile count).
TEST(TiedLinearTest, TheTableGetsTheHeadsAndTheLookupsGradientsInAFixedOrder) {
  const int n = 5, seq = 3, num = 7, dim = 4;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n * seq));
  for (int i = 0; i < n * seq; ++i) ids[static_cast<std::size_t>(i)] = (i * 5 + 2) % num;
  std::vector<float> first_grad, first_logits, first_dx;
  for (int tiles : {1, 2, 3}) {
    Sequential m;
    auto wte = std::make_unique<Embedding>(EmbeddingOptions(num, dim));
    Embedding& table = *wte;
    m.add("wte", std::move(wte));
    m.add_as<TiedLinear>("lm_head", table);
    m.build({seq}, 5);
    ASSERT_EQ(m.named_parameters().size(), 1u);
    EXPECT_EQ(m.named_parameters()[0].name, "wte.weight");
    EXPECT_EQ(m.parameter_count(), num * dim);
    EXPECT_EQ(m.layer(1).describe(), "4 -> 7, no bias, weight of wte");
    EXPECT_EQ(m.layer(0).describe(), "7 x 4, tied");
    EXPECT_EQ(m.output_shape(), (Shape{seq, num}));
    std::vector<Tensor> acts, grads;
    m.allocate(n, tiles, acts, &grads);
    acts[0].copy_from_values<std::int32_t>(ids);
    m.forward(acts, PassContext{});
    fill_random(grads.back(), 6);
    m.backward(acts, grads, PassContext{}, [](Layer&) {});
    const auto e = table.weight().value.to_vector();
    const auto z = acts.back().to_vector();
    const auto dz = grads.back().to_vector();
    const auto h = acts[1].to_vector();
    const auto dh = grads[1].to_vector();
    std::vector<double> want(static_cast<std::size_t>(num * dim), 0.0);
    for (int p = 0; p < n * seq; ++p) {
      const int id = ids[static_cast<std::size_t>(p)];
      for (int v = 0; v < num; ++v) {
        double logit = 0.0;
        for (int j = 0; j < dim; ++j) {
          const double e_id = e[static_cast<std::size_t>(id * dim + j)];
          logit += e_id * e[static_cast<std::size_t>(v * dim + j)];
          const double g = dz[static_cast<std::size_t>(p * num + v)];
          want[static_cast<std::size_t>(v * dim + j)] += g * e_id;                                        // head
          want[static_cast<std::size_t>(id * dim + j)] += g * e[static_cast<std::size_t>(v * dim + j)];  // lookup
        }
        EXPECT_NEAR(z[static_cast<std::size_t>(p * num + v)], logit, 1e-5) << "position " << p << " logit " << v;
      }
    }
    const auto grad = table.weight().grad.to_vector();
    for (std::size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(grad[k], want[k], 1e-5) << tiles << " tiles, " << k;
    if (first_grad.empty()) {
      first_grad = grad;
      first_logits = z;
      first_dx = dh;
    }
    EXPECT_TRUE(bitwise_equal(grad, first_grad)) << tiles << " tiles, the table's gradient";
    EXPECT_TRUE(bitwise_equal(z, first_logits)) << tiles << " tiles, logits";
    EXPECT_TRUE(bitwise_equal(dh, first_dx)) << tiles << " tiles, the head's input gradient";
    EXPECT_FALSE(h.empty());
  }
}

TEST(TiedLinearTest, RefusesAnUnbuiltTableAWidthOtherThanTheTablesAndASecondHead) {
  Embedding table(EmbeddingOptions(10, 8));
  table.set_name("wte");
  TiedLinear head(table);
  head.set_name("lm_head");
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { head.build({4, 8}); },
                                           {"TiedLinear lm_head: Embedding wte is not built, expected it before the "
                                            "head in the model"}));
  table.build({4});
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { head.build({4, 6}); },
                                           {"TiedLinear lm_head: input (4, 6), expected a last axis of "
                                            "embedding_dim=8 (the table of wte)"}));
  EXPECT_EQ(head.build({4, 8}), (Shape{4, 10}));
  TiedLinear second(table);
  second.set_name("other_head");
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { second.build({4, 8}); },
                                           {"TiedLinear other_head: Embedding wte is already tied to another head, "
                                            "expected one head per table"}));
  Embedding unbuilt(EmbeddingOptions(3, 2));
  unbuilt.set_name("emb");
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { (void)unbuilt.weight(); },
                                           {"Embedding emb: its table was asked for before build()"}));
}

// ---------------------------------------------------------------------------------------------------------------
// The zoo's transformer language models through the layers' API

struct Pass {
  std::vector<float> logits;
  std::map<std::string, std::vector<float>> grads;
};

// A forward pass of `ids` ([n, context]) and, with dlogits_seed, a backward pass from random logit gradients.
Pass run(Sequential& model, std::int64_t n, int tiles, const std::vector<std::int32_t>& ids,
         std::uint64_t dlogits_seed) {
  std::vector<Tensor> acts, grads;
  model.allocate(n, tiles, acts, &grads, Storage::kTransient);
  acts[0].copy_from_values<std::int32_t>(ids);
  model.forward(acts, PassContext{});
  Pass out;
  out.logits = acts.back().to_vector();
  if (dlogits_seed == 0) return out;
  fill_random(grads.back(), dlogits_seed);
  model.backward(acts, grads, PassContext{}, [](Layer&) {});
  for (const NamedParameter& p : model.named_parameters()) out.grads[p.name] = p.parameter->grad.to_vector();
  return out;
}

std::vector<std::int32_t> some_ids(std::int64_t count, int vocabulary, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(count));
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocabulary)));
  return ids;
}

// Changing token t of every sample changes no logit before t, and changes those at t.
TEST(GptTinyTest, ChangingTokenTChangesNoLogitBeforeT) {
  const int n = 2, context = 16, vocab = 256, t = 9;
  Sequential model = models::gpt_tiny();
  model.build({context}, 3);
  std::vector<std::int32_t> ids = some_ids(n * context, vocab, 1);
  const Pass before = run(model, n, 2, ids, 0);
  for (int i = 0; i < n; ++i) {
    auto& id = ids[static_cast<std::size_t>(i * context + t)];
    id = (id + 101) % vocab;
  }
  const Pass after = run(model, n, 2, ids, 0);
  for (int i = 0; i < n; ++i) {
    for (int s = 0; s < context; ++s) {
      bool same = true;
      for (int v = 0; v < vocab; ++v) {
        const std::size_t k = static_cast<std::size_t>((i * context + s) * vocab + v);
        same = same && std::bit_cast<std::uint32_t>(before.logits[k]) == std::bit_cast<std::uint32_t>(after.logits[k]);
      }
      EXPECT_EQ(same, s < t) << "sample " << i << " position " << s;
    }
  }
}

// With 1, 2 and 3 tiles: the same logits and every parameter's gradient bit for bit: the tied table's (head, then
// lookup, each in batch order), the positions' table, every LayerNorm's, and the Dense and attention projections'
// (per-sample GEMMs chained across the tiles in batch order).
TEST(GptTinyTest, OneTwoAndThreeTilesGiveTheSameGradientBits) {
  const int n = 3, context = 16;
  auto pass = [&](int tiles) {
    Sequential model = models::gpt_tiny();
    model.build({context}, 11);
    return run(model, n, tiles, some_ids(n * context, 256, 2), 5);
  };
  const Pass one = pass(1);
  ASSERT_EQ(one.grads.size(), 28u);
  for (int tiles : {2, 3}) {
    const Pass other = pass(tiles);
    EXPECT_TRUE(bitwise_equal(other.logits, one.logits)) << tiles << " tiles";
    for (const auto& [name, g] : one.grads) {
      EXPECT_TRUE(bitwise_equal(other.grads.at(name), g)) << tiles << " tiles, " << name;
    }
  }
}

// PyTorch's state_dict of tools/gpt_reference.py's TransformerLM(**CONFIGS["gpt_tiny"]), in order, with shapes.
TEST(GptTinyTest, HasTheReferenceModulesStateDict) {
  Sequential model = models::gpt_tiny();
  model.build({16}, 1);
  std::vector<std::string> want = {"wte.weight 256x32", "wpe.weight 16x32"};
  for (int i = 0; i < 2; ++i) {
    for (const char* entry : {"ln_1.weight 32", "ln_1.bias 32", "attn.in_proj_weight 96x32", "attn.in_proj_bias 96",
                              "attn.out_proj.weight 32x32", "attn.out_proj.bias 32", "ln_2.weight 32", "ln_2.bias 32",
                              "mlp.c_fc.weight 128x32", "mlp.c_fc.bias 128", "mlp.c_proj.weight 32x128",
                              "mlp.c_proj.bias 32"}) {
      want.push_back("h." + std::to_string(i) + "." + entry);
    }
  }
  want.insert(want.end(), {"ln_f.weight 32", "ln_f.bias 32"});
  std::vector<std::string> got;
  for (const NamedParameter& p : model.named_parameters()) {
    std::string s = p.name + " ";
    const Shape& shape = p.parameter->value.shape();
    for (std::size_t k = 0; k < shape.size(); ++k) s += (k > 0 ? "x" : "") + std::to_string(shape[k]);
    got.push_back(s);
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(model.parameter_count(), 34'176);  // tools/gpt_reference.py --model gpt_tiny
}

// GPT-2's initialisation: tables and matrices N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 layers)), biases
// 0, LayerNorm 1 and 0 (gpt_char: 4 layers, so 0.02 / sqrt(8)).
TEST(GptTinyTest, GptCharIsInitialisedAsGpt2) {
  Sequential model = models::gpt_char();
  model.build({256}, 4);
  auto stddev = [](const std::vector<float>& v) {
    double s = 0.0, q = 0.0;
    for (float x : v) {
      s += x;
      q += static_cast<double>(x) * x;
    }
    const double mean = s / static_cast<double>(v.size());
    return std::sqrt(q / static_cast<double>(v.size()) - mean * mean);
  };
  for (const NamedParameter& p : model.named_parameters()) {
    const auto v = p.parameter->value.to_vector();
    if (p.parameter->value.shape().size() == 2) {
      const bool residual = p.name.ends_with("out_proj.weight") || p.name.ends_with("c_proj.weight");
      EXPECT_NEAR(stddev(v), residual ? 0.02 / std::sqrt(8.0) : 0.02, residual ? 0.0003 : 0.0006) << p.name;
    } else {
      EXPECT_EQ(v, std::vector<float>(v.size(), p.name.ends_with("bias") ? 0.0f : 1.0f)) << p.name;
    }
  }
}

// ModelOptions' classes is a language model's vocabulary: the table, and the tied head's outputs.
TEST(GptTinyTest, ClassesSizeTheVocabulary) {
  Sequential model = models::gpt_tiny(models::ModelOptions().classes(100));
  model.build({16}, 1);
  EXPECT_EQ(model.output_shape(), (Shape{16, 100}));
  EXPECT_EQ(model.named_parameters()[0].parameter->value.shape(), (Shape{100, 32}));
  EXPECT_EQ(model.parameter_count(), 34'176 - 156 * 32);
}

TEST(GptTinyTest, RefusesAContextLongerThanThePositionsAndBadSizes) {
  Sequential model = models::gpt_tiny();
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { model.build({17}, 1); },
                                           {"PositionalEncoding wpe: input (17, 32), expected (seq, 32) with seq <= "
                                            "max_len=16"}));
  models::TransformerLmOptions o;
  o.d_model = 30;
  o.num_heads = 4;
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { (void)models::transformer_lm(o); },
                                           {"TransformerBlock: d_model=30 with num_heads=4: d_model must be divisible "
                                            "by num_heads"}));
  o = models::TransformerLmOptions();
  o.vocabulary = 0;
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { (void)models::transformer_lm(o); },
                                           {"transformer_lm: vocabulary=0 context=256 layers=4, expected all >= 1"}));
}

}  // namespace
}  // namespace dtnn
