// SPDX-License-Identifier: Apache-2.0
#include "layers/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "codelets/attention.hpp"
#include "codelets/dense.hpp"
#include "codelets/dropout.hpp"
#include "core/errors.hpp"
#include "layers/dropout.hpp"
#include "layers/init.hpp"

namespace dtnn {

MultiHeadAttention::MultiHeadAttention(MultiHeadAttentionOptions options) : options_(options) {
  const std::int64_t e = options_.embed_dim_;
  const std::int64_t h = options_.num_heads_;
  if (e < 1 || h < 1 || e > std::numeric_limits<int>::max() / 3) {
    throw InvalidArgument(fmt::format("MultiHeadAttention: embed_dim={} num_heads={}, expected both >= 1", e, h));
  }
  // Written so that NaN fails too.
  if (!(options_.dropout_ >= 0.0 && options_.dropout_ < 1.0)) {
    throw InvalidArgument(fmt::format("MultiHeadAttention: dropout={}, expected 0 <= dropout < 1", options_.dropout_));
  }
  if (e % h != 0) {
    throw InvalidArgument(fmt::format("MultiHeadAttention: embed_dim={} with num_heads={}: embed_dim must be "
                                      "divisible by num_heads",
                                      e, h));
  }
}

std::string MultiHeadAttention::describe() const {
  std::string s = fmt::format("{} heads of {}{}{}", options_.num_heads_, options_.embed_dim_ / options_.num_heads_,
                              options_.causal_ ? ", causal" : "", options_.bias_ ? "" : ", no bias");
  if (options_.dropout_ > 0.0) s += fmt::format(", dropout {:g}", options_.dropout_);
  if (options_.seed_) s += fmt::format(", seed {}", *options_.seed_);
  // The probabilities [heads, seq, seq] of every sample stay from the forward pass to the backward one: at long
  // sequences the largest activation of a transformer.
  if (seq_ > 0) {
    const std::int64_t bytes = options_.num_heads_ * seq_ * seq_ * static_cast<std::int64_t>(sizeof(float));
    s += bytes >= (1 << 20)   ? fmt::format(", scores {:.1f} MiB/sample", static_cast<double>(bytes) / (1 << 20))
         : bytes >= (1 << 10) ? fmt::format(", scores {:.1f} KiB/sample", static_cast<double>(bytes) / (1 << 10))
                              : fmt::format(", scores {} B/sample", bytes);
  }
  return s;
}

namespace {

// This step's attention dropout, or none (evaluation, or no dropout); forward and backward draw the same masks.
std::optional<codelets::DropoutDraw> dropout_of(const MultiHeadAttentionOptions& o, const std::string& name,
                                                const PassContext& ctx) {
  if (!ctx.training || o.dropout_ == 0.0) return std::nullopt;
  return codelets::DropoutDraw{o.seed_.value_or(fnv1a(name)), ctx.step, o.dropout_};
}

}  // namespace

Shape MultiHeadAttention::build(const Shape& in) {
  if (in.size() != 2 || in[0] < 1 || in[1] != options_.embed_dim_) {
    throw InvalidArgument(fmt::format("MultiHeadAttention {}: input {}, expected (seq, embed_dim={})", name(),
                                      to_string(in), options_.embed_dim_));
  }
  // The kernels index a head's (seq, seq) probabilities with int.
  if (in[0] > 46340) {
    throw InvalidArgument(fmt::format("MultiHeadAttention {}: seq={}, expected at most 46340 (seq^2 fits an int)",
                                      name(), in[0]));
  }
  seq_ = in[0];
  const std::int64_t e = options_.embed_dim_;
  in_weight_ = &add_parameter("in_proj_weight", {3 * e, e});
  if (options_.bias_) in_bias_ = &add_parameter("in_proj_bias", {3 * e});
  out_weight_ = &add_parameter("out_proj.weight", {e, e});
  if (options_.bias_) out_bias_ = &add_parameter("out_proj.bias", {e});
  return record_shapes(in, in);
}

// nn.MultiheadAttention._reset_parameters: xavier_uniform_ on in_proj_weight, zero biases; out_proj.weight keeps
// Linear's default, U(+-1/sqrt(E)).
void MultiHeadAttention::reset_parameters(Rng& rng) {
  const auto e = static_cast<double>(options_.embed_dim_);
  const auto xavier = static_cast<float>(std::sqrt(6.0 / (e + 3.0 * e)));
  init::uniform(in_weight_->value, -xavier, xavier, rng);
  const auto linear = static_cast<float>(1.0 / std::sqrt(e));
  init::uniform(out_weight_->value, -linear, linear, rng);
  if (in_bias_ != nullptr) {
    in_bias_->value.fill(0.0f);
    out_bias_->value.fill(0.0f);
  }
}

Tensor& MultiHeadAttention::scratch_of(const Tensor& x, Scratch which) {
  const std::int64_t n = x.shape()[0];
  const std::int64_t e = options_.embed_dim_;
  Shape shape;
  switch (which) {
    case kQkv:
    case kQkvGrad: shape = {n, seq_, 3 * e}; break;
    case kProbs: shape = {n, options_.num_heads_, seq_, seq_}; break;
    case kContext:
    case kContextGrad: shape = {n, seq_, e}; break;
  }
  return scratch(x, which, shape, x.tiles(), x.storage());
}

namespace {

AttentionShape attention_shape(const MultiHeadAttentionOptions& o, std::int64_t seq) {
  const auto d = static_cast<int>(o.embed_dim_ / o.num_heads_);
  return AttentionShape{static_cast<int>(seq), static_cast<int>(o.num_heads_), d, o.causal_ ? 1 : 0,
                        static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)))};
}

}  // namespace

void MultiHeadAttention::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  const std::string in_name = name() + ".in_proj";
  const std::string out_name = name() + ".out_proj";
  const AttentionShape a = attention_shape(options_, seq_);
  const std::optional<codelets::DropoutDraw> drop = dropout_of(options_, name(), ctx);
  Tensor& qkv = scratch_of(x, kQkv);
  Tensor& probs = scratch_of(x, kProbs);
  Tensor& context = scratch_of(x, kContext);
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_dense_fwd({in_name, ctx.priority}, x, in_weight_->value, in_bias_ ? &in_bias_->value : nullptr,
                               qkv, t, 0);
    codelets::submit_attention_fwd({name(), ctx.priority}, a, drop ? &*drop : nullptr, qkv, probs, context, t,
                                   key_padding_);
    codelets::submit_dense_fwd({out_name, ctx.priority}, context, out_weight_->value,
                               out_bias_ ? &out_bias_->value : nullptr, y, t, 0);
  }
  // No backward follows an evaluation pass: transient scratch goes back at once.
  if (!ctx.training) {
    qkv.discard();
    probs.discard();
    context.discard();
  }
}

void MultiHeadAttention::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx,
                                  const PassContext& ctx) {
  const std::string in_name = name() + ".in_proj";
  const std::string out_name = name() + ".out_proj";
  const AttentionShape a = attention_shape(options_, seq_);
  const int data = ctx.priority + 1;
  const std::optional<codelets::DropoutDraw> drop = dropout_of(options_, name(), ctx);
  Tensor& qkv = scratch_of(x, kQkv);
  Tensor& probs = scratch_of(x, kProbs);
  Tensor& context = scratch_of(x, kContext);
  Tensor& dcontext = scratch_of(x, kContextGrad);
  Tensor& dqkv = scratch_of(x, kQkvGrad);
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_dense_bwd_data({out_name, data}, dy, out_weight_->value, dcontext, t);
    codelets::submit_dense_bwd_weights_in_order({out_name, ctx.priority}, context, dy, out_weight_->grad,
                                                out_bias_ ? &out_bias_->grad : nullptr, t, ctx.gradients_continue);
    codelets::submit_attention_bwd_data({name(), data}, a, drop ? &*drop : nullptr, qkv, probs, dcontext, dqkv, t);
    if (dx != nullptr) codelets::submit_dense_bwd_data({in_name, data}, dqkv, in_weight_->value, *dx, t);
    codelets::submit_dense_bwd_weights_in_order({in_name, ctx.priority}, x, dqkv, in_weight_->grad,
                                                in_bias_ ? &in_bias_->grad : nullptr, t, ctx.gradients_continue);
  }
  // Their last readers are the tasks above.
  qkv.discard();
  probs.discard();
  context.discard();
  dcontext.discard();
  dqkv.discard();
}

}  // namespace dtnn
