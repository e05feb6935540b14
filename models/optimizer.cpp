// SPDX-License-Identifier: Apache-2.0
#include "models/optimizer.hpp"

#include <cmath>

#include <fmt/format.h>

#include "codelets/sgd.hpp"
#include "core/errors.hpp"

namespace dtnn {

Sgd::Sgd(SgdOptions o) : Optimizer(o.lr_), options_(o) {
  if (!(o.lr_ > 0.0f) || !std::isfinite(o.lr_)) {
    throw InvalidArgument(fmt::format("SGD: learning rate {}, expected a finite value > 0", o.lr_));
  }
  if (!(o.momentum_ >= 0.0f && o.momentum_ < 1.0f)) {
    throw InvalidArgument(fmt::format("SGD: momentum {}, expected 0 <= momentum < 1", o.momentum_));
  }
  if (!(o.weight_decay_ >= 0.0f) || !std::isfinite(o.weight_decay_)) {
    throw InvalidArgument(fmt::format("SGD: weight decay {}, expected a finite value >= 0", o.weight_decay_));
  }
  if (o.nesterov_ && o.momentum_ == 0.0f) {
    throw InvalidArgument("SGD: Nesterov with momentum 0, expected momentum > 0");
  }
}

std::string Sgd::describe() const {
  return fmt::format("SGD(lr={}, momentum={}, weight_decay={}{})", lr_, options_.momentum_, options_.weight_decay_,
                     options_.nesterov_ ? ", nesterov" : "");
}

Tensor& Sgd::velocity(const Parameter& p) {
  auto it = velocity_.find(&p);
  if (it == velocity_.end()) {
    it = velocity_.emplace(&p, Tensor(p.value.shape())).first;
  }
  return it->second;
}

void Sgd::submit_update(Parameter& p, std::string_view name, int priority) {
  const SgdParams params{lr_, options_.momentum_, options_.weight_decay_, options_.nesterov_};
  codelets::submit_sgd_update({name, priority}, params, p.value, p.grad, velocity(p));
}

ParamState Sgd::state_of(Parameter& p) { return {{{"momentum_buffer", &velocity(p)}}, {}}; }

}  // namespace dtnn
