// SPDX-License-Identifier: Apache-2.0
// Weight initialisers.
#pragma once

#include <cstdint>

#include "layers/layer.hpp"

namespace dtnn::init {

void uniform(Tensor& t, float low, float high, Rng& rng);
void normal(Tensor& t, float mean, float stddev, Rng& rng);
// PyTorch's default for Linear and Conv2d: weight ~ kaiming_uniform(a = sqrt(5)), i.e. U(-1/sqrt(fan_in),
// 1/sqrt(fan_in)), and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void pytorch_default(Parameter& weight, Parameter* bias, std::int64_t fan_in, Rng& rng);

}  // namespace dtnn::init
