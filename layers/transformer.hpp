// SPDX-License-Identifier: Apache-2.0
// Transformer blocks built from the existing layers: LayerNorm, MultiHeadAttention, Dense on the last axis, an
// activation, Dropout, and residual Blocks (Merge::kAdd with an empty path as the identity), chained as one layer of
// a model. Every part keeps its own tasks and PyTorch's parameter names.
#pragma once

#include <memory>
#include <string>

#include "layers/chain.hpp"

namespace dtnn {

struct TransformerBlockOptions {
  TransformerBlockOptions(std::int64_t d_model, std::int64_t num_heads) : d_model_(d_model), num_heads_(num_heads) {}
  // The MLP's hidden width (default 4 d_model).
  TransformerBlockOptions& d_ff(std::int64_t d) { d_ff_ = d; return *this; }
  // On the attention probabilities and on each branch's output before its residual sum, in training only.
  TransformerBlockOptions& dropout(double p) { dropout_ = p; return *this; }
  TransformerBlockOptions& causal(bool masked) { causal_ = masked; return *this; }
  // The MLP's activation: "gelu" (exact, BERT's), "gelu_tanh" (GPT-2's) or "relu" (Vaswani et al.'s).
  TransformerBlockOptions& activation(std::string name) { activation_ = std::move(name); return *this; }
  // true (default): pre-LN, x + attn(ln_1(x)) then x + mlp(ln_2(x)) (GPT-2); false: post-LN, ln_1(x + attn(x))
  // then ln_2(x + mlp(x)) (BERT, the original Transformer).
  TransformerBlockOptions& norm_first(bool pre_ln) { norm_first_ = pre_ln; return *this; }
  TransformerBlockOptions& eps(double e) { eps_ = e; return *this; }

  std::int64_t d_model_;
  std::int64_t num_heads_;
  std::int64_t d_ff_ = 0;
  double dropout_ = 0.0;
  bool causal_ = false;
  std::string activation_ = "gelu";
  bool norm_first_ = true;
  double eps_ = 1e-5;
};

// A (seq, d_model) sample gives (seq, d_model). Parameter names under the block's name: ln_1.{weight,bias},
// attn.{in_proj_weight,in_proj_bias,out_proj.weight,out_proj.bias}, ln_2.{weight,bias}, mlp.c_fc.{weight,bias}
// [d_ff, d_model], mlp.c_proj.{weight,bias} [d_model, d_ff] (tools/gpt_reference.py is the PyTorch module of the
// same names). Throws InvalidArgument naming the option when heads do not divide d_model, d_ff < 1, a dropout outside
// [0, 1) or an unknown activation.
std::unique_ptr<Chain> transformer_block(const TransformerBlockOptions& options);

}  // namespace dtnn
