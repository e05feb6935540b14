// SPDX-License-Identifier: Apache-2.0
// Parameter-free layers: ReLU, Flatten. (MaxPool2d is with the other pooling layers, layers/pooling.hpp.)
#pragma once

#include "layers/layer.hpp"

namespace dtnn {

class ReLU : public Layer {
 public:
  [[nodiscard]] std::string type() const override { return "ReLU"; }
  [[nodiscard]] std::string describe() const override;
  Shape build(const Shape& sample_input) override { return record_shapes(sample_input, sample_input); }
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;
};

class Flatten : public Layer {
 public:
  [[nodiscard]] std::string type() const override { return "Flatten"; }
  Shape build(const Shape& sample_input) override { return record_shapes(sample_input, {numel(sample_input)}); }
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;
};

}  // namespace dtnn
