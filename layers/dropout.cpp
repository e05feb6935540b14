// SPDX-License-Identifier: Apache-2.0
#include "layers/dropout.hpp"

#include <fmt/format.h>

#include "codelets/copy.hpp"
#include "codelets/dropout.hpp"
#include "core/errors.hpp"

namespace dtnn {

std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char ch : text) {
    h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
  }
  return h;
}

Dropout::Dropout(DropoutOptions o) : options_(o) {
  // Written so that NaN fails too.
  if (!(o.rate_ >= 0.0 && o.rate_ < 1.0)) {
    throw InvalidArgument(fmt::format("Dropout: rate={}, expected 0 <= rate < 1", o.rate_));
  }
}

std::string Dropout::describe() const {
  std::string s = fmt::format("rate {:g}", options_.rate_);
  if (options_.seed_) s += fmt::format(", seed {}", *options_.seed_);
  return s;
}

Shape Dropout::build(const Shape& in) {
  if (in.empty() || numel(in) < 1) {
    throw InvalidArgument(fmt::format("Dropout {}: input {}, expected at least one value per sample", name(),
                                      to_string(in)));
  }
  return record_shapes(in, in);
}

std::uint64_t Dropout::seed() const { return options_.seed_.value_or(fnv1a(name())); }

Tensor& Dropout::mask(const Tensor& x) {
  Shape s = input_shape();
  s.insert(s.begin(), x.shape()[0]);
  return scratch(x, 0, s, x.tiles(), x.storage());
}

void Dropout::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  const codelets::TaskTag tag{name(), ctx.priority};
  if (!ctx.training) {
    for (int t = 0; t < x.tiles(); ++t) {
      codelets::submit_copy(tag, "fwd", x, y, t);
    }
    return;
  }
  Tensor& m = mask(x);
  const codelets::DropoutDraw draw{seed(), ctx.step, options_.rate_};
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_dropout_fwd(tag, draw, x, m, y, t);
  }
}

void Dropout::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) {
  if (dx == nullptr) {
    return;
  }
  const codelets::TaskTag tag{name(), ctx.priority + 1};
  if (!ctx.training) {
    for (int t = 0; t < dy.tiles(); ++t) {
      codelets::submit_copy(tag, "bwd_data", dy, *dx, t);
    }
    return;
  }
  Tensor& m = mask(x);
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_dropout_bwd_data(tag, m, dy, *dx, t);
  }
  m.discard();
}

}  // namespace dtnn
