// SPDX-License-Identifier: Apache-2.0
#include "layers/tied_linear.hpp"

#include <fmt/format.h>

#include "codelets/dense.hpp"
#include "core/errors.hpp"

namespace dtnn {

std::string TiedLinear::describe() const {
  const EmbeddingOptions& e = embedding_->options();
  return fmt::format("{} -> {}, no bias, weight of {}", e.dim_, e.num_, embedding_->name());
}

Shape TiedLinear::build(const Shape& in) {
  const EmbeddingOptions& e = embedding_->options();
  if (embedding_->output_shape().empty()) {
    throw InvalidArgument(fmt::format("TiedLinear {}: Embedding {} is not built, expected it before the head in the "
                                      "model",
                                      name(), embedding_->name()));
  }
  if (in.empty() || in.back() != e.dim_) {
    throw InvalidArgument(fmt::format("TiedLinear {}: input {}, expected a last axis of embedding_dim={} (the table "
                                      "of {})",
                                      name(), to_string(in), e.dim_, embedding_->name()));
  }
  // A second head would overwrite the first one's gradient (each head's tile 0 writes it).
  if (embedding_->weight_shared()) {
    throw InvalidArgument(fmt::format("TiedLinear {}: Embedding {} is already tied to another head, expected one head "
                                      "per table",
                                      name(), embedding_->name()));
  }
  embedding_->share_weight();
  Shape out = in;
  out.back() = e.num_;
  return record_shapes(in, out);
}

void TiedLinear::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  const codelets::TaskTag tag{name(), ctx.priority};
  const Tensor& table = embedding_->weight().value;
  for (int t = 0; t < x.tiles(); ++t) codelets::submit_dense_fwd(tag, x, table, nullptr, y, t);
}

void TiedLinear::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) {
  const codelets::TaskTag data_tag{name(), ctx.priority + 1};
  const codelets::TaskTag weights_tag{name(), ctx.priority};
  Parameter& table = embedding_->weight();
  if (dx != nullptr) {
    for (int t = 0; t < dy.tiles(); ++t) codelets::submit_dense_bwd_data(data_tag, dy, table.value, *dx, t);
  }
  // In tile order: the Embedding's backward adds the lookup's gradient after these.
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_dense_bwd_weights_in_order(weights_tag, x, dy, table.grad, nullptr, t, ctx.gradients_continue);
  }
}

}  // namespace dtnn
