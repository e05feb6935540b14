// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "layers/layer.hpp"

namespace dtnn {

struct PositionalEncodingOptions {
  PositionalEncodingOptions(std::int64_t max_len, std::int64_t dim) : max_len_(max_len), dim_(dim) {}
  // true: a trained table, the parameter "weight" [max_len, dim] drawn N(0, 1) like nn.Embedding's (GPT's wpe);
  // false (default): the fixed sinusoids of Vaswani et al. (an even dim).
  PositionalEncodingOptions& learned(bool trained) { learned_ = trained; return *this; }

  std::int64_t max_len_;
  std::int64_t dim_;
  bool learned_ = false;
};

// Adds row s of a [max_len, dim] table to position s of every (seq, dim) sample, seq <= max_len. The sinusoidal
// table is PE[s, 2i] = sin(s / 10000^(2i / dim)), PE[s, 2i + 1] = cos(s / 10000^(2i / dim)), computed in double at
// build and not trained (nor saved: it is a function of the options). A learned table's gradient adds the samples
// in batch order, tile after tile, so it is the same bits whatever the workers and the tile count.
class PositionalEncoding : public Layer {
 public:
  explicit PositionalEncoding(PositionalEncodingOptions options);
  [[nodiscard]] std::string type() const override { return "PositionalEncoding"; }
  [[nodiscard]] std::string describe() const override;
  Shape build(const Shape& sample_input) override;
  void reset_parameters(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;
  [[nodiscard]] const PositionalEncodingOptions& options() const { return options_; }
  // The table added: the learned weight or the sinusoids.
  [[nodiscard]] const Tensor& table() const;

 private:
  PositionalEncodingOptions options_;
  Parameter* weight_ = nullptr;
  Tensor sinusoids_;
};

}  // namespace dtnn
