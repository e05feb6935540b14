// SPDX-License-Identifier: Apache-2.0
#include "layers/transformer.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "layers/activations.hpp"
#include "layers/attention.hpp"
#include "layers/block.hpp"
#include "layers/dense.hpp"
#include "layers/dropout.hpp"
#include "layers/layer_norm.hpp"
#include "layers/simple.hpp"

namespace dtnn {
namespace {

std::unique_ptr<Layer> activation_layer(const std::string& name) {
  if (name == "gelu") return std::make_unique<GELU>();
  if (name == "gelu_tanh") return std::make_unique<GELU>(GELUOptions().approximate("tanh"));
  return std::make_unique<ReLU>();
}

void check(const TransformerBlockOptions& o) {
  if (o.d_model_ < 1 || o.num_heads_ < 1) {
    throw InvalidArgument(fmt::format("TransformerBlock: d_model={} num_heads={}, expected both >= 1", o.d_model_,
                                      o.num_heads_));
  }
  if (o.d_model_ % o.num_heads_ != 0) {
    throw InvalidArgument(fmt::format("TransformerBlock: d_model={} with num_heads={}: d_model must be divisible by "
                                      "num_heads",
                                      o.d_model_, o.num_heads_));
  }
  if (o.d_ff_ < 0) {
    throw InvalidArgument(fmt::format("TransformerBlock: d_ff={}, expected d_ff >= 1 (or 0 for 4 d_model)", o.d_ff_));
  }
  if (!(o.dropout_ >= 0.0 && o.dropout_ < 1.0)) {
    throw InvalidArgument(fmt::format("TransformerBlock: dropout={}, expected 0 <= dropout < 1", o.dropout_));
  }
  if (o.activation_ != "gelu" && o.activation_ != "gelu_tanh" && o.activation_ != "relu") {
    throw InvalidArgument(fmt::format("TransformerBlock: activation='{}', expected 'gelu', 'gelu_tanh' or 'relu'",
                                      o.activation_));
  }
}

}  // namespace

std::unique_ptr<Chain> transformer_block(const TransformerBlockOptions& o) {
  check(o);
  const std::int64_t d = o.d_model_;
  const std::int64_t d_ff = o.d_ff_ > 0 ? o.d_ff_ : 4 * d;
  const bool dropping = o.dropout_ > 0.0;
  auto layer_norm = [&] { return std::make_unique<LayerNorm>(LayerNormOptions(d).eps(o.eps_)); };

  Path attention("");
  if (o.norm_first_) attention.add("ln_1", layer_norm());
  attention.add_as<MultiHeadAttention>("attn", MultiHeadAttentionOptions(d, o.num_heads_).causal(o.causal_).dropout(
                                                   o.dropout_));
  if (dropping) attention.add_as<Dropout>("attn_drop", DropoutOptions(o.dropout_));

  Path mlp("");
  if (o.norm_first_) mlp.add("ln_2", layer_norm());
  mlp.add_as<Dense>("mlp.c_fc", DenseOptions(d, d_ff))
      .add("mlp.act", activation_layer(o.activation_))
      .add_as<Dense>("mlp.c_proj", DenseOptions(d_ff, d));
  if (dropping) mlp.add_as<Dropout>("mlp.drop", DropoutOptions(o.dropout_));

  auto residual = [](Path&& branch) {
    auto block = std::make_unique<Block>(Merge::kAdd);
    block->add_path(Path()).add_path(std::move(branch));
    return block;
  };
  auto chain = std::make_unique<Chain>(o.norm_first_ ? "PreLNBlock" : "PostLNBlock");
  chain->add("", residual(std::move(attention)));
  if (!o.norm_first_) chain->add("ln_1", layer_norm());
  chain->add("", residual(std::move(mlp)));
  if (!o.norm_first_) chain->add("ln_2", layer_norm());
  chain->description(fmt::format("{} heads, d_ff {}, {}{}{}", o.num_heads_, d_ff, o.activation_,
                                 o.causal_ ? ", causal" : "", dropping ? fmt::format(", dropout {}", o.dropout_) : ""));
  return chain;
}

}  // namespace dtnn
