// SPDX-License-Identifier: Apache-2.0
// Exact GELU's kernels (x Phi(x) and its derivative, codelets/cpu/vector_math_impl.hpp) against the scalar libm loop
// they replaced (0.5 erfc(-x / sqrt 2) and exp, kept here as the baseline).
//   gelu_exact [--count 1048576] [--rounds 5]   elements/s of each, medians of interleaved rounds
//   gelu_exact --accuracy [--stride 1]          errors against erfc and exp in double over every stride-th float
//                                               of [-13.2, 13.2] (every float: a minute or two)
// The vector loops run at the level DTNN_MAX_CPU_ISA leaves (avx512, avx2, generic). Run pinned to one core
// (`taskset -c 1`), on a quiet machine.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "codelets/cpu/nn_kernels.hpp"
#include "core/cpu_features.hpp"

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

// The loops as they were before the vector ones.
void libm_gelu_fwd(std::size_t count, const float* x, float* y) {
  for (std::size_t i = 0; i < count; ++i) {
    const float v = x[i];
    y[i] = v * (0.5f * std::erfc(-v * kInvSqrt2));
  }
}

void libm_gelu_bwd_data(std::size_t count, const float* x, const float* dy, float* dx) {
  for (std::size_t i = 0; i < count; ++i) {
    const float v = x[i];
    const float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
    dx[i] = dy[i] * (0.5f * std::erfc(-v * kInvSqrt2) + v * pdf);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The spacing of floats at a double value: the float's ulp on the side of it that the value lies.
double ulp_at(double ref) {
  const float f = static_cast<float>(std::abs(ref));
  if (f == 0.0f) return std::numeric_limits<float>::denorm_min();
  const double up = std::nextafter(f, std::numeric_limits<float>::infinity()) - double{f};
  const double down = double{f} - std::nextafter(f, 0.0f);
  return std::abs(ref) >= f ? up : down;
}

struct Worst {
  double err = 0.0;
  float at = 0.0f;
  double sum = 0.0;
  std::size_t count = 0;
  void add(double e, float x) {
    sum += e;
    ++count;
    if (e > err) {
      err = e;
      at = x;
    }
  }
  [[nodiscard]] std::string str(const char* unit) const {
    return fmt::format("worst {:.3g} {} at x = {:.9g}, mean {:.3g}", err, unit, at, count ? sum / count : 0.0);
  }
};

struct Errors {
  Worst fwd_left, fwd_right, bwd, bwd_abs;
};

// y in ulps where the reference is a normal float; the derivative in ulps away from its zero at x ~ -0.7518
// (|x + 0.7518| > 0.05; nearby only its absolute error means anything) and absolute everywhere.
void accumulate(const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& d, Errors& e) {
  const double inv_sqrt2 = 1.0 / std::sqrt(2.0);
  const double inv_sqrt2pi = 1.0 / std::sqrt(2.0 * M_PI);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double phi = 0.5 * std::erfc(-v * inv_sqrt2);
    const double ref = v * phi;
    const double dref = phi + v * inv_sqrt2pi * std::exp(-0.5 * v * v);
    if (std::abs(ref) >= std::numeric_limits<float>::min()) {
      (v < 0.0 ? e.fwd_left : e.fwd_right).add(std::abs(y[i] - ref) / ulp_at(ref), x[i]);
    }
    e.bwd_abs.add(std::abs(d[i] - dref), x[i]);
    if (std::abs(dref) >= std::numeric_limits<float>::min() && std::abs(v + 0.7518) > 0.05) {
      e.bwd.add(std::abs(d[i] - dref) / ulp_at(dref), x[i]);
    }
  }
}

int accuracy(std::uint32_t stride) {
  Errors vec, libm;
  std::vector<float> x, y, d;
  const std::vector<float> ones(1 << 20, 1.0f);
  auto flush = [&] {
    y.resize(x.size());
    d.resize(x.size());
    dtnn::kernels::cpu::gelu_fwd(x.size(), x.data(), y.data());
    dtnn::kernels::cpu::gelu_bwd_data(x.size(), x.data(), ones.data(), d.data());
    accumulate(x, y, d, vec);
    libm_gelu_fwd(x.size(), x.data(), y.data());
    libm_gelu_bwd_data(x.size(), x.data(), ones.data(), d.data());
    accumulate(x, y, d, libm);
    x.clear();
  };
  // Every float's bit pattern from the smallest denormal to 13.2, both signs.
  const std::uint32_t end = std::bit_cast<std::uint32_t>(13.2f);
  for (std::uint32_t sign : {0x80000000u, 0u}) {
    for (std::uint64_t b = 1; b <= end; b += stride) {
      x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b) | sign));
      if (x.size() == ones.size()) flush();
    }
  }
  flush();
  fmt::print("exact GELU against double, every {}float of [-13.2, 13.2], vector loops at {}\n",
             stride == 1 ? std::string("") : fmt::format("{}th ", stride),
             dtnn::cpu_isa_name(dtnn::cpu_isa_setting().effective));
  for (const auto& [name, e] : {std::pair<const char*, const Errors&>{"vector", vec}, {"libm", libm}}) {
    fmt::print("  {:6} y,     x < 0:  {}\n", name, e.fwd_left.str("ulp"));
    fmt::print("  {:6} y,     x >= 0: {}\n", name, e.fwd_right.str("ulp"));
    fmt::print("  {:6} dy/dx:         {}\n", name, e.bwd.str("ulp"));
    fmt::print("  {:6} dy/dx:         {}\n", name, e.bwd_abs.str("absolute"));
  }
  return 0;
}

template <class F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int speed(std::size_t count, int rounds) {
  std::vector<float> x(count), dy(count), y(count);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (auto& v : x) v = normal(rng);
  for (auto& v : dy) v = normal(rng);
  using namespace dtnn::kernels::cpu;
  std::vector<double> vf, vb, lf, lb;
  for (int r = 0; r < rounds; ++r) {
    vf.push_back(seconds([&] { gelu_fwd(count, x.data(), y.data()); }));
    lf.push_back(seconds([&] { libm_gelu_fwd(count, x.data(), y.data()); }));
    vb.push_back(seconds([&] { gelu_bwd_data(count, x.data(), dy.data(), y.data()); }));
    lb.push_back(seconds([&] { libm_gelu_bwd_data(count, x.data(), dy.data(), y.data()); }));
  }
  const double n = static_cast<double>(count);
  fmt::print("exact GELU, {} elements (x ~ N(0, 2^2)), vector loops at {}, medians of {} rounds\n", count,
             dtnn::cpu_isa_name(dtnn::cpu_isa_setting().effective), rounds);
  fmt::print("  forward:  libm {:8.1f} Melem/s, vector {:8.1f} Melem/s ({:.1f}x)\n", n / median(lf) * 1e-6,
             n / median(vf) * 1e-6, median(lf) / median(vf));
  fmt::print("  backward: libm {:8.1f} Melem/s, vector {:8.1f} Melem/s ({:.1f}x)\n", n / median(lb) * 1e-6,
             n / median(vb) * 1e-6, median(lb) / median(vb));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t count = 1 << 20;
  int rounds = 5;
  bool check_accuracy = false;
  std::uint32_t stride = 1;
  CLI::App app{"Exact GELU: the vector loops against the scalar libm loop they replaced"};
  app.add_option("--count", count, "elements")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "interleaved rounds (medians)")->check(CLI::PositiveNumber);
  app.add_flag("--accuracy", check_accuracy, "errors against double instead of speed");
  app.add_option("--stride", stride, "with --accuracy: every stride-th float")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  return check_accuracy ? accuracy(stride) : speed(count, rounds);
}
