// SPDX-License-Identifier: Apache-2.0
// BatchNorm2d (PyTorch's, NCHW; an (N, C) input is normalised per feature like BatchNorm1d).
#pragma once

#include <cstdint>
#include <vector>

#include "codelets/kinds.hpp"
#include "layers/layer.hpp"

namespace dtnn {

struct BatchNorm2dOptions {
  explicit BatchNorm2dOptions(std::int64_t num_features) : features_(num_features) {}
  BatchNorm2dOptions& eps(double e) { eps_ = e; return *this; }
  // PyTorch's convention: running = (1 - momentum) * running + momentum * batch statistic.
  BatchNorm2dOptions& momentum(double m) { momentum_ = m; return *this; }
  // true: learnable per-channel scale ("weight", gamma) and shift ("bias", beta); false: none.
  BatchNorm2dOptions& affine(bool with_affine) { affine_ = with_affine; return *this; }

  std::int64_t features_;
  double eps_ = 1e-5;
  double momentum_ = 0.1;
  bool affine_ = true;
};

// Training normalises with the statistics of the whole batch (all tiles), reduced in sample order so that the
// tile count never changes a bit of the output, the running statistics or the gradients; evaluation uses the
// running statistics. Parameters "weight" and "bias" (with affine); buffers "running_mean", "running_var" and
// "num_batches_tracked" (a 1-element float tensor), as PyTorch names them.
//
// Task graph of a training step, T tiles (tasks per tile run in parallel; the reductions are one task each,
// or a chain of ceil(T / 7) when the tiles exceed StarPU's 8 buffers per task):
//   fwd_sum[t] -> fwd_mean -> fwd_sqdev[t] -> fwd_var (also updates the running statistics) -> fwd[t]
//   bwd_sum[t] -> bwd_weights (dgamma, dbeta into the parameters' grad) -> bwd_data[t]
// The parameter gradients are written whole by bwd_weights: no per-tile partials, so tile_grads stay unused.
class BatchNorm2d : public Layer {
 public:
  explicit BatchNorm2d(BatchNorm2dOptions options);
  [[nodiscard]] std::string type() const override { return "BatchNorm2d"; }
  [[nodiscard]] std::string describe() const override;
  Shape build(const Shape& sample_input) override;
  // weight 1, bias 0, running mean 0, running variance 1, no batch tracked (PyTorch's reset_parameters).
  void reset_parameters(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  // In evaluation mode (ctx.training == 0) the statistics are constants: the gradients of a frozen BatchNorm.
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;
  [[nodiscard]] const BatchNorm2dOptions& options() const { return options_; }

  // Fused passes (models/fusion.hpp). The ReLU after the layer runs in the forward task (y = ReLU(bn(x)), one tensor
  // written instead of two), and the backward tasks read the ReLU's output y to mask dy themselves (no masked
  // gradient tensor, no ReLU task). Declined once folded.
  int fuse_relu() override;
  // Its statistics, normalisation and data gradient read a bf16 input (a convolution's output in a bf16 precision)
  // and store the input's gradient in bf16, computing in fp32 (codelets "..._bf16in"); not once folded, where
  // the inference passes are a copy, a ReLU or an add.
  [[nodiscard]] bool reads_bf16() const override { return folded_ == 0; }
  // Likewise its output (with the fused ReLU's) and that output's gradient, rounded as stored (a ReLU mask read from
  // a bf16 output is the same mask: rounding keeps the sign and zero).
  [[nodiscard]] bool writes_bf16() const override { return folded_ == 0; }
  [[nodiscard]] int relu_fused() const { return relu_; }
  // A residual block (layers/block.hpp) whose Add this layer's output feeds: y = bn(x) + residual, then ReLU when
  // relu != 0, in the forward task; the statistics passes are the usual ones. Bitwise the separate passes.
  void forward_into_sum(const Tensor& x, const Tensor& residual, int relu, Tensor& y, const PassContext& ctx);
  // The backward pass of forward_into_sum(..., relu = 1, y): dy is the gradient of y, masked by y > 0 inside the
  // tasks. (Without the ReLU, or with the masked gradient formed by the block, backward() applies.)
  void backward_masked(const Tensor& x, const Tensor& relu_y, const Tensor& dy, Tensor* dx, const PassContext& ctx);

  // The running statistics as one affine map per channel, y = x * scale + shift with scale = gamma /
  // sqrt(running_var + eps) and shift = beta - running_mean * scale: what folds this layer into the preceding
  // convolution for inference. Waits for the tasks that update the statistics.
  void folded_scale_shift(std::vector<float>& scale, std::vector<float>& shift) const;

  // After its statistics were folded into the preceding convolution (models/fusion.hpp): inference passes the
  // input through unchanged; training is refused.
  void mark_folded() { folded_ = 1; }
  [[nodiscard]] int folded() const { return folded_; }

  [[nodiscard]] Tensor& running_mean() { return running_mean_->value; }
  [[nodiscard]] Tensor& running_var() { return running_var_->value; }
  [[nodiscard]] Tensor& num_batches_tracked() { return batches_->value; }

 private:
  enum ScratchId : int { kPartials = 0, kGradPartials, kStats, kGradStats, kAccumulator, kGlobalPartials,
                         kGlobalGradPartials };

  void forward_with(const Tensor& x, const codelets::BatchNormEpilogue& epilogue, Tensor& y, const PassContext& ctx);
  // relu_y: the fused ReLU's output whose mask applies to dy, or null.
  void backward_with(const Tensor& x, const Tensor* relu_y, const Tensor& dy, Tensor* dx, const PassContext& ctx);
  [[nodiscard]] int plane_size() const;
  // Rows the statistics cover: this rank's, or every rank's when synchronised.
  [[nodiscard]] std::int64_t batch_rows(std::int64_t local_rows, const PassContext& ctx) const;

  BatchNorm2dOptions options_;
  int channels_ = 0;
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
  Buffer* running_mean_ = nullptr;
  Buffer* running_var_ = nullptr;
  Buffer* batches_ = nullptr;
  int folded_ = 0;
  int relu_ = 0;
};

}  // namespace dtnn
