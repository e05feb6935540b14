// SPDX-License-Identifier: Apache-2.0
// Weight initialisers.
#pragma once

#include <cstdint>

#include "layers/layer.hpp"

namespace dtnn::init {

void uniform(Tensor& t, float low, float high, Rng& rng);
void normal(Tensor& t, float mean, float stddev, Rng& rng);
// The same distribution by Marsaglia's polar method: two values per accepted pair of uniforms and no cosine, about
// half the time of normal() per value, for the 10^7 to 10^8 weights of VGG and ResNet. A different stream from
// normal()'s for the same rng.
void normal_polar(Tensor& t, float mean, float stddev, Rng& rng);
// torch.nn.init.kaiming_normal_(t, mode, nonlinearity="relu") of He et al. 2015: N(0, 2 / fan), fan being the
// inputs or the outputs that each weight connects (by normal_polar).
void kaiming_normal(Tensor& t, std::int64_t fan, Rng& rng);
// PyTorch's default for Linear and Conv2d: weight ~ kaiming_uniform(a = sqrt(5)), i.e. U(-1/sqrt(fan_in),
// 1/sqrt(fan_in)), and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void pytorch_default(Parameter& weight, Parameter* bias, std::int64_t fan_in, Rng& rng);

}  // namespace dtnn::init
