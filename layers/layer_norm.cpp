// SPDX-License-Identifier: Apache-2.0
#include "layers/layer_norm.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "codelets/layer_norm.hpp"
#include "core/errors.hpp"

namespace dtnn {

LayerNorm::LayerNorm(LayerNormOptions options) : options_(options) {
  if (options_.normalized_shape_ < 1 || options_.normalized_shape_ > std::numeric_limits<int>::max()) {
    throw InvalidArgument(fmt::format("LayerNorm: normalized_shape={}, expected 1 <= normalized_shape <= {}",
                                      options_.normalized_shape_, std::numeric_limits<int>::max()));
  }
  // Written so that NaN fails too.
  if (!(options_.eps_ > 0.0 && std::isfinite(options_.eps_))) {
    throw InvalidArgument(fmt::format("LayerNorm: eps={}, expected a finite value > 0", options_.eps_));
  }
}

std::string LayerNorm::describe() const {
  return fmt::format("{}, eps {:g}{}", options_.normalized_shape_, options_.eps_,
                     options_.affine_ ? "" : ", no affine");
}

Shape LayerNorm::build(const Shape& in) {
  if (in.empty() || numel(in) < 1 || in.back() != options_.normalized_shape_) {
    throw InvalidArgument(fmt::format("LayerNorm {}: input {}, expected a last axis of normalized_shape={}", name(),
                                      to_string(in), options_.normalized_shape_));
  }
  if (options_.affine_) {
    weight_ = &add_parameter("weight", {options_.normalized_shape_});
    bias_ = &add_parameter("bias", {options_.normalized_shape_});
  }
  return record_shapes(in, in);
}

void LayerNorm::reset_parameters(Rng& rng) {
  if (weight_ == nullptr) return;
  weight_->value.fill(1.0f);
  bias_->value.fill(0.0f);
}

Tensor& LayerNorm::stats(const Tensor& x) {
  const std::int64_t rows = numel(input_shape()) / options_.normalized_shape_;
  return scratch(x, 0, {x.shape()[0], rows, 2}, x.tiles(), x.storage());
}

void LayerNorm::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  const codelets::TaskTag tag{name(), ctx.priority};
  Tensor& s = stats(x);
  const auto eps = static_cast<float>(options_.eps_);
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_layer_norm_fwd(tag, eps, x, weight_ ? &weight_->value : nullptr,
                                    bias_ ? &bias_->value : nullptr, y, s, t);
  }
  // No backward follows an evaluation pass: a transient statistics tensor's memory goes back now.
  if (!ctx.training) s.discard();
}

void LayerNorm::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) {
  Tensor& s = stats(x);
  if (dx != nullptr) {
    const codelets::TaskTag data_tag{name(), ctx.priority + 1};
    for (int t = 0; t < dy.tiles(); ++t) {
      codelets::submit_layer_norm_bwd_data(data_tag, x, s, weight_ ? &weight_->value : nullptr, dy, *dx, t);
    }
  }
  if (weight_ != nullptr) {
    const codelets::TaskTag weights_tag{name(), ctx.priority};
    // In tile order, each task adding to the gradients the last one wrote: no partials, no tile sum.
    for (int t = 0; t < dy.tiles(); ++t) {
      codelets::submit_layer_norm_bwd_weights(weights_tag, x, s, dy, weight_->grad, bias_->grad, t,
                                              ctx.gradients_continue);
    }
  }
  s.discard();
}

}  // namespace dtnn
