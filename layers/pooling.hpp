// SPDX-License-Identifier: Apache-2.0
// Pooling layers: MaxPool2d, AvgPool2d (PyTorch's AvgPool2d, floor mode) and GlobalAvgPool2d (AdaptiveAvgPool2d(1)).
// MaxPool2d and AvgPool2d share their window options' rules (kernel and stride at least 1, the stride defaulting to
// the kernel, PyTorch's padding <= kernel / 2) and the window geometry (Pool2dShape, core/shapes.hpp).
#pragma once

#include "core/shapes.hpp"
#include "layers/layer.hpp"

namespace dtnn {

struct MaxPool2dOptions {
  explicit MaxPool2dOptions(int kernel_size) : kernel_h_(kernel_size), kernel_w_(kernel_size) {}
  MaxPool2dOptions& kernel(int h, int w) { kernel_h_ = h; kernel_w_ = w; return *this; }
  // Defaults to the kernel size, as in PyTorch.
  MaxPool2dOptions& stride(int s) { stride_h_ = stride_w_ = s; return *this; }
  MaxPool2dOptions& stride(int h, int w) { stride_h_ = h; stride_w_ = w; return *this; }
  MaxPool2dOptions& padding(int p) { pad_h_ = pad_w_ = p; return *this; }
  // PyTorch's ceil_mode: keep a last partial window (torchvision's GoogLeNet pools this way).
  MaxPool2dOptions& ceil_mode(bool on) { ceil_mode_ = on; return *this; }

  int kernel_h_, kernel_w_;
  int stride_h_ = 0, stride_w_ = 0;  // 0: the kernel size
  int pad_h_ = 0, pad_w_ = 0;
  bool ceil_mode_ = false;
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

struct AvgPool2dOptions {
  explicit AvgPool2dOptions(int kernel_size) : kernel_h_(kernel_size), kernel_w_(kernel_size) {}
  AvgPool2dOptions& kernel(int h, int w) { kernel_h_ = h; kernel_w_ = w; return *this; }
  // Defaults to the kernel size, as in PyTorch.
  AvgPool2dOptions& stride(int s) { stride_h_ = stride_w_ = s; return *this; }
  AvgPool2dOptions& stride(int h, int w) { stride_h_ = h; stride_w_ = w; return *this; }
  AvgPool2dOptions& padding(int p) { pad_h_ = pad_w_ = p; return *this; }
  AvgPool2dOptions& padding(int h, int w) { pad_h_ = h; pad_w_ = w; return *this; }
  // 1 (PyTorch's default): padded cells count in the divisor; 0: only the cells inside the input.
  AvgPool2dOptions& count_include_pad(bool include) { count_include_pad_ = include; return *this; }

  int kernel_h_, kernel_w_;
  int stride_h_ = 0, stride_w_ = 0;  // 0: the kernel size
  int pad_h_ = 0, pad_w_ = 0;
  bool count_include_pad_ = true;
};

class AvgPool2d : public Layer {
 public:
  explicit AvgPool2d(AvgPool2dOptions options);
  [[nodiscard]] std::string type() const override { return "AvgPool2d"; }
  [[nodiscard]] std::string describe() const override;
  Shape build(const Shape& sample_input) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;
  [[nodiscard]] const AvgPool2dOptions& options() const { return options_; }
  [[nodiscard]] const Pool2dShape& geometry() const { return shape_; }

 private:
  AvgPool2dOptions options_;
  Pool2dShape shape_;
};

// Mean of every channel's plane: (C, H, W) -> (C, 1, 1), like PyTorch's AdaptiveAvgPool2d(1) (follow it with
// Flatten for a classifier).
class GlobalAvgPool2d : public Layer {
 public:
  [[nodiscard]] std::string type() const override { return "GlobalAvgPool2d"; }
  Shape build(const Shape& sample_input) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;

 private:
  int channels_ = 0;
};

}  // namespace dtnn
