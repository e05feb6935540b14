// SPDX-License-Identifier: Apache-2.0
// The normal initialisers that the model zoo uses: moments, odd sizes, reproducibility.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "layers/dense.hpp"
#include "layers/init.hpp"

namespace dtnn {
namespace {

struct Moments {
  double mean = 0.0;
  double variance = 0.0;
};

Moments moments(const std::vector<float>& v) {
  double sum = 0.0, squares = 0.0;
  for (float x : v) sum += x, squares += static_cast<double>(x) * x;
  const double n = static_cast<double>(v.size());
  return {sum / n, squares / n - (sum / n) * (sum / n)};
}

TEST(InitTest, NormalPolarHasTheRequestedMeanAndDeviation) {
  Tensor t({1001, 101});  // odd: the last pair keeps one of its two values
  Rng rng(5);
  init::normal_polar(t, 0.5f, 2.0f, rng);
  const auto v = t.to_vector();
  const Moments m = moments(v);
  const double standard_error = 2.0 / std::sqrt(static_cast<double>(v.size()));
  EXPECT_NEAR(m.mean, 0.5, 5 * standard_error);
  EXPECT_NEAR(m.variance, 4.0, 0.02 * 4.0);
  // About 4.55% of a normal sample lies beyond two standard deviations.
  std::size_t tails = 0;
  for (float x : v) tails += std::abs(x - 0.5f) > 4.0f;
  EXPECT_NEAR(static_cast<double>(tails) / static_cast<double>(v.size()), 0.0455, 0.003);
}

TEST(InitTest, NormalPolarIsReproducibleFromTheSeed) {
  Tensor a({7, 3}), b({7, 3}), c({7, 3});
  Rng r1(9), r2(9), r3(10);
  init::normal_polar(a, 0.0f, 1.0f, r1);
  init::normal_polar(b, 0.0f, 1.0f, r2);
  init::normal_polar(c, 0.0f, 1.0f, r3);
  EXPECT_EQ(a.to_vector(), b.to_vector());
  EXPECT_NE(a.to_vector(), c.to_vector());
}

TEST(InitTest, KaimingNormalHasVarianceTwoOverFan) {
  Tensor t({128, 64, 3, 3});
  Rng rng(1);
  init::kaiming_normal(t, 128 * 9, rng);
  EXPECT_NEAR(moments(t.to_vector()).variance, 2.0 / (128 * 9), 0.02 * 2.0 / (128 * 9));
}

TEST(InitTest, NamedInitialisersHaveTheirVariance) {
  struct Case {
    init::Init init;
    double variance;  // for fan_in 300, fan_out 100
  };
  const std::vector<Case> cases = {{init::Init::kGlorotUniform, 2.0 / 400}, {init::Init::kGlorotNormal, 2.0 / 400},
                                   {init::Init::kHeUniform, 2.0 / 300},     {init::Init::kHeNormal, 2.0 / 300},
                                   {init::Init::kLecunUniform, 1.0 / 300},  {init::Init::kLecunNormal, 1.0 / 300},
                                   {init::Init::kPyTorchDefault, 1.0 / 900}};
  for (const Case& c : cases) {
    Dense layer(DenseOptions(300, 100).init(c.init));
    layer.build({300});
    Rng rng(5);
    layer.reset_parameters(rng);
    const auto w = layer.parameters()[0]->value.to_vector();
    double sum = 0.0, sq = 0.0;
    for (float v : w) {
      sum += v;
      sq += double(v) * v;
    }
    const double mean = sum / w.size();
    EXPECT_NEAR(sq / w.size() - mean * mean, c.variance, 0.05 * c.variance) << init::to_string(c.init);
    const auto b = layer.parameters()[1]->value.to_vector();
    if (c.init != init::Init::kPyTorchDefault) {
      for (float v : b) EXPECT_EQ(v, 0.0f) << init::to_string(c.init);
    }
  }
}

}  // namespace
}  // namespace dtnn
