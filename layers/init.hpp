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
// Weight initialisers by name, as the layers' options take them. fan_in = inputs per output (in x kh x kw for a
// convolution), fan_out = outputs per input (out x kh x kw).
enum class Init {
  kPyTorchDefault,  // kaiming_uniform(a = sqrt(5)): U(+-1/sqrt(fan_in)), bias U(+-1/sqrt(fan_in))
  kGlorotUniform,   // U(+-sqrt(6 / (fan_in + fan_out))), Glorot & Bengio 2010 (Keras' and PyDTNN's default)
  kGlorotNormal,    // N(0, 2 / (fan_in + fan_out))
  kHeUniform,       // U(+-sqrt(6 / fan_in)), He et al. 2015
  kHeNormal,        // N(0, 2 / fan_in)
  kLecunUniform,    // U(+-sqrt(3 / fan_in)), LeCun et al. 1998
  kLecunNormal,     // N(0, 1 / fan_in)
};
const char* to_string(Init init);
// The named initialiser for a weight; biases are zero except with kPyTorchDefault.
void initialize(Init init, Parameter& weight, Parameter* bias, std::int64_t fan_in, std::int64_t fan_out, Rng& rng);

// PyTorch's default for Linear and Conv2d: weight ~ kaiming_uniform(a = sqrt(5)), i.e. U(-1/sqrt(fan_in),
// 1/sqrt(fan_in)), and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void pytorch_default(Parameter& weight, Parameter* bias, std::int64_t fan_in, Rng& rng);

}  // namespace dtnn::init
