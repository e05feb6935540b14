// SPDX-License-Identifier: Apache-2.0
#include "layers/embedding.hpp"

#include <limits>

#include <fmt/format.h>

#include "codelets/embedding.hpp"
#include "core/errors.hpp"
#include "layers/init.hpp"

namespace dtnn {

Embedding::Embedding(EmbeddingOptions options) : options_(options) {
  constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();
  if (options_.num_ < 1 || options_.num_ > kMaxInt || options_.dim_ < 1 || options_.dim_ > kMaxInt) {
    throw InvalidArgument(fmt::format("Embedding: num_embeddings={} embedding_dim={}, expected both in 1..{}",
                                      options_.num_, options_.dim_, kMaxInt));
  }
  if (options_.padding_idx_) {
    const std::int64_t p = *options_.padding_idx_;
    if (p < -options_.num_ || p >= options_.num_) {
      throw InvalidArgument(fmt::format("Embedding: padding_idx={}, expected -{} <= padding_idx < {} "
                                        "(num_embeddings={})",
                                        p, options_.num_, options_.num_, options_.num_));
    }
    padding_row_ = static_cast<int>(p < 0 ? p + options_.num_ : p);
  }
}

std::string Embedding::describe() const {
  std::string s = fmt::format("{} x {}", options_.num_, options_.dim_);
  if (padding_row_ >= 0) s += fmt::format(", padding_idx {}", padding_row_);
  if (shared_ != 0) s += ", tied";
  return s;
}

Shape Embedding::build(const Shape& in) {
  if (in.empty() || numel(in) < 1) {
    throw InvalidArgument(fmt::format("Embedding {}: input {}, expected at least one token id per sample", name(),
                                      to_string(in)));
  }
  weight_ = &add_parameter("weight", {options_.num_, options_.dim_});
  Shape out = in;
  out.push_back(options_.dim_);
  return record_shapes(in, out);
}

Parameter& Embedding::weight() {
  if (weight_ == nullptr) {
    throw InvalidArgument(fmt::format("Embedding {}: its table was asked for before build(), expected a built layer",
                                      name()));
  }
  return *weight_;
}

void Embedding::reset_parameters(Rng& rng) {
  init::normal(weight_->value, 0.0f, 1.0f, rng);
  if (padding_row_ < 0) return;
  auto w = weight_->value.write();
  const auto dim = static_cast<std::size_t>(options_.dim_);
  std::fill_n(w.data().begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(padding_row_) * dim), dim,
              0.0f);
}

void Embedding::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  const codelets::TaskTag tag{name(), ctx.priority};
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_embedding_fwd(tag, x, weight_->value, y, t);
  }
}

void Embedding::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) {
  // Token ids have no gradient: a container hands the first layer no dx, and Sequential puts an Embedding first.
  const codelets::TaskTag tag{name(), ctx.priority};
  // In tile order, each task adding to the gradient the last one wrote: no partial tables, no tile sum.
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_embedding_bwd_weights(tag, x, dy, padding_row_, weight_->grad, t,
                                           shared_ || ctx.gradients_continue ? 1 : 0);
  }
}

}  // namespace dtnn
