// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "codelets/kinds.hpp"
#include "layers/init.hpp"
#include "layers/layer.hpp"

namespace dtnn {

struct DenseOptions {
  DenseOptions(std::int64_t in_features, std::int64_t out_features) : in_(in_features), out_(out_features) {}
  DenseOptions& bias(bool with_bias) { bias_ = with_bias; return *this; }
  DenseOptions& init(init::Init i) { init_ = i; return *this; }
  // true: ReLU applied to the output in the same task; backward masks the gradient.
  DenseOptions& relu(bool fused) { relu_ = fused; return *this; }
  // tf32 (codelets/kinds.hpp): cuBLAS's TF32 math on GPU workers (one row per sample; a sequence's in-order weight
  // gradients stay fp32); any other precision computes in fp32 (dense layers have no bf16 kernels yet).
  DenseOptions& precision(codelets::Precision p) { precision_ = p; return *this; }

  std::int64_t in_;
  std::int64_t out_;
  bool bias_ = true;
  bool relu_ = false;
  init::Init init_ = init::Init::kPyTorchDefault;
  codelets::Precision precision_ = codelets::Precision::kFp32;
};

// y = x W^T + b with W [out, in] (PyTorch's Linear), on the last axis: a (..., in_features) sample gives
// (..., out_features), each position of a sequence (S, E) through the same weights. A sample whose last axis is
// not in_features but which holds in_features values in all (a (C, H, W) feature map) is read as flattened and
// gives (out_features), as before there was a Flatten.
class Dense : public Layer {
 public:
  explicit Dense(DenseOptions options);
  [[nodiscard]] std::string type() const override { return "Dense"; }
  [[nodiscard]] std::string describe() const override;
  Shape build(const Shape& sample_input) override;
  void reset_parameters(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;
  [[nodiscard]] const DenseOptions& options() const { return options_; }
  // Fused passes (models/fusion.hpp): the following ReLU in the forward task (options().relu_).
  int fuse_relu() override;
  // The precision of every later pass (DenseOptions::precision).
  void set_precision(codelets::Precision p) { options_.precision_ = p; }

 private:
  [[nodiscard]] bool tf32() const { return options_.precision_ == codelets::Precision::kTf32; }
  DenseOptions options_;
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
  // Several rows per sample (a sequence on the last axis): the weight gradients are summed sample by sample in batch
  // order (the same bits for any tile count; a sequence's GEMM of seq rows keeps that efficient). One row per
  // sample: per-tile partial GEMMs summed in tile order (the same bits for a given tile count, as the classifiers'
  // convolutions; a GEMM per sample would be a rank-1 update).
  bool sequence_ = false;
};

}  // namespace dtnn
