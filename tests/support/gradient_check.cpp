// SPDX-License-Identifier: Apache-2.0
#include "support/gradient_check.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/engine.hpp"

namespace dtnn::testing {
namespace {

Shape with_batch(std::int64_t n, Shape s) {
  s.insert(s.begin(), n);
  return s;
}

// Magnitudes of at least 0.05 keep inputs away from the kinks of ReLU-like layers, where a central
// difference of step eps would straddle two branches.
void randomize(Tensor& t, Rng& rng) {
  auto a = t.write();
  for (float& v : a.data()) {
    const float magnitude = rng.uniform(0.05f, 1.0f);
    v = rng.uniform01() < 0.5f ? -magnitude : magnitude;
  }
}

double objective(Layer& layer, const Tensor& x, Tensor& y, const std::vector<float>& r) {
  layer.forward(x, y, PassContext{1, 0});
  auto values = y.read();
  double l = 0.0;
  for (std::size_t i = 0; i < r.size(); ++i) l += static_cast<double>(values[static_cast<std::int64_t>(i)]) * r[i];
  return l;
}

std::vector<std::int64_t> probe_indices(std::int64_t n, int probes, Rng& rng) {
  std::vector<std::int64_t> idx;
  if (n <= probes) {
    for (std::int64_t i = 0; i < n; ++i) idx.push_back(i);
  } else {
    for (int i = 0; i < probes; ++i) idx.push_back(static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(n))));
  }
  return idx;
}

double central_difference(Layer& layer, Tensor& target, std::int64_t i, float eps, const Tensor& x, Tensor& y,
                          const std::vector<float>& r) {
  float original;
  {
    auto a = target.read_write();
    original = a[i];
    a[i] = original + eps;
  }
  const double plus = objective(layer, x, y, r);
  {
    auto a = target.read_write();
    a[i] = original - eps;
  }
  const double minus = objective(layer, x, y, r);
  {
    auto a = target.read_write();
    a[i] = original;
  }
  return (plus - minus) / (2.0 * eps);
}

// Compares analytic[i] with the central difference obtained by perturbing `target` at i. A probe where the
// differences of steps eps and eps/2 disagree sits on a kink of the objective (a ReLU or max-pool switching
// inside the step, e.g. a fused ReLU whose pre-activation is near zero): there is no derivative to compare, so
// the probe is skipped; at most half of the probes may be.
void compare(const std::string& what, Layer& layer, Tensor& target, const std::vector<float>& analytic,
             const Tensor& x, Tensor& y, const std::vector<float>& r, const GradCheckOptions& o, Rng& rng) {
  const auto probes = probe_indices(target.numel(), o.probes, rng);
  int skipped = 0;
  for (std::int64_t i : probes) {
    const double numeric = central_difference(layer, target, i, o.eps, x, y, r);
    const double finer = central_difference(layer, target, i, o.eps / 2, x, y, r);
    if (std::abs(numeric - finer) > o.atol + o.rtol * std::abs(finer)) {
      ++skipped;
      continue;
    }
    const double got = analytic[static_cast<std::size_t>(i)];
    EXPECT_LE(std::abs(got - numeric), o.atol + o.rtol * std::abs(numeric))
        << layer.type() << " " << what << "[" << i << "]: analytic " << got << ", numeric " << numeric;
  }
  EXPECT_LE(2 * skipped, static_cast<int>(probes.size()))
      << layer.type() << " " << what << ": " << skipped << " of " << probes.size() << " probes sit on kinks";
}

}  // namespace

void check_layer_gradients(Layer& layer, const Shape& sample_input, const GradCheckOptions& o) {
  Rng rng(o.seed);
  const Shape out = layer.build(sample_input);
  layer.reset_parameters(rng);
  layer.prepare_tiles(o.tiles);
  Tensor x(with_batch(o.batch, sample_input), o.tiles);
  Tensor y(with_batch(o.batch, out), o.tiles);
  Tensor dy(with_batch(o.batch, out), o.tiles);
  Tensor dx(with_batch(o.batch, sample_input), o.tiles);
  randomize(x, rng);
  randomize(dy, rng);
  const std::vector<float> r = dy.to_vector();

  const PassContext ctx{1, 0};
  layer.forward(x, y, ctx);
  layer.backward(x, y, dy, &dx, ctx);
  runtime::Engine::current()->wait_all();
  const std::vector<float> dx_analytic = dx.to_vector();
  std::vector<std::vector<float>> param_grads;
  for (Parameter* p : layer.parameters()) param_grads.push_back(p->grad.to_vector());

  compare("input", layer, x, dx_analytic, x, y, r, o, rng);
  auto params = layer.parameters();
  for (std::size_t k = 0; k < params.size(); ++k) {
    compare(params[k]->name, layer, params[k]->value, param_grads[k], x, y, r, o, rng);
  }
}

}  // namespace dtnn::testing
