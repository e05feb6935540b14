// SPDX-License-Identifier: Apache-2.0
// ShortcutPad: the parameter-free residual shortcut ("option A") of He et al. 2016's CIFAR ResNets, where a stage
// halves the resolution and doubles the channels: x[:, :, ::stride, ::stride] with (out - in) / 2 zero channels
// before and after (akamaster/pytorch_resnet_cifar10's LambdaLayer).
#pragma once

#include "core/shapes.hpp"
#include "layers/layer.hpp"

namespace dtnn {

struct ShortcutPadOptions {
  ShortcutPadOptions(int in_channels, int out_channels) : in_(in_channels), out_(out_channels) {}
  ShortcutPadOptions& stride(int s) { stride_ = s; return *this; }

  int in_, out_;
  int stride_ = 1;
};

class ShortcutPad : public Layer {
 public:
  // Throws InvalidArgument unless 1 <= in <= out, out - in is even (the zeros go equally on both sides) and
  // stride >= 1.
  explicit ShortcutPad(ShortcutPadOptions options);
  [[nodiscard]] std::string type() const override { return "ShortcutPad"; }
  [[nodiscard]] std::string describe() const override;
  Shape build(const Shape& sample_input) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;
  [[nodiscard]] const ShortcutPadOptions& options() const { return options_; }
  [[nodiscard]] const ShortcutPadShape& geometry() const { return shape_; }

 private:
  ShortcutPadOptions options_;
  ShortcutPadShape shape_;
};

}  // namespace dtnn
