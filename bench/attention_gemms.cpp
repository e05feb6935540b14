// SPDX-License-Identifier: Apache-2.0
// The attention task's per-head GEMMs two ways, on one thread: a loop of bli_sgemm calls that read each head's
// column slice of the packed q, k, v [n, S, 3E] through BLIS's strides (what codelets/cpu/attention.cpp does), and
// one cblas_sgemm_batch call per product (BLIS's batch interface: pointer arrays, one group of n * H GEMMs). The
// forward's two products: scores = q k^T [S, S] and context = P v [S, d], per sample and head. Prints the median
// time of each over interleaved rounds, the GFLOP/s and the largest difference between the two results.
//   attention_gemms [--samples 8] [--seq 256] [--heads 4] [--head-dim 64] [--rounds 15]
// Run pinned to one core (`taskset -c 1`), on a quiet machine.
#include <blis.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/blis_arch.hpp"

namespace {

struct Shape {
  int n = 8;
  int s = 256;
  int h = 4;
  int d = 64;
  [[nodiscard]] int e() const { return h * d; }
};

void sgemm(dim_t m, dim_t n, dim_t k, const float* a, inc_t rsa, inc_t csa, const float* b, inc_t rsb, inc_t csb,
           float* c, inc_t rsc) {
  float alpha = 1.0f;
  float beta = 0.0f;
  bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &alpha, const_cast<float*>(a), rsa, csa,
            const_cast<float*>(b), rsb, csb, &beta, c, rsc, 1);
}

// Loop of strided GEMMs, as the attention task: k^T read through swapped strides.
void strided(const Shape& sh, const float* qkv, float* p, float* c) {
  const int e = sh.e();
  const inc_t row = 3 * e;
  for (int i = 0; i < sh.n; ++i) {
    const float* sample = qkv + static_cast<std::size_t>(i) * sh.s * row;
    for (int h = 0; h < sh.h; ++h) {
      const float* q = sample + h * sh.d;
      const float* k = sample + e + h * sh.d;
      float* ph = p + (static_cast<std::size_t>(i) * sh.h + h) * sh.s * sh.s;
      sgemm(sh.s, sh.s, sh.d, q, row, 1, k, 1, row, ph, sh.s);
    }
  }
  for (int i = 0; i < sh.n; ++i) {
    const float* sample = qkv + static_cast<std::size_t>(i) * sh.s * row;
    for (int h = 0; h < sh.h; ++h) {
      const float* v = sample + 2 * e + h * sh.d;
      const float* ph = p + (static_cast<std::size_t>(i) * sh.h + h) * sh.s * sh.s;
      float* ch = c + static_cast<std::size_t>(i) * sh.s * e + h * sh.d;
      sgemm(sh.s, sh.d, sh.s, ph, sh.s, 1, v, row, 1, ch, e);
    }
  }
}

// The batch interface's pointer arrays, built once (a caller would build them per task).
struct Batch {
  std::vector<const float*> q, k, v, pc;
  std::vector<float*> p, c;
};

Batch pointers(const Shape& sh, const float* qkv, float* p, float* c) {
  Batch b;
  const int e = sh.e();
  for (int i = 0; i < sh.n; ++i) {
    const float* sample = qkv + static_cast<std::size_t>(i) * sh.s * 3 * e;
    for (int h = 0; h < sh.h; ++h) {
      b.q.push_back(sample + h * sh.d);
      b.k.push_back(sample + e + h * sh.d);
      b.v.push_back(sample + 2 * e + h * sh.d);
      float* ph = p + (static_cast<std::size_t>(i) * sh.h + h) * sh.s * sh.s;
      b.p.push_back(ph);
      b.pc.push_back(ph);
      b.c.push_back(c + static_cast<std::size_t>(i) * sh.s * e + h * sh.d);
    }
  }
  return b;
}

void batched(const Shape& sh, Batch& b) {
  CBLAS_TRANSPOSE no = CblasNoTrans;
  CBLAS_TRANSPOSE tr = CblasTrans;
  f77_int count = sh.n * sh.h;
  f77_int s = sh.s;
  f77_int d = sh.d;
  f77_int row = 3 * sh.e();
  f77_int e = sh.e();
  const float one = 1.0f;
  const float zero = 0.0f;
  cblas_sgemm_batch(CblasRowMajor, &no, &tr, &s, &s, &d, &one, b.q.data(), &row, b.k.data(), &row, &zero, b.p.data(),
                    &s, 1, &count);
  cblas_sgemm_batch(CblasRowMajor, &no, &no, &s, &d, &s, &one, b.pc.data(), &s, b.v.data(), &row, &zero, b.c.data(),
                    &e, 1, &count);
}

template <typename F>
double seconds(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Shape sh;
  int rounds = 15;
  CLI::App app{"The attention's per-head GEMMs: strided bli_sgemm loop against cblas_sgemm_batch"};
  app.add_option("--samples", sh.n, "samples of the tile")->check(CLI::PositiveNumber);
  app.add_option("--seq", sh.s, "sequence length")->check(CLI::PositiveNumber);
  app.add_option("--heads", sh.h, "heads")->check(CLI::PositiveNumber);
  app.add_option("--head-dim", sh.d, "features per head")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "interleaved rounds (medians)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  // dtnn's choice of BLIS configuration (core/blis_arch.hpp: skx on AVX-512 CPUs, which BLIS 0.9 may detect as
  // generic), before BLIS's first use.
  const std::string arch = dtnn::configure_blis_arch().reason;
  bli_thread_set_num_threads(1);

  const int e = sh.e();
  std::vector<float> qkv(static_cast<std::size_t>(sh.n) * sh.s * 3 * e);
  std::mt19937 gen(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& x : qkv) x = dist(gen);
  const std::size_t probs = static_cast<std::size_t>(sh.n) * sh.h * sh.s * sh.s;
  const std::size_t context = static_cast<std::size_t>(sh.n) * sh.s * e;
  std::vector<float> p1(probs), p2(probs), c1(context), c2(context);
  Batch b = pointers(sh, qkv.data(), p2.data(), c2.data());

  std::vector<double> loop_s, batch_s;
  strided(sh, qkv.data(), p1.data(), c1.data());  // warm-up
  batched(sh, b);
  for (int r = 0; r < rounds; ++r) {
    loop_s.push_back(seconds([&] { strided(sh, qkv.data(), p1.data(), c1.data()); }));
    batch_s.push_back(seconds([&] { batched(sh, b); }));
  }
  double worst = 0.0;
  for (std::size_t i = 0; i < probs; ++i) worst = std::max(worst, static_cast<double>(std::abs(p1[i] - p2[i])));
  for (std::size_t i = 0; i < context; ++i) worst = std::max(worst, static_cast<double>(std::abs(c1[i] - c2[i])));
  const double flops = 4.0 * sh.n * sh.h * static_cast<double>(sh.s) * sh.s * sh.d;
  const double loop = median(loop_s);
  const double batch = median(batch_s);
  fmt::print("attention forward GEMMs: {} samples x {} heads, seq {}, head dim {} ({:.2f} GFLOP), BLIS {} ({}), 1 "
             "thread, median of {}\n",
             sh.n, sh.h, sh.s, sh.d, flops * 1e-9, bli_info_get_version_str(), arch, rounds);
  fmt::print("  strided bli_sgemm loop: {:8.3f} ms  {:6.1f} GFLOP/s\n", loop * 1e3, flops / loop * 1e-9);
  fmt::print("  cblas_sgemm_batch:      {:8.3f} ms  {:6.1f} GFLOP/s  ({:.3f}x the loop's time)\n", batch * 1e3,
             flops / batch * 1e-9, batch / loop);
  fmt::print("  largest |difference|: {:g}\n", worst);
  return 0;
}
