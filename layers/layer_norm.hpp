// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "layers/layer.hpp"

namespace dtnn {

struct LayerNormOptions {
  // The size of the last axis, the one normalised (PyTorch's normalized_shape of one dimension).
  explicit LayerNormOptions(std::int64_t normalized_shape) : normalized_shape_(normalized_shape) {}
  LayerNormOptions& eps(double e) { eps_ = e; return *this; }
  // false: no weight and bias (PyTorch's elementwise_affine=False).
  LayerNormOptions& elementwise_affine(bool affine) { affine_ = affine; return *this; }

  std::int64_t normalized_shape_;
  double eps_ = 1e-5;
  bool affine_ = true;
};

// PyTorch's LayerNorm over the last axis: each row of normalized_shape values x becomes
// (x - mean) / sqrt(var + eps) * weight + bias, with the row's mean and biased variance; weight [E] (ones) and bias
// [E] (zeros). One task per batch tile and pass; the weight gradients add the rows in batch order (tile by tile, one
// task after another), so that they are the same bits whatever the workers and the tile count.
class LayerNorm : public Layer {
 public:
  explicit LayerNorm(LayerNormOptions options);
  [[nodiscard]] std::string type() const override { return "LayerNorm"; }
  [[nodiscard]] std::string describe() const override;
  Shape build(const Shape& sample_input) override;
  void reset_parameters(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;
  [[nodiscard]] const LayerNormOptions& options() const { return options_; }

 private:
  // Each row's mean and rstd, from forward to backward: [n, rows per sample, 2].
  Tensor& stats(const Tensor& x);

  LayerNormOptions options_;
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
};

}  // namespace dtnn
