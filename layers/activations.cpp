// SPDX-License-Identifier: Apache-2.0
#include "layers/activations.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "codelets/activation.hpp"
#include "codelets/softmax.hpp"
#include "core/errors.hpp"

namespace dtnn {

Shape ElementwiseActivation::build(const Shape& in) {
  if (in.empty() || numel(in) < 1) {
    throw InvalidArgument(fmt::format("{} {}: input {}, expected at least one value per sample", type(), name(),
                                      to_string(in)));
  }
  return record_shapes(in, in);
}

void ElementwiseActivation::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_activation_fwd({name(), ctx.priority}, spec_, x, y, t);
  }
}

void ElementwiseActivation::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx,
                                     const PassContext& ctx) {
  if (dx == nullptr) {
    return;
  }
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_activation_bwd_data({name(), ctx.priority + 1}, spec_, x, y, dy, *dx, t);
  }
}

LeakyReLU::LeakyReLU(LeakyReLUOptions o)
    : ElementwiseActivation({codelets::ActivationKind::kLeakyRelu, o.negative_slope_}), options_(o) {
  if (!std::isfinite(o.negative_slope_)) {
    throw InvalidArgument(fmt::format("LeakyReLU: negative_slope={}, expected a finite value", o.negative_slope_));
  }
}

std::string LeakyReLU::describe() const { return fmt::format("negative slope {:g}", options_.negative_slope_); }

ELU::ELU(ELUOptions o) : ElementwiseActivation({codelets::ActivationKind::kElu, o.alpha_}), options_(o) {
  if (!std::isfinite(o.alpha_) || o.alpha_ < 0.0f) {
    throw InvalidArgument(fmt::format("ELU: alpha={}, expected a finite value >= 0", o.alpha_));
  }
}

std::string ELU::describe() const { return fmt::format("alpha {:g}", options_.alpha_); }

Shape Softmax::build(const Shape& in) {
  if (in.empty() || numel(in) < 1 || in[0] > std::numeric_limits<int>::max()) {
    throw InvalidArgument(fmt::format("Softmax {}: input {}, expected (F) or (C, ...) with at least one value",
                                      name(), to_string(in)));
  }
  channels_ = static_cast<int>(in[0]);
  return record_shapes(in, in);
}

void Softmax::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_softmax_fwd({name(), ctx.priority}, channels_, x, y, t);
  }
}

void Softmax::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) {
  if (dx == nullptr) {
    return;
  }
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_softmax_bwd_data({name(), ctx.priority + 1}, channels_, y, dy, *dx, t);
  }
}

}  // namespace dtnn
