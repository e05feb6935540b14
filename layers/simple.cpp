// SPDX-License-Identifier: Apache-2.0
#include "layers/simple.hpp"

#include <fmt/format.h>

#include "codelets/copy.hpp"
#include "codelets/maxpool2d.hpp"
#include "codelets/relu.hpp"
#include "core/errors.hpp"

namespace dtnn {

void ReLU::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_relu_fwd({name(), ctx.priority}, x, y, t);
  }
}

void ReLU::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) {
  if (dx == nullptr) {
    return;
  }
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_relu_bwd_data({name(), ctx.priority + 1}, y, dy, *dx, t);
  }
}

MaxPool2d::MaxPool2d(MaxPool2dOptions o) : options_(o) {
  if (options_.stride_h_ == 0) options_.stride_h_ = options_.kernel_h_;
  if (options_.stride_w_ == 0) options_.stride_w_ = options_.kernel_w_;
  const auto& p = options_;
  if (p.kernel_h_ < 1 || p.kernel_w_ < 1 || p.stride_h_ < 1 || p.stride_w_ < 1) {
    throw InvalidArgument(fmt::format("MaxPool2d: kernel {}x{} stride {}x{}, expected all >= 1", p.kernel_h_,
                                      p.kernel_w_, p.stride_h_, p.stride_w_));
  }
  if (p.pad_h_ < 0 || p.pad_w_ < 0 || 2 * p.pad_h_ > p.kernel_h_ || 2 * p.pad_w_ > p.kernel_w_) {
    throw InvalidArgument(fmt::format("MaxPool2d: padding {}x{} with kernel {}x{}, expected 0 <= padding <= kernel/2",
                                      p.pad_h_, p.pad_w_, p.kernel_h_, p.kernel_w_));
  }
}

std::string MaxPool2d::describe() const {
  const auto& p = options_;
  return fmt::format("{}x{}, stride {}x{}, padding {}x{}{}", p.kernel_h_, p.kernel_w_, p.stride_h_, p.stride_w_,
                     p.pad_h_, p.pad_w_, p.ceil_mode_ ? ", ceil" : "");
}

Shape MaxPool2d::build(const Shape& in) {
  if (in.size() != 3) {
    throw InvalidArgument(fmt::format("MaxPool2d {}: input {}, expected (C, H, W)", name(), to_string(in)));
  }
  const auto& p = options_;
  shape_ = Pool2dShape{1, static_cast<int>(in[0]), static_cast<int>(in[1]), static_cast<int>(in[2]),
                                     p.kernel_h_, p.kernel_w_, p.stride_h_, p.stride_w_, p.pad_h_, p.pad_w_,
                                     p.ceil_mode_};
  if (in[1] + 2 * p.pad_h_ < p.kernel_h_ || in[2] + 2 * p.pad_w_ < p.kernel_w_ || shape_.out_h() < 1 ||
      shape_.out_w() < 1) {
    throw InvalidArgument(fmt::format("MaxPool2d {}: input {} is smaller than the {}x{} window", name(),
                                      to_string(in), p.kernel_h_, p.kernel_w_));
  }
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

void Flatten::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_copy({name(), ctx.priority}, "fwd", x, y, t);
  }
}

void Flatten::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) {
  if (dx == nullptr) {
    return;
  }
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_copy({name(), ctx.priority + 1}, "bwd_data", dy, *dx, t);
  }
}

}  // namespace dtnn
