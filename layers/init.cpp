// SPDX-License-Identifier: Apache-2.0
#include "layers/init.hpp"

#include <cmath>
#include <cstddef>
#include <span>

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

void normal_polar(Tensor& t, float mean, float stddev, Rng& rng) {
  auto access = t.write();
  const std::span<float> v = access.data();
  for (std::size_t i = 0; i < v.size(); i += 2) {
    double a = 0.0, b = 0.0, s = 0.0;
    do {
      // Uniform in [-1, 1) with 53 random bits, from the raw draws (the standard's distributions vary by library).
      a = static_cast<double>(rng.next() >> 11) * 0x1.0p-52 - 1.0;
      b = static_cast<double>(rng.next() >> 11) * 0x1.0p-52 - 1.0;
      s = a * a + b * b;
    } while (s >= 1.0 || s == 0.0);
    const double f = stddev * std::sqrt(-2.0 * std::log(s) / s);
    v[i] = mean + static_cast<float>(a * f);
    if (i + 1 < v.size()) v[i + 1] = mean + static_cast<float>(b * f);
  }
}

void kaiming_normal(Tensor& t, std::int64_t fan, Rng& rng) {
  normal_polar(t, 0.0f, static_cast<float>(std::sqrt(2.0 / static_cast<double>(fan))), rng);
}

void pytorch_default(Parameter& weight, Parameter* bias, std::int64_t fan_in, Rng& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  uniform(weight.value, -bound, bound, rng);
  if (bias != nullptr) {
    uniform(bias->value, -bound, bound, rng);
  }
}

const char* to_string(Init init) {
  switch (init) {
    case Init::kPyTorchDefault: return "pytorch";
    case Init::kGlorotUniform: return "glorot_uniform";
    case Init::kGlorotNormal: return "glorot_normal";
    case Init::kHeUniform: return "he_uniform";
    case Init::kHeNormal: return "he_normal";
    case Init::kLecunUniform: return "lecun_uniform";
    case Init::kLecunNormal: return "lecun_normal";
  }
  return "?";
}

void initialize(Init init, Parameter& weight, Parameter* bias, std::int64_t fan_in, std::int64_t fan_out, Rng& rng) {
  const double in = static_cast<double>(fan_in);
  const double both = static_cast<double>(fan_in + fan_out);
  auto uniform_bound = [&](double bound) {
    uniform(weight.value, static_cast<float>(-bound), static_cast<float>(bound), rng);
  };
  auto normal_stddev = [&](double stddev) { normal_polar(weight.value, 0.0f, static_cast<float>(stddev), rng); };
  switch (init) {
    case Init::kPyTorchDefault:
      pytorch_default(weight, bias, fan_in, rng);
      return;
    case Init::kGlorotUniform: uniform_bound(std::sqrt(6.0 / both)); break;
    case Init::kGlorotNormal: normal_stddev(std::sqrt(2.0 / both)); break;
    case Init::kHeUniform: uniform_bound(std::sqrt(6.0 / in)); break;
    case Init::kHeNormal: normal_stddev(std::sqrt(2.0 / in)); break;
    case Init::kLecunUniform: uniform_bound(std::sqrt(3.0 / in)); break;
    case Init::kLecunNormal: normal_stddev(std::sqrt(1.0 / in)); break;
  }
  if (bias != nullptr) bias->value.fill(0.0f);
}

}  // namespace dtnn::init
