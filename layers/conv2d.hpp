// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "codelets/kinds.hpp"
#include "core/shapes.hpp"
#include "layers/init.hpp"
#include "layers/layer.hpp"

namespace dtnn {

// How a Conv2d computes: convgemm (no workspace), explicit im2col + sgemm, winograd (Winograd F(2x2, 3x3) for the
// forward and backward-data passes of a layer it serves, 3x3 stride 1, and convgemm for everything else), or
// auto, which times each that fits on the first batch of each shape, pass by pass, and keeps the fastest of each
// pass; or onednn, oneDNN's bf16 convolutions (precisions bf16 and bf16-amx only, in builds with oneDNN:
// codelets/cpu/onednn_conv.hpp), convgemm for a geometry oneDNN does not serve.
enum class ConvVariant { kConvgemm, kIm2col, kWinograd, kAuto, kOneDnn };

const char* to_string(ConvVariant v);
// "convgemm", "im2col", "winograd", "auto" or "onednn"; InvalidArgument naming `option` otherwise.
ConvVariant parse_conv_variant(const std::string& name, const std::string& option);
// "fp32", "bf16", "bf16-emulated", "bf16-amx" or "tf32"; InvalidArgument naming `option` otherwise.
codelets::Precision parse_precision(const std::string& name, const std::string& option);
// InvalidArgument naming `option` for bf16 on a CPU without AVX512-BF16 (or with DTNN_MAX_CPU_ISA below avx512).
void check_precision_runs(codelets::Precision p, const std::string& option);
// InvalidArgument naming `option` for onednn in fp32 or bf16-emulated, or in a build without oneDNN.
void check_variant_runs(ConvVariant v, codelets::Precision p, const std::string& option);

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
  Conv2dOptions& bias(bool with_bias) { bias_ = with_bias; return *this; }
  Conv2dOptions& variant(ConvVariant v) { variant_ = v; return *this; }
  // The arithmetic (codelets/kinds.hpp): fp32 (the default), bf16 or bf16-emulated; in bf16 every pass of a
  // convgemm or im2col layer, the weight gradients of a Winograd layer (codelets/conv2d.hpp).
  Conv2dOptions& precision(codelets::Precision p) { precision_ = p; return *this; }
  // true: ReLU applied to the output in the same task (in convgemm's GEMM epilogue); backward masks the gradient.
  Conv2dOptions& relu(bool fused) { relu_ = fused; return *this; }
  Conv2dOptions& init(init::Init i) { init_ = i; return *this; }

  int in_, out_;
  int kernel_h_, kernel_w_;
  int stride_h_ = 1, stride_w_ = 1;
  int pad_h_ = 0, pad_w_ = 0;
  int dil_h_ = 1, dil_w_ = 1;
  int groups_ = 1;
  bool bias_ = true;
  ConvVariant variant_ = ConvVariant::kConvgemm;
  codelets::Precision precision_ = codelets::Precision::kFp32;
  bool relu_ = false;
  init::Init init_ = init::Init::kPyTorchDefault;
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
  [[nodiscard]] const Conv2dShape& geometry() const { return shape_; }
  // The algorithm in use: the chosen one, or the measured best once an auto layer has seen a batch.
  [[nodiscard]] std::string algorithm() const;
  // The variant of every later pass (auto measures again at the next batch).
  void set_variant(ConvVariant v);
  // The precision of every later pass; InvalidArgument for bf16 where the CPU lacks AVX512-BF16.
  void set_precision(codelets::Precision p);
  // Inference folding of a following per-channel affine map (BatchNorm): w[k] *= scale[k], b[k] = b[k] * scale[k]
  // + shift[k] (a bias is created when the layer had none). Waits for the tasks that use the weights.
  void fold_scale_shift(const std::vector<float>& scale, const std::vector<float>& shift);
  // Fused passes (models/fusion.hpp): the following ReLU in the forward task's epilogue (options().relu_).
  int fuse_relu() override;
  // In a bf16 precision: the input and its gradient may be bf16 (reads_bf16), and without a fused ReLU the output
  // and its gradient (writes_bf16); each pass then reads or rounds them in codelets of their own ("..._bf16in",
  // "..._bf16out", "..._bf16inout").
  [[nodiscard]] bool writes_bf16() const override;
  [[nodiscard]] bool reads_bf16() const override;
  [[nodiscard]] Parameter& weight() { return *weight_; }
  [[nodiscard]] Parameter* bias() { return bias_; }

 private:
  // The algorithms of tile `tile`'s tasks, pass by pass.
  // io: which of the layer's batch tensors are bf16 (auto times its candidates so).
  codelets::ConvPlan resolve(const Tensor& x, int tile, codelets::ConvIo io);
  // Under the winograd variant: Winograd where it serves the geometry (from winograd_min_batch_ samples a tile),
  // convgemm elsewhere.
  void choose_winograd();

  Conv2dOptions options_;
  Conv2dShape shape_;
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
  int decided_ = 0;  // an auto layer has measured (an onednn layer has checked its precision)
  codelets::ConvAlgorithm algorithm_ = codelets::ConvAlgorithm::kConvgemm;  // an auto layer's: its forward's
  codelets::ConvPlan plan_;  // an auto layer's measured choice, pass by pass (an onednn layer's: oneDNN or convgemm)
  int winograd_min_batch_ = 0;  // kernels::cpu::winograd_min_batch of the geometry
};

}  // namespace dtnn
