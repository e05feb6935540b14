// SPDX-License-Identifier: Apache-2.0
#include "models/zoo_common.hpp"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "layers/init.hpp"
#include "core/errors.hpp"

namespace dtnn::models::detail {
namespace {

void fill_zero(Tensor& t) {
  auto access = t.write();
  std::fill(access.data().begin(), access.data().end(), 0.0f);
}

}  // namespace

int classes_or(const ModelOptions& options, int fallback, std::string_view model) {
  if (options.classes_ < 0) {
    throw InvalidArgument(fmt::format("{}: classes={}, expected >= 1 (or 0 for the model's own {})", model,
                                      options.classes_, fallback));
  }
  return options.classes_ == 0 ? fallback : options.classes_;
}

void KaimingConv2d::reset_parameters(Rng& rng) {
  const Conv2dOptions& o = options();
  const std::int64_t receptive = std::int64_t{o.kernel_h_} * o.kernel_w_;
  const std::int64_t fan = mode_ == FanMode::kFanOut ? o.out_ * receptive : (o.in_ / o.groups_) * receptive;
  for (Parameter* p : parameters()) {
    if (p->name == "weight") {
      init::kaiming_normal(p->value, fan, rng);
    } else {
      fill_zero(p->value);
    }
  }
}

void NormalDense::reset_parameters(Rng& rng) {
  for (Parameter* p : parameters()) {
    if (p->name == "weight") {
      init::normal_polar(p->value, 0.0f, stddev_, rng);
    } else {
      fill_zero(p->value);
    }
  }
}

void ZeroBiasDense::reset_parameters(Rng& rng) {
  Dense::reset_parameters(rng);
  for (Parameter* p : parameters()) {
    if (p->name == "bias") fill_zero(p->value);
  }
}

}  // namespace dtnn::models::detail
