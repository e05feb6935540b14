// SPDX-License-Identifier: Apache-2.0
#include "layers/conv2d.hpp"

#include <fmt/format.h>

#include "codelets/conv2d.hpp"
#include "codelets/cpu/onednn_conv.hpp"
#include "codelets/cpu/winograd.hpp"
#include "layers/init.hpp"
#include "runtime/codelet.hpp"
#include "runtime/machine.hpp"
#include "core/cpu_features.hpp"
#include "core/errors.hpp"

namespace dtnn {

const char* to_string(ConvVariant v) {
  switch (v) {
    case ConvVariant::kConvgemm: return "convgemm";
    case ConvVariant::kIm2col: return "im2col";
    case ConvVariant::kWinograd: return "winograd";
    case ConvVariant::kAuto: return "auto";
    case ConvVariant::kOneDnn: return "onednn";
  }
  return "?";
}

ConvVariant parse_conv_variant(const std::string& name, const std::string& option) {
  for (ConvVariant v : {ConvVariant::kConvgemm, ConvVariant::kIm2col, ConvVariant::kWinograd, ConvVariant::kAuto,
                        ConvVariant::kOneDnn}) {
    if (name == to_string(v)) return v;
  }
  throw InvalidArgument(fmt::format(
      "{}: unknown convolution variant '{}', expected convgemm, im2col, winograd, auto or onednn", option, name));
}

codelets::Precision parse_precision(const std::string& name, const std::string& option) {
  using codelets::Precision;
  for (Precision p :
       {Precision::kFp32, Precision::kBf16, Precision::kBf16Emulated, Precision::kBf16Amx, Precision::kTf32}) {
    if (name == codelets::to_string(p)) return p;
  }
  throw InvalidArgument(
      fmt::format("{}: unknown precision '{}', expected fp32, bf16, bf16-emulated, bf16-amx or tf32", option, name));
}

void check_precision_runs(codelets::Precision p, const std::string& option) {
  // A simulation runs no codelet: its tasks take the times of a calibration made where bf16 ran.
  if (p == codelets::Precision::kBf16 && !runtime::simulated() && !cpu_has_avx512_bf16()) {
    throw InvalidArgument(fmt::format(
        "{}: bf16 needs AVX512-BF16 (vdpbf16ps), which this CPU {}, expected a CPU with it (AMD Zen 4 or later, "
        "Intel Cooper Lake, Sapphire Rapids or later) or bf16-emulated (the same results, bit for bit, slowly)",
        option, cpu_isa_setting().capped() ? "may not use under DTNN_MAX_CPU_ISA" : "lacks"));
  }
  if (p == codelets::Precision::kBf16Amx && !runtime::simulated() && !cpu_has_amx_bf16()) {
    throw InvalidArgument(fmt::format(
        "{}: bf16-amx needs AMX-BF16 (TDPBF16PS) with Linux's permission to use its tiles, which this CPU {}, "
        "expected an Intel Sapphire Rapids or later, or bf16 (AVX512-BF16) or bf16-emulated",
        option, cpu_isa_setting().capped() ? "may not use under DTNN_MAX_CPU_ISA" : "or this kernel lacks"));
  }
}

void check_variant_runs(ConvVariant v, codelets::Precision p, const std::string& option) {
  if (v != ConvVariant::kOneDnn) return;
  if (p != codelets::Precision::kBf16 && p != codelets::Precision::kBf16Amx) {
    throw InvalidArgument(fmt::format("{}: onednn computes in bf16 only, and the precision is {}, expected "
                                      "--precision bf16 or bf16-amx (or another --conv)",
                                      option, codelets::to_string(p)));
  }
  if (!runtime::simulated() && !kernels::cpu::onednn_built()) {
    throw InvalidArgument(fmt::format("{}: onednn, but this dtnn was built without oneDNN (libdnnl-dev, which "
                                      "scripts/setup.sh installs), expected a build with it or another --conv",
                                      option));
  }
}

Conv2d::Conv2d(Conv2dOptions o) : options_(o) {
  set_variant(o.variant_);
  set_precision(o.precision_);
  auto positive = [](const char* what, int v) {
    if (v < 1) {
      throw InvalidArgument(fmt::format("Conv2d: {}={}, expected >= 1", what, v));
    }
  };
  positive("in_channels", o.in_);
  positive("out_channels", o.out_);
  positive("kernel height", o.kernel_h_);
  positive("kernel width", o.kernel_w_);
  positive("stride", std::min(o.stride_h_, o.stride_w_));
  positive("dilation", std::min(o.dil_h_, o.dil_w_));
  positive("groups", o.groups_);
  if (o.pad_h_ < 0 || o.pad_w_ < 0) {
    throw InvalidArgument(fmt::format("Conv2d: padding=({}, {}), expected >= 0", o.pad_h_, o.pad_w_));
  }
  if (o.in_ % o.groups_ != 0 || o.out_ % o.groups_ != 0) {
    throw InvalidArgument(fmt::format("Conv2d: in_channels={} out_channels={} with groups={}: both must be "
                                      "divisible by groups",
                                      o.in_, o.out_, o.groups_));
  }
}

std::string Conv2d::describe() const {
  const auto& o = options_;
  std::string s = fmt::format("{}x{}, stride {}", o.kernel_h_, o.kernel_w_, o.stride_h_);
  if (o.stride_w_ != o.stride_h_) s += fmt::format("x{}", o.stride_w_);
  s += fmt::format(", padding {}", o.pad_h_);
  if (o.pad_w_ != o.pad_h_) s += fmt::format("x{}", o.pad_w_);
  if (o.dil_h_ != 1 || o.dil_w_ != 1) s += fmt::format(", dilation {}x{}", o.dil_h_, o.dil_w_);
  if (o.groups_ != 1) s += fmt::format(", groups {}", o.groups_);
  if (!o.bias_) s += ", no bias";
  if (o.relu_) s += ", +ReLU";
  if (o.precision_ != codelets::Precision::kFp32) {
    // Winograd's forward and backward-data stay fp32 in bf16 (codelets/conv2d.hpp).
    const bool winograd = algorithm_ == codelets::ConvAlgorithm::kWinograd && codelets::is_bf16(o.precision_);
    s += fmt::format(", {}{}", winograd ? "weight gradients " : "", codelets::to_string(o.precision_));
  }
  return s + ", " + algorithm();
}

std::string Conv2d::algorithm() const {
  if (options_.variant_ == ConvVariant::kWinograd) {
    // The layers Winograd does not serve say so: "winograd: convgemm"; those it serves from some batch on, which.
    if (algorithm_ != codelets::ConvAlgorithm::kWinograd) return "winograd: convgemm";
    return winograd_min_batch_ > 1 ? fmt::format("winograd ({}+ samples/tile)", winograd_min_batch_)
                                   : std::string("winograd");
  }
  if (options_.variant_ == ConvVariant::kOneDnn && weight_ != nullptr &&
      !codelets::conv_algorithm_fits(codelets::ConvAlgorithm::kOneDnn, shape_)) {
    return "onednn: convgemm";
  }
  if (options_.variant_ != ConvVariant::kAuto) return to_string(options_.variant_);
  if (!decided_) return "auto";
  if (plan_.uniform()) return fmt::format("auto: {}", codelets::to_string(plan_.fwd));
  return fmt::format("auto: {} forward, {} backward-data, {} weight gradients", codelets::to_string(plan_.fwd),
                     codelets::to_string(plan_.bwd_data), codelets::to_string(plan_.bwd_weights));
}

void Conv2d::set_precision(codelets::Precision p) {
  check_precision_runs(p, "Conv2d precision");
  options_.precision_ = p;
  decided_ = 0;  // an auto layer measures its algorithms in the precision it runs
}

void Conv2d::set_variant(ConvVariant v) {
  options_.variant_ = v;
  decided_ = 0;
  algorithm_ = v == ConvVariant::kIm2col   ? codelets::ConvAlgorithm::kIm2col
               : v == ConvVariant::kOneDnn ? codelets::ConvAlgorithm::kOneDnn
                                           : codelets::ConvAlgorithm::kConvgemm;
  choose_winograd();
}

void Conv2d::choose_winograd() {
  // The geometry is known once the layer is built; a tile's samples decide the rest (resolve).
  if (options_.variant_ == ConvVariant::kWinograd) {
    winograd_min_batch_ = kernels::cpu::winograd_min_batch(shape_);
    algorithm_ = winograd_min_batch_ > 0 ? codelets::ConvAlgorithm::kWinograd : codelets::ConvAlgorithm::kConvgemm;
  }
}

codelets::ConvPlan Conv2d::resolve(const Tensor& x, int tile, codelets::ConvIo io) {
  using codelets::ConvAlgorithm;
  using codelets::ConvPlan;
  // oneDNN where it serves the geometry (every one on an AVX-512 CPU), convgemm elsewhere: decided once.
  if (options_.variant_ == ConvVariant::kOneDnn) {
    if (!decided_) {
      check_variant_runs(options_.variant_, options_.precision_, fmt::format("Conv2d {}", name()));
      plan_ = ConvPlan::all(codelets::conv_algorithm_fits(ConvAlgorithm::kOneDnn, shape_) ? ConvAlgorithm::kOneDnn
                                                                                           : ConvAlgorithm::kConvgemm);
      decided_ = 1;
    }
    return plan_;
  }
  // A Winograd layer's tiles of fewer samples than pay (their weight transform would cost more than it saves).
  if (options_.variant_ == ConvVariant::kWinograd && algorithm_ == ConvAlgorithm::kWinograd &&
      x.tile_range(tile).count < winograd_min_batch_) {
    return ConvPlan::all(ConvAlgorithm::kConvgemm);
  }
  if (options_.variant_ != ConvVariant::kAuto) return ConvPlan::all(algorithm_);
  // Only tasks on CPU workers use the CPU algorithm: on GPUs alone (--device cuda) there is nothing to time.
  if (!decided_ && runtime::task_device() == runtime::Device::kCuda) {
    return ConvPlan::all(algorithm_);
  }
  if (!decided_) {
    Conv2dShape s = shape_;
    s.n = static_cast<int>(x.tile_range(0).count);
    plan_ = codelets::fastest_conv_plan(s, options_.precision_, io);
    algorithm_ = plan_.fwd;
    decided_ = 1;
  }
  return plan_;
}

Shape Conv2d::build(const Shape& in) {
  const auto& o = options_;
  if (in.size() != 3 || in[0] != o.in_) {
    throw InvalidArgument(fmt::format("Conv2d {}: input {}, expected (C={}, H, W)", name(), to_string(in), o.in_));
  }
  shape_ = Conv2dShape{};
  shape_.c = o.in_;
  shape_.h = static_cast<int>(in[1]);
  shape_.w = static_cast<int>(in[2]);
  shape_.k = o.out_;
  shape_.r = o.kernel_h_;
  shape_.s = o.kernel_w_;
  shape_.stride_h = o.stride_h_;
  shape_.stride_w = o.stride_w_;
  shape_.pad_top = shape_.pad_bottom = o.pad_h_;
  shape_.pad_left = shape_.pad_right = o.pad_w_;
  shape_.dil_h = o.dil_h_;
  shape_.dil_w = o.dil_w_;
  shape_.groups = o.groups_;
  const int oh = shape_.out_h();
  const int ow = shape_.out_w();
  // Integer division rounds a negative numerator towards zero: compare sizes before trusting out_h/out_w.
  const bool too_small = shape_.h + shape_.pad_top + shape_.pad_bottom < shape_.dil_h * (shape_.r - 1) + 1 ||
                         shape_.w + shape_.pad_left + shape_.pad_right < shape_.dil_w * (shape_.s - 1) + 1;
  if (too_small || oh < 1 || ow < 1) {
    throw InvalidArgument(fmt::format("Conv2d {}: input {} is smaller than the dilated {}x{} kernel with padding "
                                      "{}x{}, output would be {}x{}, expected at least 1x1",
                                      name(), to_string(in), o.kernel_h_, o.kernel_w_, o.pad_h_, o.pad_w_, oh, ow));
  }
  choose_winograd();
  weight_ = &add_parameter("weight", {o.out_, o.in_ / o.groups_, o.kernel_h_, o.kernel_w_});
  if (o.bias_) {
    bias_ = &add_parameter("bias", {o.out_});
  }
  return record_shapes(in, {o.out_, oh, ow});
}

void Conv2d::reset_parameters(Rng& rng) {
  const auto& o = options_;
  const std::int64_t window = static_cast<std::int64_t>(o.kernel_h_) * o.kernel_w_;
  init::initialize(o.init_, *weight_, bias_, (o.in_ / o.groups_) * window, (o.out_ / o.groups_) * window, rng);
}

void Conv2d::fold_scale_shift(const std::vector<float>& scale, const std::vector<float>& shift) {
  const auto k = static_cast<std::size_t>(options_.out_);
  if (scale.size() != k || shift.size() != k) {
    throw InvalidArgument(fmt::format("Conv2d {}: folding {} scales and {} shifts, expected {} (output channels)",
                                      name(), scale.size(), shift.size(), k));
  }
  {
    auto w = weight_->value.read_write();
    const std::size_t per_channel = w.data().size() / k;
    for (std::size_t c = 0; c < k; ++c) {
      for (std::size_t i = 0; i < per_channel; ++i) w[static_cast<std::int64_t>(c * per_channel + i)] *= scale[c];
    }
  }
  if (bias_ == nullptr) {
    bias_ = &add_parameter("bias", {options_.out_});
    options_.bias_ = true;
  }
  auto b = bias_->value.read_write();
  for (std::size_t c = 0; c < k; ++c) {
    b[static_cast<std::int64_t>(c)] = b[static_cast<std::int64_t>(c)] * scale[c] + shift[c];
  }
}

bool Conv2d::writes_bf16() const { return codelets::is_bf16(options_.precision_) && !options_.relu_; }
bool Conv2d::reads_bf16() const { return codelets::is_bf16(options_.precision_); }

int Conv2d::fuse_relu() {
  if (options_.relu_) return 0;
  options_.relu_ = true;
  return 1;
}

namespace {
// Which of a pass's batch tensors (x and dx, y and dy: each pair of one type) the container stores in bf16.
codelets::ConvIo io(const Tensor& x, const Tensor& y) {
  return {x.dtype() == DType::kBFloat16, y.dtype() == DType::kBFloat16};
}
}  // namespace

void Conv2d::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  const codelets::TaskTag tag{name(), ctx.priority};
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_conv2d_fwd(tag, resolve(x, t, io(x, y)).fwd, shape_, x, weight_->value,
                                bias_ ? &bias_->value : nullptr, options_.relu_, y, t, options_.precision_);
  }
}

void Conv2d::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) {
  const codelets::TaskTag data_tag{name(), ctx.priority + 1};
  const codelets::TaskTag weights_tag{name(), ctx.priority};
  // The fused ReLU's backward: the gradient of the convolution's output is dy where y > 0.
  const Tensor* g = &before_fused_relu(options_.relu_, x, y, dy, data_tag.priority);
  if (dx != nullptr) {
    for (int t = 0; t < dy.tiles(); ++t) {
      codelets::submit_conv2d_bwd_data(data_tag, resolve(x, t, io(x, dy)).bwd_data, shape_, *g, weight_->value, *dx,
                                       t, options_.precision_);
    }
  }
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_conv2d_bwd_weights(weights_tag, resolve(x, t, io(x, dy)).bwd_weights, shape_, x, *g,
                                        weight_->tile_grads, bias_ ? &bias_->tile_grads : nullptr, t,
                                        options_.precision_);
  }
  submit_gradient_sums(dy.tiles(), ctx);
  // The masked gradient's last readers are the tasks above (a transient scratch's memory goes back now).
  if (g != &dy) g->discard();
}

}  // namespace dtnn
