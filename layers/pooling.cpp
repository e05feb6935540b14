// SPDX-License-Identifier: Apache-2.0
#include "layers/pooling.hpp"

#include <fmt/format.h>

#include "codelets/avgpool2d.hpp"
#include "codelets/global_avgpool2d.hpp"
#include "core/errors.hpp"

namespace dtnn {

AvgPool2d::AvgPool2d(AvgPool2dOptions o) : options_(o) {
  if (options_.stride_h_ == 0) options_.stride_h_ = options_.kernel_h_;
  if (options_.stride_w_ == 0) options_.stride_w_ = options_.kernel_w_;
  const auto& p = options_;
  if (p.kernel_h_ < 1 || p.kernel_w_ < 1 || p.stride_h_ < 1 || p.stride_w_ < 1) {
    throw InvalidArgument(fmt::format("AvgPool2d: kernel {}x{} stride {}x{}, expected all >= 1", p.kernel_h_,
                                      p.kernel_w_, p.stride_h_, p.stride_w_));
  }
  // PyTorch's rule; it also guarantees that every window holds at least one input cell.
  if (p.pad_h_ < 0 || p.pad_w_ < 0 || 2 * p.pad_h_ > p.kernel_h_ || 2 * p.pad_w_ > p.kernel_w_) {
    throw InvalidArgument(fmt::format("AvgPool2d: padding {}x{} with kernel {}x{}, expected 0 <= padding <= kernel/2",
                                      p.pad_h_, p.pad_w_, p.kernel_h_, p.kernel_w_));
  }
  if (p.count_include_pad_ != 0 && p.count_include_pad_ != 1) {
    throw InvalidArgument(fmt::format("AvgPool2d: count_include_pad={}, expected 0 or 1", p.count_include_pad_));
  }
}

std::string AvgPool2d::describe() const {
  const auto& p = options_;
  std::string s = fmt::format("{}x{}, stride {}x{}, padding {}x{}", p.kernel_h_, p.kernel_w_, p.stride_h_,
                              p.stride_w_, p.pad_h_, p.pad_w_);
  if ((p.pad_h_ > 0 || p.pad_w_ > 0) && !p.count_include_pad_) s += ", padding not counted";
  return s;
}

Shape AvgPool2d::build(const Shape& in) {
  if (in.size() != 3) {
    throw InvalidArgument(fmt::format("AvgPool2d {}: input {}, expected (C, H, W)", name(), to_string(in)));
  }
  const auto& p = options_;
  shape_ = Pool2dShape{1, static_cast<int>(in[0]), static_cast<int>(in[1]), static_cast<int>(in[2]),
                                     p.kernel_h_, p.kernel_w_, p.stride_h_, p.stride_w_, p.pad_h_, p.pad_w_};
  // Compared before dividing: out_h() truncates a negative numerator towards zero and would report 1 row.
  if (in[1] + 2 * p.pad_h_ < p.kernel_h_ || in[2] + 2 * p.pad_w_ < p.kernel_w_) {
    throw InvalidArgument(fmt::format("AvgPool2d {}: input {} with padding {}x{} is smaller than the {}x{} window",
                                      name(), to_string(in), p.pad_h_, p.pad_w_, p.kernel_h_, p.kernel_w_));
  }
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
