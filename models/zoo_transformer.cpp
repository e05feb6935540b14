// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "layers/dropout.hpp"
#include "layers/embedding.hpp"
#include "layers/init.hpp"
#include "layers/layer_norm.hpp"
#include "layers/positional.hpp"
#include "layers/tied_linear.hpp"
#include "layers/transformer.hpp"
#include "models/zoo.hpp"
#include "models/zoo_common.hpp"

namespace dtnn::models {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// GPT-2's initialisation by a parameter's role (HuggingFace's GPT2PreTrainedModel._init_weights, nanoGPT): matrices
// and tables N(0, 0.02), the residual projections N(0, residual_std) when scaled, vectors named weight (LayerNorm)
// 1, biases 0.
Sequential::Initializer gpt2_initializer(double residual_std) {
  return [residual_std](Layer& layer, Rng& rng) {
    for (const NamedParameter& p : named_parameters(layer)) {
      Tensor& v = p.parameter->value;
      if (v.shape().size() >= 2) {
        const bool residual = ends_with(p.name, "attn.out_proj.weight") || ends_with(p.name, "mlp.c_proj.weight");
        init::normal_polar(v, 0.0f, static_cast<float>(residual ? residual_std : 0.02), rng);
      } else {
        auto values = v.write();
        std::fill(values.data().begin(), values.data().end(), ends_with(p.name, "bias") ? 0.0f : 1.0f);
      }
    }
  };
}

}  // namespace

Sequential transformer_lm(const TransformerLmOptions& o) {
  if (o.vocabulary < 1 || o.context < 1 || o.layers < 1) {
    throw InvalidArgument(fmt::format("transformer_lm: vocabulary={} context={} layers={}, expected all >= 1",
                                      o.vocabulary, o.context, o.layers));
  }
  Sequential m;
  auto wte = std::make_unique<Embedding>(EmbeddingOptions(o.vocabulary, o.d_model));
  Embedding& table = *wte;
  m.add("wte", std::move(wte));
  m.add_as<PositionalEncoding>("wpe", PositionalEncodingOptions(o.context, o.d_model).learned(true));
  if (!o.norm_first) m.add_as<LayerNorm>("emb_ln", LayerNormOptions(o.d_model).eps(o.eps));
  if (o.dropout > 0.0) m.add_as<Dropout>("drop", DropoutOptions(o.dropout));
  for (std::int64_t i = 0; i < o.layers; ++i) {
    m.add(fmt::format("h.{}", i), transformer_block(TransformerBlockOptions(o.d_model, o.num_heads)
                                                        .d_ff(o.d_ff)
                                                        .dropout(o.dropout)
                                                        .causal(o.causal)
                                                        .activation(o.activation)
                                                        .norm_first(o.norm_first)
                                                        .eps(o.eps)));
  }
  if (o.norm_first) m.add_as<LayerNorm>("ln_f", LayerNormOptions(o.d_model).eps(o.eps));
  if (o.tied) {
    m.add_as<TiedLinear>("lm_head", table);
  } else {
    m.add_as<Dense>("lm_head", DenseOptions(o.d_model, o.vocabulary).bias(false));
  }
  const double residual_std = o.norm_first ? 0.02 / std::sqrt(2.0 * static_cast<double>(o.layers)) : 0.02;
  m.initializer(gpt2_initializer(residual_std));
  return m;
}

namespace {

TransformerLmOptions with_vocabulary(TransformerLmOptions o, const ModelOptions& options, std::string_view model) {
  o.vocabulary = detail::classes_or(options, static_cast<int>(o.vocabulary), model);
  return o;
}

}  // namespace

Sequential gpt_tiny(const ModelOptions& options) {
  TransformerLmOptions o;
  o.context = 16;
  o.d_model = 32;
  o.num_heads = 2;
  o.layers = 2;
  o.tied = true;
  return transformer_lm(with_vocabulary(o, options, "gpt_tiny"));
}

Sequential gpt_char(const ModelOptions& options) {
  TransformerLmOptions o;
  o.d_ff = 1024;
  return transformer_lm(with_vocabulary(o, options, "gpt_char"));
}

Sequential gpt2_small(const ModelOptions& options) {
  TransformerLmOptions o;
  o.vocabulary = 50257;
  o.context = 1024;
  o.d_model = 768;
  o.num_heads = 12;
  o.layers = 12;
  o.d_ff = 3072;
  o.dropout = 0.1;
  o.tied = true;
  return transformer_lm(with_vocabulary(o, options, "gpt2_small"));
}

Sequential bert_medium(const ModelOptions& options) {
  TransformerLmOptions o;
  o.vocabulary = 30522;
  o.context = 512;
  o.d_model = 512;
  o.num_heads = 8;
  o.layers = 8;
  o.d_ff = 2048;
  o.dropout = 0.1;
  o.tied = true;
  o.causal = false;
  o.norm_first = false;
  o.activation = "gelu";
  o.eps = 1e-12;
  return transformer_lm(with_vocabulary(o, options, "bert_medium"));
}

}  // namespace dtnn::models
