// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>

#include "layers/layer.hpp"

namespace dtnn {

struct EmbeddingOptions {
  EmbeddingOptions(std::int64_t num_embeddings, std::int64_t embedding_dim)
      : num_(num_embeddings), dim_(embedding_dim) {}
  // The id whose row stays zero and gets no gradient (PyTorch's padding_idx; negative counts from the end).
  EmbeddingOptions& padding_idx(std::int64_t id) { padding_idx_ = id; return *this; }

  std::int64_t num_;
  std::int64_t dim_;
  std::optional<std::int64_t> padding_idx_;
};

// PyTorch's Embedding: int32 ids of any per-sample shape (S) give (S, embedding_dim), row id of weight
// [num_embeddings, embedding_dim] (initialised N(0, 1), the padding row zero). The ids have no gradient; the
// table's gradient adds the positions' gradients in batch order (tile by tile, one task after another), so it is
// the same bits whatever the workers and the tile count. An id outside [0, num_embeddings) fails its task with a
// DataError naming the layer and the id.
class Embedding : public Layer {
 public:
  explicit Embedding(EmbeddingOptions options);
  [[nodiscard]] std::string type() const override { return "Embedding"; }
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] DType input_dtype() const override { return DType::kInt32; }
  Shape build(const Shape& sample_input) override;
  void reset_parameters(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;
  [[nodiscard]] const EmbeddingOptions& options() const { return options_; }
  // padding_idx as an index into the table, -1 without one.
  [[nodiscard]] int padding_row() const { return padding_row_; }
  // The table (after build), for a layer that shares it (TiedLinear).
  [[nodiscard]] Parameter& weight();
  // A tied head reads the table and writes its gradient in its own backward pass, which comes before this layer's
  // (a model runs backward from its last layer): from now on every tile of this layer adds the lookup's gradient to
  // what the head left, in tile order, instead of tile 0 overwriting it.
  void share_weight() { shared_ = 1; }
  [[nodiscard]] int weight_shared() const { return shared_; }

 private:
  EmbeddingOptions options_;
  int padding_row_ = -1;
  int shared_ = 0;
  Parameter* weight_ = nullptr;
};

}  // namespace dtnn
