// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "layers/embedding.hpp"

namespace dtnn {

// A language-model head whose weight is an Embedding's table (GPT-2's tie): logits = h E^T, E [num_embeddings,
// embedding_dim], no bias; a (..., embedding_dim) sample gives (..., num_embeddings). It owns no parameter: the
// table stays the Embedding's (one tensor, one name in checkpoints, one update by the optimizer), and its gradient is
// the head's contribution, summed over the samples in batch order (one task per tile, each adding to what the one
// before left), then the lookup's, which the Embedding adds in its own backward pass after this one. Both sums are
// in a fixed order: the same bits for any tile count and worker count. The Embedding must come before the head in
// the model (it is built first; the backward pass reaches it last).
class TiedLinear : public Layer {
 public:
  explicit TiedLinear(Embedding& embedding) : embedding_(&embedding) {}
  [[nodiscard]] std::string type() const override { return "TiedLinear"; }
  [[nodiscard]] std::string describe() const override;
  Shape build(const Shape& sample_input) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;
  [[nodiscard]] const Embedding& embedding() const { return *embedding_; }
  [[nodiscard]] std::vector<Parameter*> shared_gradients() override { return {&embedding_->weight()}; }

 private:
  Embedding* embedding_;
};

}  // namespace dtnn
