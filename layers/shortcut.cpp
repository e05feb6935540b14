// SPDX-License-Identifier: Apache-2.0
#include "layers/shortcut.hpp"

#include <fmt/format.h>

#include "codelets/shortcut_pad.hpp"
#include "core/errors.hpp"

namespace dtnn {

ShortcutPad::ShortcutPad(ShortcutPadOptions o) : options_(o) {
  if (o.in_ < 1 || o.out_ < o.in_ || (o.out_ - o.in_) % 2 != 0) {
    throw InvalidArgument(fmt::format("ShortcutPad: in_channels={} out_channels={}, expected 1 <= in_channels <= "
                                      "out_channels with an even difference (equal zero padding on both sides)",
                                      o.in_, o.out_));
  }
  if (o.stride_ < 1) {
    throw InvalidArgument(fmt::format("ShortcutPad: stride {}, expected >= 1", o.stride_));
  }
}

std::string ShortcutPad::describe() const {
  return fmt::format("{} -> {} channels, stride {}", options_.in_, options_.out_, options_.stride_);
}

Shape ShortcutPad::build(const Shape& in) {
  if (in.size() != 3 || in[0] != options_.in_) {
    throw InvalidArgument(fmt::format("ShortcutPad {}: input {}, expected ({}, H, W)", name(), to_string(in),
                                      options_.in_));
  }
  shape_ = ShortcutPadShape{1, options_.in_, static_cast<int>(in[1]), static_cast<int>(in[2]),
                                          options_.out_, options_.stride_};
  return record_shapes(in, {options_.out_, shape_.out_h(), shape_.out_w()});
}

void ShortcutPad::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_shortcut_pad_fwd({name(), ctx.priority}, shape_, x, y, t);
  }
}

void ShortcutPad::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) {
  if (dx == nullptr) {
    return;
  }
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_shortcut_pad_bwd_data({name(), ctx.priority + 1}, shape_, dy, *dx, t);
  }
}

}  // namespace dtnn
