// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "codelets/cpu/kernels.hpp"
#include "layers/layer.hpp"

namespace dtnn {

struct Conv2dOptions {
  Conv2dOptions(int in_channels, int out_channels, int kernel_size)
      : in_(in_channels), out_(out_channels), kernel_h_(kernel_size), kernel_w_(kernel_size) {}
  Conv2dOptions& kernel(int h, int w) { kernel_h_ = h; kernel_w_ = w; return *this; }
  Conv2dOptions& stride(int s) { stride_h_ = stride_w_ = s; return *this; }
  Conv2dOptions& stride(int h, int w) { stride_h_ = h; stride_w_ = w; return *this; }
  Conv2dOptions& padding(int p) { pad_h_ = pad_w_ = p; return *this; }
  Conv2dOptions& padding(int h, int w) { pad_h_ = h; pad_w_ = w; return *this; }
  Conv2dOptions& dilation(int d) { dil_h_ = dil_w_ = d; return *this; }
  Conv2dOptions& groups(int g) { groups_ = g; return *this; }
  Conv2dOptions& bias(int with_bias) { bias_ = with_bias; return *this; }

  int in_, out_;
  int kernel_h_, kernel_w_;
  int stride_h_ = 1, stride_w_ = 1;
  int pad_h_ = 0, pad_w_ = 0;
  int dil_h_ = 1, dil_w_ = 1;
  int groups_ = 1;
  int bias_ = 1;
};

// 2-D convolution, NCHW, weights [out, in/groups, kh, kw] (PyTorch's Conv2d).
class Conv2d : public Layer {
 public:
  explicit Conv2d(Conv2dOptions options);
  [[nodiscard]] std::string type() const override { return "Conv2d"; }
  [[nodiscard]] std::string describe() const override;
  Shape build(const Shape& sample_input) override;
  void reset_parameters(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;
  [[nodiscard]] const Conv2dOptions& options() const { return options_; }
  [[nodiscard]] const kernels::cpu::Conv2dShape& geometry() const { return shape_; }

 private:
  Conv2dOptions options_;
  kernels::cpu::Conv2dShape shape_;
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
};

}  // namespace dtnn
