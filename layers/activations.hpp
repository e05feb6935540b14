// SPDX-License-Identifier: Apache-2.0
// Activation layers: element-wise Sigmoid, Tanh, LeakyReLU, ELU, GELU (ReLU is in simple.hpp), and Softmax over
// the channels. Element-wise ones accept any per-sample shape.
#pragma once

#include <string>
#include <utility>

#include "codelets/kinds.hpp"
#include "layers/layer.hpp"

namespace dtnn {

// Shared body of the element-wise activations: one forward and one backward task per tile.
class ElementwiseActivation : public Layer {
 public:
  Shape build(const Shape& sample_input) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;

 protected:
  explicit ElementwiseActivation(codelets::ActivationSpec spec) : spec_(spec) {}

 private:
  codelets::ActivationSpec spec_;
};

// 1 / (1 + exp(-x)), stable for large |x|.
class Sigmoid : public ElementwiseActivation {
 public:
  Sigmoid() : ElementwiseActivation({codelets::ActivationKind::kSigmoid, 0.0f}) {}
  [[nodiscard]] std::string type() const override { return "Sigmoid"; }
};

class Tanh : public ElementwiseActivation {
 public:
  Tanh() : ElementwiseActivation({codelets::ActivationKind::kTanh, 0.0f}) {}
  [[nodiscard]] std::string type() const override { return "Tanh"; }
};

struct LeakyReLUOptions {
  LeakyReLUOptions& negative_slope(float s) { negative_slope_ = s; return *this; }
  float negative_slope_ = 0.01f;
};

// x > 0 ? x : negative_slope * x
class LeakyReLU : public ElementwiseActivation {
 public:
  explicit LeakyReLU(LeakyReLUOptions options = LeakyReLUOptions());
  [[nodiscard]] std::string type() const override { return "LeakyReLU"; }
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] const LeakyReLUOptions& options() const { return options_; }

 private:
  LeakyReLUOptions options_;
};

struct ELUOptions {
  ELUOptions& alpha(float a) { alpha_ = a; return *this; }
  float alpha_ = 1.0f;
};

// x > 0 ? x : alpha * (exp(x) - 1)
class ELU : public ElementwiseActivation {
 public:
  explicit ELU(ELUOptions options = ELUOptions());
  [[nodiscard]] std::string type() const override { return "ELU"; }
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] const ELUOptions& options() const { return options_; }

 private:
  ELUOptions options_;
};

struct GELUOptions {
  // PyTorch's approximate: "none" (the exact GELU) or "tanh".
  GELUOptions& approximate(std::string a) { approximate_ = std::move(a); return *this; }
  std::string approximate_ = "none";
};

// GELU as PyTorch's nn.GELU(approximate): exact, x * Phi(x) with the normal CDF through erf (the default), or the
// tanh approximation 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) of GPT-2.
class GELU : public ElementwiseActivation {
 public:
  explicit GELU(GELUOptions options = GELUOptions());
  [[nodiscard]] std::string type() const override { return "GELU"; }
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] const GELUOptions& options() const { return options_; }

 private:
  GELUOptions options_;
};

struct SoftmaxOptions {
  // The dimension of the batch tensor (PyTorch's dim): 1 (default) is the first per-sample one, the features of an
  // (N, F) input and the channels of an (N, C, H, W) one; -1 the last, the vocabulary of (N, S, V) logits.
  SoftmaxOptions& dim(int d) { dim_ = d; return *this; }
  int dim_ = 1;
};

// Softmax over one dimension at every other position (PyTorch's nn.Softmax(dim)). Backward is the full
// Jacobian-vector product, dx = y * (dy - sum(dy * y)). For classification losses the fused softmax +
// cross-entropy is more accurate.
class Softmax : public Layer {
 public:
  explicit Softmax(SoftmaxOptions options = SoftmaxOptions()) : options_(options) {}
  [[nodiscard]] std::string type() const override { return "Softmax"; }
  [[nodiscard]] std::string describe() const override;
  Shape build(const Shape& sample_input) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;

 private:
  SoftmaxOptions options_;
  std::int64_t outer_ = 1;
  int channels_ = 0;
};

}  // namespace dtnn
