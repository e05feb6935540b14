// SPDX-License-Identifier: Apache-2.0
// Parameter-free layers: ReLU, MaxPool2d, Flatten.
#pragma once

#include "codelets/cpu/kernels.hpp"
#include "layers/layer.hpp"

namespace dtnn {

class ReLU : public Layer {
 public:
  [[nodiscard]] std::string type() const override { return "ReLU"; }
  Shape build(const Shape& sample_input) override { return record_shapes(sample_input, sample_input); }
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;
};

struct MaxPool2dOptions {
  explicit MaxPool2dOptions(int kernel_size) : kernel_h_(kernel_size), kernel_w_(kernel_size) {}
  MaxPool2dOptions& kernel(int h, int w) { kernel_h_ = h; kernel_w_ = w; return *this; }
  // Defaults to the kernel size, as in PyTorch.
  MaxPool2dOptions& stride(int s) { stride_h_ = stride_w_ = s; return *this; }
  MaxPool2dOptions& stride(int h, int w) { stride_h_ = h; stride_w_ = w; return *this; }
  MaxPool2dOptions& padding(int p) { pad_h_ = pad_w_ = p; return *this; }
  // PyTorch's ceil_mode: keep a last partial window (torchvision's GoogLeNet pools this way).
  MaxPool2dOptions& ceil_mode(int on) { ceil_mode_ = on; return *this; }

  int kernel_h_, kernel_w_;
  int stride_h_ = 0, stride_w_ = 0;  // 0: the kernel size
  int pad_h_ = 0, pad_w_ = 0;
  int ceil_mode_ = 0;
};

class MaxPool2d : public Layer {
 public:
  explicit MaxPool2d(MaxPool2dOptions options);
  [[nodiscard]] std::string type() const override { return "MaxPool2d"; }
  [[nodiscard]] std::string describe() const override;
  Shape build(const Shape& sample_input) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;
  [[nodiscard]] const Pool2dShape& geometry() const { return shape_; }

 private:
  MaxPool2dOptions options_;
  Pool2dShape shape_;
};

class Flatten : public Layer {
 public:
  [[nodiscard]] std::string type() const override { return "Flatten"; }
  Shape build(const Shape& sample_input) override { return record_shapes(sample_input, {numel(sample_input)}); }
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;
};

}  // namespace dtnn
