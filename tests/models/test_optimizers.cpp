// SPDX-License-Identifier: Apache-2.0
// RMSprop, Adam, AdamW and NAdam through their update tasks: three steps against the formulas evaluated in double
// here (PyTorch's definitions), per-parameter state and step counts, scheduled learning rates, hyper-parameter
// checks, the factory by name, and a short training run per optimizer.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/dataset.hpp"
#include "layers/dense.hpp"
#include "layers/embedding.hpp"
#include "layers/layer_norm.hpp"
#include "layers/simple.hpp"
#include "models/optimizers.hpp"
#include "models/training.hpp"
#include "core/errors.hpp"

namespace dtnn {
namespace {

using Vec = std::vector<double>;

constexpr double kTol = 2e-6;

const std::vector<float> kW0{0.5f, -1.25f, 2.0f, 0.0f, -0.3f, 1.0f};
// One gradient per step, with both signs, a zero and magnitudes far apart.
const std::vector<std::vector<float>> kGrads{{0.1f, -0.4f, 1.5f, 0.0f, 2.0f, -0.02f},
                                             {-0.3f, -0.2f, 0.7f, 0.5f, -1.0f, 0.01f},
                                             {0.2f, 0.6f, -0.9f, -0.5f, 0.25f, 0.03f}};

Parameter make_parameter(const std::vector<float>& values) {
  Parameter p;
  p.name = "weight";
  p.value = Tensor({2, static_cast<std::int64_t>(values.size() / 2)});
  p.value.copy_from(values);
  p.grad = Tensor(p.value.shape());
  return p;
}

void update(Optimizer& opt, Parameter& p, const std::vector<float>& grad) {
  p.grad.copy_from(grad);
  opt.submit_update(p, "test.weight", 0);
}

::testing::AssertionResult near(const std::vector<float>& got, const Vec& want, double tol = kTol) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size();
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])))) {
      return ::testing::AssertionFailure() << "[" << i << "] got " << got[i] << ", want " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

template <class E>
void expect_throw_with(const std::function<void()>& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "expected an exception with \"" << text << "\"";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// References: one step of each rule in double, with the state it carries.

struct RmspropRef {
  double lr, alpha, eps, wd, momentum;
  int centered;
  Vec sq, buf, ga;

  void step(Vec& w, const std::vector<float>& g) {
    sq.resize(w.size());
    buf.resize(w.size());
    ga.resize(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double grad = g[i] + wd * w[i];
      sq[i] = alpha * sq[i] + (1 - alpha) * grad * grad;
      double avg = sq[i];
      if (centered) {
        ga[i] = alpha * ga[i] + (1 - alpha) * grad;
        avg -= ga[i] * ga[i];
      }
      const double denom = std::sqrt(avg) + eps;
      if (momentum > 0) {
        buf[i] = momentum * buf[i] + grad / denom;
        w[i] -= lr * buf[i];
      } else {
        w[i] -= lr * grad / denom;
      }
    }
  }
};

struct AdamRef {
  double beta1, beta2, eps, wd;
  int decoupled;
  Vec m, v;
  int t = 0;

  void step(Vec& w, const std::vector<float>& g, double lr) {
    m.resize(w.size());
    v.resize(w.size());
    ++t;
    for (std::size_t i = 0; i < w.size(); ++i) {
      double grad = g[i];
      if (decoupled) {
        w[i] -= lr * wd * w[i];
      } else {
        grad += wd * w[i];
      }
      m[i] = beta1 * m[i] + (1 - beta1) * grad;
      v[i] = beta2 * v[i] + (1 - beta2) * grad * grad;
      const double mhat = m[i] / (1 - std::pow(beta1, t));
      const double vhat = v[i] / (1 - std::pow(beta2, t));
      w[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
};

struct NadamRef {
  double lr, beta1, beta2, eps, wd, psi;
  Vec m, v;
  double mu_product = 1.0;
  int t = 0;

  void step(Vec& w, const std::vector<float>& g) {
    m.resize(w.size());
    v.resize(w.size());
    ++t;
    const double mu = beta1 * (1 - 0.5 * std::pow(0.96, t * psi));
    const double mu_next = beta1 * (1 - 0.5 * std::pow(0.96, (t + 1) * psi));
    mu_product *= mu;
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double grad = g[i] + wd * w[i];
      m[i] = beta1 * m[i] + (1 - beta1) * grad;
      v[i] = beta2 * v[i] + (1 - beta2) * grad * grad;
      const double denom = std::sqrt(v[i] / (1 - std::pow(beta2, t))) + eps;
      w[i] -= lr * (1 - mu) / (1 - mu_product) * grad / denom;
      w[i] -= lr * mu_next / (1 - mu_product * mu_next) * m[i] / denom;
    }
  }
};

// ---------------------------------------------------------------------------------------------------------------
// RMSprop

struct RmspropCase {
  float weight_decay;
  float momentum;
  int centered;
};

class RmspropTest : public ::testing::TestWithParam<RmspropCase> {};

TEST_P(RmspropTest, ThreeStepsMatchTheFormula) {
  const RmspropCase c = GetParam();
  Rmsprop opt(RmspropOptions(0.01f).alpha(0.9f).eps(1e-6f).weight_decay(c.weight_decay).momentum(c.momentum)
                  .centered(c.centered));
  Parameter p = make_parameter(kW0);
  RmspropRef ref{0.01, 0.9, 1e-6, c.weight_decay, c.momentum, c.centered, {}, {}, {}};
  Vec w(kW0.begin(), kW0.end());
  for (int s = 0; s < 3; ++s) {
    update(opt, p, kGrads[s]);
    ref.step(w, kGrads[s]);
    ASSERT_TRUE(near(p.value.to_vector(), w)) << "step " << s + 1;
  }
  EXPECT_EQ(opt.steps(p), 3);
}

INSTANTIATE_TEST_SUITE_P(Variants, RmspropTest,
                         ::testing::Values(RmspropCase{0.0f, 0.0f, 0}, RmspropCase{0.1f, 0.0f, 0},
                                           RmspropCase{0.0f, 0.9f, 0}, RmspropCase{0.0f, 0.0f, 1},
                                           RmspropCase{0.1f, 0.9f, 1}),
                         [](const auto& info) {
                           return std::string(info.param.weight_decay != 0 ? "decay" : "nodecay") +
                                  (info.param.momentum != 0 ? "_momentum" : "") +
                                  (info.param.centered ? "_centered" : "");
                         });

// ---------------------------------------------------------------------------------------------------------------
// Adam, AdamW

class AdamTest : public ::testing::TestWithParam<float> {};

TEST_P(AdamTest, ThreeStepsMatchTheFormula) {
  const float wd = GetParam();
  Adam opt(AdamOptions(0.01f).beta1(0.8f).beta2(0.99f).eps(1e-7f).weight_decay(wd));
  Parameter p = make_parameter(kW0);
  AdamRef ref{0.8, 0.99, 1e-7, wd, 0, {}, {}};
  Vec w(kW0.begin(), kW0.end());
  for (int s = 0; s < 3; ++s) {
    update(opt, p, kGrads[s]);
    ref.step(w, kGrads[s], 0.01);
    ASSERT_TRUE(near(p.value.to_vector(), w)) << "step " << s + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(WeightDecay, AdamTest, ::testing::Values(0.0f, 0.1f));

TEST(AdamStepTest, FirstStepIsLrTimesTheSignOfTheGradient) {
  // mhat = g and vhat = g^2 after one step: w1 = w0 - lr g / (|g| + eps).
  Adam opt(AdamOptions(0.1f));
  Parameter p = make_parameter(kW0);
  update(opt, p, kGrads[0]);
  Vec want(kW0.begin(), kW0.end());
  for (std::size_t i = 0; i < want.size(); ++i) {
    want[i] -= 0.1 * kGrads[0][i] / (std::abs(kGrads[0][i]) + 1e-8);
  }
  EXPECT_TRUE(near(p.value.to_vector(), want));
}

TEST(AdamStepTest, EpsSitsOutsideTheSquareRoot) {
  // Gradient 1e-6: vhat = 1e-12. Outside the root the step is lr * 1e-6 / (1e-6 + 1e-8), about 0.99 lr; inside
  // (PyDTNN) lr * 1e-6 / sqrt(1e-12 + 1e-8), about 0.01 lr.
  Adam opt(AdamOptions(0.1f).eps(1e-8f));
  Parameter p = make_parameter({1, 1});
  update(opt, p, {1e-6f, -1e-6f});
  const auto w = p.value.to_vector();
  const double outside = 0.1 * 1e-6 / (1e-6 + 1e-8);
  const double inside = 0.1 * 1e-6 / std::sqrt(1e-12 + 1e-8);
  EXPECT_NEAR(1.0 - w[0], outside, 1e-6);
  EXPECT_NEAR(w[1] - 1.0, outside, 1e-6);
  EXPECT_GT(std::abs((1.0 - w[0]) - inside), 0.09);
}

TEST(AdamStepTest, BiasCorrectionCountsTheUpdatesOfEachParameter) {
  Adam opt(AdamOptions(0.01f));
  Parameter a = make_parameter(kW0);
  Parameter b = make_parameter(kW0);
  for (int s = 0; s < 3; ++s) update(opt, a, kGrads[s]);
  update(opt, b, kGrads[0]);
  EXPECT_EQ(opt.steps(a), 3);
  EXPECT_EQ(opt.steps(b), 1);
  // b's first update is corrected with t = 1, whatever a's count: the sign-of-gradient step.
  AdamRef ref{0.9, 0.999, 1e-8, 0.0, 0, {}, {}};
  Vec w(kW0.begin(), kW0.end());
  ref.step(w, kGrads[0], 0.01);
  EXPECT_TRUE(near(b.value.to_vector(), w));
}

TEST(AdamStepTest, ALearningRateSetBetweenStepsIsUsedByTheNextUpdate) {
  AdamW opt(AdamWOptions(0.01f).weight_decay(0.5f));
  Parameter p = make_parameter(kW0);
  AdamRef ref{0.9, 0.999, 1e-8, 0.5, 1, {}, {}};
  Vec w(kW0.begin(), kW0.end());
  const double lrs[] = {0.01, 0.05, 0.002};
  for (int s = 0; s < 3; ++s) {
    opt.set_learning_rate(static_cast<float>(lrs[s]));
    update(opt, p, kGrads[s]);
    ref.step(w, kGrads[s], static_cast<float>(lrs[s]));
  }
  EXPECT_TRUE(near(p.value.to_vector(), w));
}

class AdamWTest : public ::testing::TestWithParam<float> {};

TEST_P(AdamWTest, ThreeStepsMatchTheDecoupledFormula) {
  const float wd = GetParam();
  AdamW opt(AdamWOptions(0.01f).weight_decay(wd));
  Parameter p = make_parameter(kW0);
  AdamRef ref{0.9, 0.999, 1e-8, wd, 1, {}, {}};
  Vec w(kW0.begin(), kW0.end());
  for (int s = 0; s < 3; ++s) {
    update(opt, p, kGrads[s]);
    ref.step(w, kGrads[s], 0.01);
    ASSERT_TRUE(near(p.value.to_vector(), w)) << "step " << s + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(WeightDecay, AdamWTest, ::testing::Values(0.01f, 0.5f));

TEST(AdamWDecayTest, DecoupledDecayDiffersFromAdamsL2) {
  Adam adam(AdamOptions(0.01f).weight_decay(0.5f));
  AdamW adamw(AdamWOptions(0.01f).weight_decay(0.5f));
  Parameter a = make_parameter(kW0);
  Parameter b = make_parameter(kW0);
  for (int s = 0; s < 3; ++s) {
    update(adam, a, kGrads[s]);
    update(adamw, b, kGrads[s]);
  }
  const auto wa = a.value.to_vector();
  const auto wb = b.value.to_vector();
  double diff = 0.0;
  for (std::size_t i = 0; i < wa.size(); ++i) diff = std::max(diff, static_cast<double>(std::abs(wa[i] - wb[i])));
  EXPECT_GT(diff, 1e-3);
}

TEST(AdamWDecayTest, DefaultWeightDecayIsPyTorchs) {
  EXPECT_NE(AdamW(AdamWOptions(0.001f)).describe().find("weight_decay=0.01"), std::string::npos);
  EXPECT_NE(Adam(AdamOptions(0.001f)).describe().find("weight_decay=0)"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------------
// NAdam

class NadamTest : public ::testing::TestWithParam<float> {};

TEST_P(NadamTest, ThreeStepsMatchPyTorchsFormula) {
  const float wd = GetParam();
  Nadam opt(NadamOptions(0.002f).weight_decay(wd));
  Parameter p = make_parameter(kW0);
  NadamRef ref{0.002, 0.9, 0.999, 1e-8, wd, 0.004, {}, {}};
  Vec w(kW0.begin(), kW0.end());
  for (int s = 0; s < 3; ++s) {
    update(opt, p, kGrads[s]);
    ref.step(w, kGrads[s]);
    ASSERT_TRUE(near(p.value.to_vector(), w)) << "step " << s + 1;
  }
  EXPECT_EQ(opt.steps(p), 3);
}

INSTANTIATE_TEST_SUITE_P(WeightDecay, NadamTest, ::testing::Values(0.0f, 0.1f));

// ---------------------------------------------------------------------------------------------------------------
// Hyper-parameter checks and the factory

TEST(OptimizerOptionsTest, BadHyperParametersAreRejectedWithTheRule) {
  using F = std::function<void()>;
  const std::vector<std::pair<F, std::string>> cases{
      {[] { Adam(AdamOptions(0.001f).beta1(1.5f)); }, "Adam: beta1=1.5, expected 0 <= beta1 < 1"},
      {[] { Adam(AdamOptions(0.001f).beta2(1.0f)); }, "Adam: beta2=1, expected 0 <= beta2 < 1"},
      {[] { Adam(AdamOptions(0.0f)); }, "Adam: lr=0, expected a finite value > 0"},
      {[] { Adam(AdamOptions(0.001f).eps(0.0f)); }, "Adam: eps=0, expected a finite value > 0"},
      {[] { Adam(AdamOptions(0.001f).weight_decay(-0.1f)); }, "Adam: weight_decay=-0.1, expected a finite value >= 0"},
      {[] { AdamW(AdamWOptions(NAN)); }, "AdamW: lr=nan, expected a finite value > 0"},
      {[] { AdamW(AdamWOptions(0.001f).beta1(-0.1f)); }, "AdamW: beta1=-0.1, expected 0 <= beta1 < 1"},
      {[] { Rmsprop(RmspropOptions(0.01f).alpha(1.0f)); }, "RMSprop: alpha=1, expected 0 <= alpha < 1"},
      {[] { Rmsprop(RmspropOptions(0.01f).momentum(1.2f)); }, "RMSprop: momentum=1.2, expected 0 <= momentum < 1"},
      {[] { Rmsprop(RmspropOptions(-1.0f)); }, "RMSprop: lr=-1, expected a finite value > 0"},
      {[] { Nadam(NadamOptions(0.002f).momentum_decay(-1.0f)); },
       "NAdam: momentum_decay=-1, expected a finite value >= 0"},
      {[] { Nadam(NadamOptions(0.002f).eps(INFINITY)); }, "NAdam: eps=inf, expected a finite value > 0"},
  };
  for (const auto& [f, text] : cases) expect_throw_with<InvalidArgument>(f, text);
}

TEST(MakeOptimizerTest, BuildsEachOptimizerByNameWithItsSettings) {
  OptimizerConfig c;
  c.learning_rate = 0.005f;
  c.name = "sgd";
  c.momentum = 0.9f;
  EXPECT_EQ(make_optimizer(c)->describe(), "SGD(lr=0.005, momentum=0.9, weight_decay=0)");
  c = OptimizerConfig{};
  c.name = "RMSprop";
  c.learning_rate = 0.001f;
  c.alpha = 0.9f;
  EXPECT_EQ(make_optimizer(c)->describe(), "RMSprop(lr=0.001, alpha=0.9, eps=1e-08, weight_decay=0, momentum=0)");
  c = OptimizerConfig{};
  c.name = "adam";
  c.learning_rate = 0.001f;
  c.beta1 = 0.8f;
  EXPECT_EQ(make_optimizer(c)->describe(), "Adam(lr=0.001, beta1=0.8, beta2=0.999, eps=1e-08, weight_decay=0)");
  c.name = "AdamW";
  EXPECT_EQ(make_optimizer(c)->describe(), "AdamW(lr=0.001, beta1=0.8, beta2=0.999, eps=1e-08, weight_decay=0.01)");
  c = OptimizerConfig{};
  c.name = "nadam";
  c.learning_rate = 0.002f;
  c.momentum_decay = 0.005f;
  EXPECT_EQ(make_optimizer(c)->describe(),
            "NAdam(lr=0.002, beta1=0.9, beta2=0.999, eps=1e-08, weight_decay=0, momentum_decay=0.005)");
}

TEST(MakeOptimizerTest, UnknownNameListsTheKnownOnes) {
  OptimizerConfig c;
  c.name = "adagrad";
  expect_throw_with<InvalidArgument>([&] { make_optimizer(c); },
                                     "make_optimizer: optimizer 'adagrad', expected one of sgd, rmsprop, adam, "
                                     "adamw, nadam");
}

TEST(MakeOptimizerTest, AHyperParameterTheOptimizerDoesNotUseIsRejected) {
  OptimizerConfig c;
  c.name = "adam";
  c.momentum = 0.9f;
  expect_throw_with<InvalidArgument>([&] { make_optimizer(c); },
                                     "make_optimizer: momentum=0.9 given for adam, which does not use it; adam takes "
                                     "lr, beta1, beta2, eps, weight_decay");
}

TEST(MakeOptimizerTest, BadValuesGetTheOptimizersMessage) {
  OptimizerConfig c;
  c.name = "nadam";
  c.beta2 = 2.0f;
  expect_throw_with<InvalidArgument>([&] { make_optimizer(c); }, "NAdam: beta2=2, expected 0 <= beta2 < 1");
}

// ---------------------------------------------------------------------------------------------------------------
// Training

Sequential tiny_mlp() {
  Sequential m;
  m.add<Flatten>().add<Dense>(DenseOptions(16, 12)).add<ReLU>().add<Dense>(DenseOptions(12, 3));
  return m;
}

// Random images with one bright pixel per class: a tiny model separates them within a few epochs.
io::Dataset separable_dataset() {
  io::Dataset data = io::synthetic_dataset(48, 1, 4, 4, 3, 7);
  for (std::size_t i = 0; i < data.labels.size(); ++i) {
    data.images[i * 16 + static_cast<std::size_t>(data.labels[i]) * 5] += 3.0f;
  }
  return data;
}

TEST(OptimizerTrainingTest, EachOptimizerLowersTheTrainingLossOfATinyModel) {
  const io::Dataset data = separable_dataset();
  for (const std::string name : {"rmsprop", "adam", "adamw", "nadam"}) {
    OptimizerConfig c;
    c.name = name;
    c.learning_rate = 0.01f;
    auto opt = make_optimizer(c);
    Sequential model = tiny_mlp();
    model.build({1, 4, 4}, 3);
    const History h = fit(model, *opt, data, FitOptions().epochs(6).batch_size(8).tiles(2).seed(1).verbose(false));
    ASSERT_EQ(h.epochs.size(), 6u);
    EXPECT_LT(h.epochs.back().loss, 0.5 * h.epochs.front().loss) << name << ": " << opt->describe();
    EXPECT_GT(h.epochs.back().accuracy, 0.9) << name << ": " << opt->describe();
  }
}

// The groups of a transformer's recipe: with a zero gradient AdamW's update is its decay alone, so an exempt
// parameter keeps every bit and the decayed one is scaled by 1 - lr wd.
TEST(WeightDecayGroupsTest, ExemptParametersAreNotDecayed) {
  Sequential model;
  model.add<Embedding>(EmbeddingOptions(10, 8)).add<LayerNorm>(LayerNormOptions(8)).add<Dense>(DenseOptions(8, 3));
  model.build({4}, 5);
  AdamW opt(AdamWOptions(0.1f).weight_decay(0.5f));
  const auto exempt = exempt_from_weight_decay(opt, model, {"bias", "norm", "embedding"});
  EXPECT_EQ(exempt, (std::vector<std::string>{"0.weight", "1.weight", "1.bias", "2.bias"}));
  std::vector<std::vector<float>> before;
  for (const NamedParameter& p : model.named_parameters()) {
    before.push_back(p.parameter->value.to_vector());
    p.parameter->grad.copy_from(std::vector<float>(static_cast<std::size_t>(p.parameter->grad.numel()), 0.0f));
    opt.submit_update(*p.parameter, p.name, 0);
  }
  const auto params = model.named_parameters();
  for (std::size_t k = 0; k < params.size(); ++k) {
    const auto after = params[k].parameter->value.to_vector();
    const bool decayed = params[k].name == "2.weight";
    EXPECT_EQ(opt.decays(*params[k].parameter), decayed) << params[k].name;
    for (std::size_t i = 0; i < after.size(); ++i) {
      const float want = decayed ? before[k][i] * static_cast<float>(1.0 - 0.1 * 0.5) : before[k][i];
      ASSERT_EQ(after[i], want) << params[k].name << "[" << i << "]";
    }
  }
}

TEST(WeightDecayGroupsTest, OnlyBiasesLeavesNormsAndEmbeddingsDecayedAndAnUnknownGroupIsRefused) {
  Sequential model;
  model.add<Embedding>(EmbeddingOptions(10, 8)).add<LayerNorm>(LayerNormOptions(8)).add<Dense>(DenseOptions(8, 3));
  model.build({4}, 5);
  AdamW opt(AdamWOptions(0.1f));
  // LayerNorm's bias belongs to "norm".
  EXPECT_EQ(exempt_from_weight_decay(opt, model, {"bias"}), (std::vector<std::string>{"2.bias"}));
  expect_throw_with<InvalidArgument>([&] { (void)exempt_from_weight_decay(opt, model, {"biases"}); },
                                     "weight-decay group 'biases', expected one of bias, norm, embedding");
}

// One SGD step (no momentum) is w - lr g: the unclipped run gives every gradient, and the clipped run must move
// each weight by lr g max_norm / (|g| + 1e-6), |g| the norm over every parameter. A max_norm above |g| changes no
// bit.
TEST(ClipGradNormTest, OneStepScalesEveryGradientByTheGlobalNorm) {
  const io::Dataset data = separable_dataset();
  const float lr = 0.5f;
  auto train = [&](float max_norm, int tiles) {
    Sequential model = tiny_mlp();
    model.build({1, 4, 4}, 3);
    Sgd opt(SgdOptions(lr).momentum(0.0f));
    fit(model, opt, data,
        FitOptions().epochs(1).steps_per_epoch(1).batch_size(16).tiles(tiles).shuffle(false).verbose(false)
            .clip_grad_norm(max_norm));
    std::vector<std::vector<float>> w;
    for (const NamedParameter& p : model.named_parameters()) w.push_back(p.parameter->value.to_vector());
    return w;
  };
  Sequential initial = tiny_mlp();
  initial.build({1, 4, 4}, 3);
  std::vector<std::vector<float>> w0;
  for (const NamedParameter& p : initial.named_parameters()) w0.push_back(p.parameter->value.to_vector());
  for (const int tiles : {1, 3}) {
    const auto unclipped = train(0.0f, tiles);
    double norm = 0.0;
    for (std::size_t k = 0; k < w0.size(); ++k) {
      for (std::size_t i = 0; i < w0[k].size(); ++i) {
        const double g = (static_cast<double>(w0[k][i]) - unclipped[k][i]) / lr;
        norm += g * g;
      }
    }
    norm = std::sqrt(norm);
    ASSERT_GT(norm, 0.1);
    const float max_norm = static_cast<float>(norm / 4);
    const auto clipped = train(max_norm, tiles);
    const double factor = max_norm / (norm + 1e-6);
    for (std::size_t k = 0; k < w0.size(); ++k) {
      for (std::size_t i = 0; i < w0[k].size(); ++i) {
        const double step = static_cast<double>(w0[k][i]) - unclipped[k][i];
        const double clipped_step = static_cast<double>(w0[k][i]) - clipped[k][i];
        ASSERT_NEAR(clipped_step, step * factor, 1e-6 + 1e-4 * std::abs(step)) << k << "[" << i << "]";
      }
    }
    EXPECT_EQ(train(static_cast<float>(norm * 2), tiles), unclipped);
  }
}

TEST(ClipGradNormTest, ANegativeOrNonFiniteMaxNormIsRefused) {
  const io::Dataset data = separable_dataset();
  Sequential model = tiny_mlp();
  model.build({1, 4, 4}, 3);
  Sgd opt(SgdOptions(0.1f));
  for (const float bad : {-1.0f, std::nanf(""), INFINITY}) {
    EXPECT_THROW(fit(model, opt, data, FitOptions().steps_per_epoch(1).verbose(false).clip_grad_norm(bad)),
                 InvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace dtnn
