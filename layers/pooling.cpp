// SPDX-License-Identifier: Apache-2.0
#include "layers/pooling.hpp"

#include <fmt/format.h>

#include "codelets/pooling.hpp"
#include "core/errors.hpp"

namespace dtnn {
namespace {

// The window options of MaxPool2d and AvgPool2d, which share every field below: the stride defaults to the
// kernel, and the checks are PyTorch's.
template <class Options>
void resolve_window(const char* type, Options& o) {
  if (o.stride_h_ == 0) o.stride_h_ = o.kernel_h_;
  if (o.stride_w_ == 0) o.stride_w_ = o.kernel_w_;
  if (o.kernel_h_ < 1 || o.kernel_w_ < 1 || o.stride_h_ < 1 || o.stride_w_ < 1) {
    throw InvalidArgument(fmt::format("{}: kernel {}x{} stride {}x{}, expected all >= 1", type, o.kernel_h_,
                                      o.kernel_w_, o.stride_h_, o.stride_w_));
  }
  // PyTorch's rule; it also guarantees that every window holds at least one input cell.
  if (o.pad_h_ < 0 || o.pad_w_ < 0 || 2 * o.pad_h_ > o.kernel_h_ || 2 * o.pad_w_ > o.kernel_w_) {
    throw InvalidArgument(fmt::format("{}: padding {}x{} with kernel {}x{}, expected 0 <= padding <= kernel/2", type,
                                      o.pad_h_, o.pad_w_, o.kernel_h_, o.kernel_w_));
  }
}

template <class Options>
std::string describe_window(const Options& o) {
  return fmt::format("{}x{}, stride {}x{}, padding {}x{}", o.kernel_h_, o.kernel_w_, o.stride_h_, o.stride_w_,
                     o.pad_h_, o.pad_w_);
}

// The geometry of the windows over a (C, H, W) input; InvalidArgument when the padded input is smaller than a
// window or, in ceil mode, no window fits.
template <class Options>
Pool2dShape window_geometry(const char* type, const std::string& name, const Shape& in, const Options& o,
                            int ceil_mode) {
  if (in.size() != 3) {
    throw InvalidArgument(fmt::format("{} {}: input {}, expected (C, H, W)", type, name, to_string(in)));
  }
  const Pool2dShape shape{1,           static_cast<int>(in[0]), static_cast<int>(in[1]), static_cast<int>(in[2]),
                          o.kernel_h_, o.kernel_w_, o.stride_h_, o.stride_w_, o.pad_h_, o.pad_w_, ceil_mode};
  // Compared before dividing: out_h() truncates a negative numerator towards zero and would report 1 row.
  if (in[1] + 2 * o.pad_h_ < o.kernel_h_ || in[2] + 2 * o.pad_w_ < o.kernel_w_ || shape.out_h() < 1 ||
      shape.out_w() < 1) {
    throw InvalidArgument(fmt::format("{} {}: input {} with padding {}x{} is smaller than the {}x{} window", type,
                                      name, to_string(in), o.pad_h_, o.pad_w_, o.kernel_h_, o.kernel_w_));
  }
  return shape;
}

}  // namespace

MaxPool2d::MaxPool2d(MaxPool2dOptions o) : options_(o) { resolve_window("MaxPool2d", options_); }

std::string MaxPool2d::describe() const {
  return describe_window(options_) + (options_.ceil_mode_ ? ", ceil" : "");
}

Shape MaxPool2d::build(const Shape& in) {
  shape_ = window_geometry("MaxPool2d", name(), in, options_, options_.ceil_mode_);
  return record_shapes(in, {in[0], shape_.out_h(), shape_.out_w()});
}

void MaxPool2d::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_maxpool2d_fwd({name(), ctx.priority}, shape_, x, y, t);
  }
}

void MaxPool2d::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) {
  if (dx == nullptr) {
    return;
  }
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_maxpool2d_bwd_data({name(), ctx.priority + 1}, shape_, x, dy, *dx, t);
  }
}

AvgPool2d::AvgPool2d(AvgPool2dOptions o) : options_(o) {
  resolve_window("AvgPool2d", options_);
}

std::string AvgPool2d::describe() const {
  const auto& p = options_;
  std::string s = describe_window(p);
  if ((p.pad_h_ > 0 || p.pad_w_ > 0) && !p.count_include_pad_) s += ", padding not counted";
  return s;
}

Shape AvgPool2d::build(const Shape& in) {
  shape_ = window_geometry("AvgPool2d", name(), in, options_, 0);
  return record_shapes(in, {in[0], shape_.out_h(), shape_.out_w()});
}

void AvgPool2d::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_avgpool2d_fwd({name(), ctx.priority}, shape_, options_.count_include_pad_, x, y, t);
  }
}

void AvgPool2d::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) {
  if (dx == nullptr) {
    return;
  }
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_avgpool2d_bwd_data({name(), ctx.priority + 1}, shape_, options_.count_include_pad_, dy, *dx, t);
  }
}

Shape GlobalAvgPool2d::build(const Shape& in) {
  if (in.size() != 3 || in[0] < 1 || in[1] < 1 || in[2] < 1) {
    throw InvalidArgument(fmt::format("GlobalAvgPool2d {}: input {}, expected (C, H, W)", name(), to_string(in)));
  }
  channels_ = static_cast<int>(in[0]);
  return record_shapes(in, {in[0], 1, 1});
}

void GlobalAvgPool2d::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_global_avgpool2d_fwd({name(), ctx.priority}, channels_, x, y, t);
  }
}

void GlobalAvgPool2d::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx,
                               const PassContext& ctx) {
  if (dx == nullptr) {
    return;
  }
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_global_avgpool2d_bwd_data({name(), ctx.priority + 1}, channels_, dy, *dx, t);
  }
}

}  // namespace dtnn
