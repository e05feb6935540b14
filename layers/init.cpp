// SPDX-License-Identifier: Apache-2.0
#include "layers/init.hpp"

#include <cmath>

namespace dtnn::init {

void uniform(Tensor& t, float low, float high, Rng& rng) {
  auto access = t.write();
  for (float& v : access.data()) {
    v = rng.uniform(low, high);
  }
}

void normal(Tensor& t, float mean, float stddev, Rng& rng) {
  auto access = t.write();
  for (float& v : access.data()) {
    v = mean + stddev * rng.normal();
  }
}

void pytorch_default(Parameter& weight, Parameter* bias, std::int64_t fan_in, Rng& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  uniform(weight.value, -bound, bound, rng);
  if (bias != nullptr) {
    uniform(bias->value, -bound, bound, rng);
  }
}

}  // namespace dtnn::init
