// SPDX-License-Identifier: Apache-2.0
#include "layers/positional.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "codelets/copy.hpp"
#include "codelets/positional.hpp"
#include "core/errors.hpp"
#include "layers/init.hpp"

namespace dtnn {

PositionalEncoding::PositionalEncoding(PositionalEncodingOptions options) : options_(options) {
  constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();
  if (options_.max_len_ < 1 || options_.max_len_ > kMaxInt || options_.dim_ < 1 || options_.dim_ > kMaxInt) {
    throw InvalidArgument(fmt::format("PositionalEncoding: max_len={} dim={}, expected both in 1..{}",
                                      options_.max_len_, options_.dim_, kMaxInt));
  }
  if (!options_.learned_ && options_.dim_ % 2 != 0) {
    throw InvalidArgument(fmt::format("PositionalEncoding: sinusoidal with dim={}, expected an even dim (a sine and "
                                      "a cosine per frequency)",
                                      options_.dim_));
  }
}

std::string PositionalEncoding::describe() const {
  return fmt::format("{} {} x {}", options_.learned_ ? "learned" : "sinusoidal", options_.max_len_, options_.dim_);
}

Shape PositionalEncoding::build(const Shape& in) {
  if (in.size() != 2 || in[0] < 1 || in[0] > options_.max_len_ || in[1] != options_.dim_) {
    throw InvalidArgument(fmt::format("PositionalEncoding {}: input {}, expected (seq, {}) with seq <= max_len={}",
                                      name(), to_string(in), options_.dim_, options_.max_len_));
  }
  if (options_.learned_) {
    weight_ = &add_parameter("weight", {options_.max_len_, options_.dim_});
  } else {
    sinusoids_ = Tensor({options_.max_len_, options_.dim_});
    auto pe = sinusoids_.write();
    const auto d = static_cast<double>(options_.dim_);
    for (std::int64_t s = 0; s < options_.max_len_; ++s) {
      for (std::int64_t i = 0; i < options_.dim_; i += 2) {
        const double angle = static_cast<double>(s) * std::exp(static_cast<double>(i) * (-std::log(10000.0) / d));
        pe[s * options_.dim_ + i] = static_cast<float>(std::sin(angle));
        pe[s * options_.dim_ + i + 1] = static_cast<float>(std::cos(angle));
      }
    }
  }
  return record_shapes(in, in);
}

void PositionalEncoding::reset_parameters(Rng& rng) {
  if (weight_ != nullptr) init::normal(weight_->value, 0.0f, 1.0f, rng);
}

const Tensor& PositionalEncoding::table() const { return weight_ != nullptr ? weight_->value : sinusoids_; }

void PositionalEncoding::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  const codelets::TaskTag tag{name(), ctx.priority};
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_positional_add_fwd(tag, x, table(), y, t);
  }
}

void PositionalEncoding::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx,
                                  const PassContext& ctx) {
  if (dx != nullptr) {
    const codelets::TaskTag data_tag{name(), ctx.priority + 1};
    for (int t = 0; t < dy.tiles(); ++t) codelets::submit_copy(data_tag, "bwd_data", dy, *dx, t);
  }
  if (weight_ == nullptr) return;
  // In tile order, each task adding to the gradient the last one wrote: no partial tables, no tile sum.
  const codelets::TaskTag weights_tag{name(), ctx.priority};
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_positional_bwd_weights(weights_tag, dy, weight_->grad, t, ctx.gradients_continue);
  }
}

}  // namespace dtnn
