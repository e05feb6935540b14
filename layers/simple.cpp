// SPDX-License-Identifier: Apache-2.0
#include "layers/simple.hpp"

#include "codelets/copy.hpp"
#include "codelets/relu.hpp"

namespace dtnn {

std::string ReLU::describe() const { return absorbed() ? "fused into the layer before" : ""; }

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
