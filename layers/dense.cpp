// SPDX-License-Identifier: Apache-2.0
#include "layers/dense.hpp"

#include <cmath>

#include <fmt/format.h>

#include "codelets/dense.hpp"
#include "layers/init.hpp"
#include "core/errors.hpp"

namespace dtnn {

Dense::Dense(DenseOptions options) : options_(options) {
  if (options_.in_ < 1 || options_.out_ < 1) {
    throw InvalidArgument(fmt::format("Dense: in_features={} out_features={}, expected both >= 1", options_.in_,
                                      options_.out_));
  }
}

std::string Dense::describe() const {
  return fmt::format("{} -> {}{}{}{}", options_.in_, options_.out_, options_.bias_ ? "" : ", no bias",
                     options_.relu_ ? ", +ReLU" : "", tf32() ? ", tf32" : "");
}

int Dense::fuse_relu() {
  if (options_.relu_) return 0;
  options_.relu_ = true;
  return 1;
}

Shape Dense::build(const Shape& in) {
  Shape out{options_.out_};
  if (in.size() > 1 && in.back() == options_.in_) {
    out = Shape(in.begin(), in.end() - 1);
    out.push_back(options_.out_);
  } else if (numel(in) != options_.in_) {
    throw InvalidArgument(fmt::format("Dense {}: input {} has {} values per sample, expected in_features={} (on "
                                      "the last axis, or in all)",
                                      name(), to_string(in), numel(in), options_.in_));
  }
  sequence_ = numel(in) / options_.in_ > 1;
  weight_ = &add_parameter("weight", {options_.out_, options_.in_});
  if (options_.bias_) {
    bias_ = &add_parameter("bias", {options_.out_});
  }
  return record_shapes(in, out);
}

void Dense::reset_parameters(Rng& rng) {
  init::initialize(options_.init_, *weight_, bias_, options_.in_, options_.out_, rng);
}

void Dense::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  const codelets::TaskTag tag{name(), ctx.priority};
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_dense_fwd(tag, x, weight_->value, bias_ ? &bias_->value : nullptr, y, t, options_.relu_,
                               tf32());
  }
}

void Dense::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) {
  const codelets::TaskTag data_tag{name(), ctx.priority + 1};
  const codelets::TaskTag weights_tag{name(), ctx.priority};
  // The fused ReLU's backward: the gradient of the product is dy where y > 0.
  const Tensor* g = &before_fused_relu(options_.relu_, x, y, dy, data_tag.priority);
  if (dx != nullptr) {
    for (int t = 0; t < dy.tiles(); ++t) {
      codelets::submit_dense_bwd_data(data_tag, *g, weight_->value, *dx, t, tf32());
    }
  }
  if (sequence_) {
    // Sample after sample in batch order, chained across the tiles: the same bits whatever the tile count.
    for (int t = 0; t < dy.tiles(); ++t) {
      codelets::submit_dense_bwd_weights_in_order(weights_tag, x, *g, weight_->grad, bias_ ? &bias_->grad : nullptr,
                                                  t, ctx.gradients_continue);
    }
  } else {
    for (int t = 0; t < dy.tiles(); ++t) {
      codelets::submit_dense_bwd_weights(weights_tag, x, *g, weight_->tile_grads,
                                         bias_ ? &bias_->tile_grads : nullptr, t, tf32());
    }
    submit_gradient_sums(dy.tiles(), ctx);
  }
  // The masked gradient's last readers are the tasks above (a transient scratch's memory goes back now).
  if (g != &dy) g->discard();
}

}  // namespace dtnn
