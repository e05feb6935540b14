// SPDX-License-Identifier: Apache-2.0
// RMSprop, Adam/AdamW and NAdam kernels against double-precision references written from PyTorch's formulas,
// over three steps and a sweep of sizes (odd sizes reach the vector loops' remainders). The step-dependent
// scalars are worked out here from the hyper-parameters, as the optimizer classes do on the driver thread.
// Tolerance 1e-6 relative to the largest reference magnitude: three fp32 steps of element-wise arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <vector>

#include "codelets/cpu/optim_kernels.hpp"
#include "kernel_test_util.hpp"

namespace dtnn::kernels::cpu {
namespace {

using test::all_close;
using test::concat;
using test::random_vector;
using Vec = std::vector<double>;

constexpr int kSteps = 3;
constexpr double kTol = 1e-6;

Vec to_double(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }

std::vector<float> gradient(std::size_t count, int step) {
  return random_vector(count, 100 + static_cast<std::uint32_t>(step), -2.0f, 2.0f);
}

// ---------------------------------------------------------------------------------------------------------------
// RMSprop

struct RmspropCase {
  float weight_decay;
  float momentum;
  int centered;
};

void PrintTo(const RmspropCase& c, std::ostream* os) {
  *os << concat("wd=", c.weight_decay, " momentum=", c.momentum, " centered=", c.centered);
}

class RmspropKernelTest : public ::testing::TestWithParam<RmspropCase> {};

TEST_P(RmspropKernelTest, ThreeStepsMatchTheDoubleReference) {
  const RmspropCase c = GetParam();
  for (std::size_t count : {1u, 7u, 33u, 1000u}) {
    RmspropParams p;
    p.lr = 0.01f;
    p.alpha = 0.9f;
    p.eps = 1e-6f;
    p.weight_decay = c.weight_decay;
    p.momentum = c.momentum;
    p.centered = c.centered;
    std::vector<float> w = random_vector(count, 1);
    std::vector<float> sq(count, 0.0f), buf(count, 0.0f), ga(count, 0.0f);
    Vec rw = to_double(w), rsq(count, 0.0), rbuf(count, 0.0), rga(count, 0.0);
    for (int step = 0; step < kSteps; ++step) {
      const std::vector<float> g = gradient(count, step);
      rmsprop_update(count, p, w.data(), g.data(), sq.data(), c.momentum != 0.0f ? buf.data() : nullptr,
                     c.centered ? ga.data() : nullptr);
      const double a = p.alpha;
      for (std::size_t i = 0; i < count; ++i) {
        const double grad = g[i] + static_cast<double>(p.weight_decay) * rw[i];
        rsq[i] = a * rsq[i] + (1.0 - a) * grad * grad;
        double var = rsq[i];
        if (c.centered) {
          rga[i] = a * rga[i] + (1.0 - a) * grad;
          var -= rga[i] * rga[i];
        }
        const double denom = std::sqrt(var) + static_cast<double>(p.eps);
        if (c.momentum != 0.0f) {
          rbuf[i] = c.momentum * rbuf[i] + grad / denom;
          rw[i] -= static_cast<double>(p.lr) * rbuf[i];
        } else {
          rw[i] -= static_cast<double>(p.lr) * grad / denom;
        }
      }
      ASSERT_TRUE(all_close(w, rw, kTol)) << "count " << count << " step " << step + 1;
      ASSERT_TRUE(all_close(sq, rsq, kTol)) << "count " << count << " step " << step + 1;
      if (c.momentum != 0.0f) {
        ASSERT_TRUE(all_close(buf, rbuf, 1e-5)) << "count " << count;
      }
      if (c.centered) {
        ASSERT_TRUE(all_close(ga, rga, kTol)) << "count " << count;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, RmspropKernelTest,
                         ::testing::Values(RmspropCase{0.0f, 0.0f, 0}, RmspropCase{0.1f, 0.0f, 0},
                                           RmspropCase{0.0f, 0.9f, 0}, RmspropCase{0.0f, 0.0f, 1},
                                           RmspropCase{0.05f, 0.5f, 1}));

TEST(RmspropCenteredKernelTest, VarianceRoundingBelowZeroGivesNoNan) {
  // A constant gradient makes sq and ga^2 nearly equal after many steps; with these values their fp32 difference
  // goes negative from step 25 on.
  RmspropParams p;
  p.alpha = 0.5f;
  p.centered = 1;
  std::vector<float> w(64, 0.0f), sq(64, 0.0f), ga(64, 0.0f);
  const std::vector<float> g(64, 1.7f);
  for (int step = 0; step < 200; ++step) {
    rmsprop_update(w.size(), p, w.data(), g.data(), sq.data(), nullptr, ga.data());
  }
  for (float v : w) ASSERT_TRUE(std::isfinite(v));
}

// ---------------------------------------------------------------------------------------------------------------
// Adam and AdamW

struct AdamCase {
  float weight_decay;
  int decoupled;
};

void PrintTo(const AdamCase& c, std::ostream* os) {
  *os << concat("wd=", c.weight_decay, c.decoupled ? " decoupled" : " L2");
}

AdamParams adam_params(double lr, double beta1, double beta2, double eps, double wd, int decoupled, int t) {
  AdamParams p;
  p.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, t)));
  p.inv_sqrt_bias_correction2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(beta2, t)));
  p.beta1 = static_cast<float>(beta1);
  p.beta2 = static_cast<float>(beta2);
  p.eps = static_cast<float>(eps);
  p.weight_decay = decoupled ? 0.0f : static_cast<float>(wd);
  p.decay_factor = decoupled ? static_cast<float>(1.0 - lr * wd) : 1.0f;
  return p;
}

class AdamKernelTest : public ::testing::TestWithParam<AdamCase> {};

TEST_P(AdamKernelTest, ThreeStepsMatchTheDoubleReference) {
  const AdamCase c = GetParam();
  const double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  for (std::size_t count : {1u, 7u, 33u, 1000u}) {
    std::vector<float> w = random_vector(count, 2);
    std::vector<float> m(count, 0.0f), v(count, 0.0f);
    Vec rw = to_double(w), rm(count, 0.0), rv(count, 0.0);
    for (int t = 1; t <= kSteps; ++t) {
      const std::vector<float> g = gradient(count, t);
      const AdamParams p = adam_params(lr, beta1, beta2, eps, c.weight_decay, c.decoupled, t);
      adam_update(count, p, w.data(), g.data(), m.data(), v.data());
      for (std::size_t i = 0; i < count; ++i) {
        double grad = g[i];
        if (c.decoupled) {
          rw[i] -= lr * c.weight_decay * rw[i];
        } else {
          grad += c.weight_decay * rw[i];
        }
        rm[i] = beta1 * rm[i] + (1.0 - beta1) * grad;
        rv[i] = beta2 * rv[i] + (1.0 - beta2) * grad * grad;
        const double mhat = rm[i] / (1.0 - std::pow(beta1, t));
        const double vhat = rv[i] / (1.0 - std::pow(beta2, t));
        rw[i] -= lr * mhat / (std::sqrt(vhat) + eps);
      }
      ASSERT_TRUE(all_close(w, rw, kTol)) << "count " << count << " step " << t;
      ASSERT_TRUE(all_close(m, rm, kTol)) << "count " << count << " step " << t;
      ASSERT_TRUE(all_close(v, rv, kTol)) << "count " << count << " step " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, AdamKernelTest,
                         ::testing::Values(AdamCase{0.0f, 0}, AdamCase{0.1f, 0}, AdamCase{0.1f, 1}));

// With a tiny gradient, vhat is tiny: sqrt(vhat) + eps and sqrt(vhat + eps) are orders of magnitude apart, so
// the first step tells which one the kernel computes (PyDTNN's Adam puts eps inside the root).
TEST(AdamEpsKernelTest, EpsSitsOutsideTheSquareRoot) {
  const double lr = 0.1, eps = 1e-8, g0 = 1e-6;
  const AdamParams p = adam_params(lr, 0.9, 0.999, eps, 0.0, 0, 1);
  std::vector<float> w{1.0f}, m{0.0f}, v{0.0f};
  const std::vector<float> g{static_cast<float>(g0)};
  adam_update(1, p, w.data(), g.data(), m.data(), v.data());
  const double step = 1.0 - w[0];
  const double outside = lr * g0 / (g0 + eps);            // about 0.099
  const double inside = lr * g0 / std::sqrt(g0 * g0 + eps);  // about 0.001
  EXPECT_NEAR(step, outside, 1e-6);
  EXPECT_GT(std::abs(step - inside), 0.09);
}

// ---------------------------------------------------------------------------------------------------------------
// NAdam

NadamParams nadam_params(double lr, double beta1, double beta2, double eps, double wd, double psi, int t,
                         double& mu_product) {
  const double mu = beta1 * (1.0 - 0.5 * std::pow(0.96, t * psi));
  const double mu_next = beta1 * (1.0 - 0.5 * std::pow(0.96, (t + 1) * psi));
  mu_product *= mu;
  NadamParams p;
  p.grad_coef = static_cast<float>(lr * (1.0 - mu) / (1.0 - mu_product));
  p.momentum_coef = static_cast<float>(lr * mu_next / (1.0 - mu_product * mu_next));
  p.inv_sqrt_bias_correction2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(beta2, t)));
  p.beta1 = static_cast<float>(beta1);
  p.beta2 = static_cast<float>(beta2);
  p.eps = static_cast<float>(eps);
  p.weight_decay = static_cast<float>(wd);
  return p;
}

class NadamKernelTest : public ::testing::TestWithParam<float> {};

TEST_P(NadamKernelTest, ThreeStepsMatchTheDoubleReference) {
  const double wd = GetParam();
  const double lr = 0.002, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, psi = 0.004;
  for (std::size_t count : {1u, 7u, 33u, 1000u}) {
    std::vector<float> w = random_vector(count, 3);
    std::vector<float> m(count, 0.0f), v(count, 0.0f);
    Vec rw = to_double(w), rm(count, 0.0), rv(count, 0.0);
    double mu_product = 1.0, ref_mu_product = 1.0;
    for (int t = 1; t <= kSteps; ++t) {
      const std::vector<float> g = gradient(count, t);
      nadam_update(count, nadam_params(lr, beta1, beta2, eps, wd, psi, t, mu_product), w.data(), g.data(),
                   m.data(), v.data());
      // PyTorch's torch.optim.NAdam, line by line.
      const double mu = beta1 * (1.0 - 0.5 * std::pow(0.96, t * psi));
      const double mu_next = beta1 * (1.0 - 0.5 * std::pow(0.96, (t + 1) * psi));
      ref_mu_product *= mu;
      for (std::size_t i = 0; i < count; ++i) {
        const double grad = g[i] + wd * rw[i];
        rm[i] = beta1 * rm[i] + (1.0 - beta1) * grad;
        rv[i] = beta2 * rv[i] + (1.0 - beta2) * grad * grad;
        const double denom = std::sqrt(rv[i] / (1.0 - std::pow(beta2, t))) + eps;
        rw[i] -= lr * (1.0 - mu) / (1.0 - ref_mu_product) * grad / denom;
        rw[i] -= lr * mu_next / (1.0 - ref_mu_product * mu_next) * rm[i] / denom;
      }
      ASSERT_TRUE(all_close(w, rw, kTol)) << "count " << count << " step " << t;
      ASSERT_TRUE(all_close(m, rm, kTol)) << "count " << count << " step " << t;
      ASSERT_TRUE(all_close(v, rv, kTol)) << "count " << count << " step " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WeightDecay, NadamKernelTest, ::testing::Values(0.0f, 0.1f));

TEST(OptimKernelTest, EmptyParameterIsANoOp) {
  float w = 5.0f, g = 1.0f, m = 0.0f, v = 0.0f;
  adam_update(0, AdamParams{}, &w, &g, &m, &v);
  nadam_update(0, NadamParams{}, &w, &g, &m, &v);
  rmsprop_update(0, RmspropParams{}, &w, &g, &v, nullptr, nullptr);
  EXPECT_EQ(w, 5.0f);
  EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace dtnn::kernels::cpu
