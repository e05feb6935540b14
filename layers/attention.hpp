// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>

#include "layers/layer.hpp"

namespace dtnn {

struct MultiHeadAttentionOptions {
  MultiHeadAttentionOptions(std::int64_t embed_dim, std::int64_t num_heads)
      : embed_dim_(embed_dim), num_heads_(num_heads) {}
  // false: no in_proj_bias and out_proj.bias (PyTorch's bias=False).
  MultiHeadAttentionOptions& bias(bool with_bias) { bias_ = with_bias; return *this; }
  // true: position t attends to positions <= t only (the causal mask of a language model).
  MultiHeadAttentionOptions& causal(bool masked) { causal_ = masked; return *this; }
  // Dropout on the attention probabilities in training (PyTorch's dropout); masks drawn as Dropout's, from the seed
  // (default: FNV-1a of the layer's name), the step and the sample's row in the batch.
  MultiHeadAttentionOptions& dropout(double p) { dropout_ = p; return *this; }
  MultiHeadAttentionOptions& seed(std::uint64_t s) { seed_ = s; return *this; }

  std::int64_t embed_dim_;
  std::int64_t num_heads_;
  bool bias_ = true;
  bool causal_ = false;
  double dropout_ = 0.0;
  std::optional<std::uint64_t> seed_;
};

// Self-attention as PyTorch's nn.MultiheadAttention(embed_dim, num_heads, batch_first=True) called as
// attn(x, x, x): a (seq, embed_dim) sample gives (seq, embed_dim). Parameters by PyTorch's names and shapes:
// in_proj_weight [3E, E] (q, k, v stacked), in_proj_bias [3E], out_proj.weight [E, E], out_proj.bias [E]. Per batch
// tile and pass: the in-projection (a Dense task), the attention of every head (one task, probabilities
// [n, heads, seq, seq] kept for backward) and the out-projection (a Dense task); weight gradients are per-tile
// partials summed in tile order. A key-padding mask (set_key_padding_mask) hides padded keys as PyTorch's
// key_padding_mask does.
class MultiHeadAttention : public Layer {
 public:
  explicit MultiHeadAttention(MultiHeadAttentionOptions options);
  [[nodiscard]] std::string type() const override { return "MultiHeadAttention"; }
  [[nodiscard]] std::string describe() const override;
  Shape build(const Shape& sample_input) override;
  void reset_parameters(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;
  [[nodiscard]] const MultiHeadAttentionOptions& options() const { return options_; }
  // PyTorch's key_padding_mask, a per-batch input like x: int32 [n, seq] tiled as x, nonzero where a key is padding.
  // The forward passes submitted from now on give padded keys probability 0 from every query, so they receive no
  // attention and, through the kept probabilities, no gradient; a query left without keys gets a zero context
  // (PyTorch: NaN). The caller keeps the tensor alive until those passes' tasks are done; null: no mask.
  void set_key_padding_mask(const Tensor* mask) { key_padding_ = mask; }

 private:
  enum Scratch { kQkv = 0, kProbs, kContext, kContextGrad, kQkvGrad };
  Tensor& scratch_of(const Tensor& x, Scratch which);

  MultiHeadAttentionOptions options_;
  std::int64_t seq_ = 0;
  Parameter* in_weight_ = nullptr;
  Parameter* in_bias_ = nullptr;
  Parameter* out_weight_ = nullptr;
  Parameter* out_bias_ = nullptr;
  const Tensor* key_padding_ = nullptr;
};

}  // namespace dtnn
