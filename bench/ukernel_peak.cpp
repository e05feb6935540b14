// SPDX-License-Identifier: Apache-2.0
// ukernel_peak: GFLOP/s of each GEMM micro-kernel this CPU runs, on panels that stay in L1/L2 (no packing, no
// epilogue beyond the kernel's own store): convgemm's own fp32 kernels and BLIS's, the bf16 kernels (vdpbf16ps, its
// emulation, and AMX's TDPBF16PS on 2 x 2 tiles where the CPU has AMX-BF16). It tells how much a precision can gain
// on this CPU before any packing is paid: on Zen 5 one vdpbf16ps does the work of two FMAs at the same rate; on
// Intel's Sapphire Rapids class it issues at half their rate, and AMX is the one that pays (docs/design.md, bf16).
//
//   taskset -c 1 ukernel_peak [--k 384] [--runs 5] [--seconds 0.2] [--json FILE]
//
// Each figure is the median of --runs timings of one thread's CPU time, each of about --seconds.
#include <blis.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <fmt/core.h>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "codelets/cpu/aligned_floats.hpp"
#include "codelets/cpu/bf16.hpp"
#include "codelets/cpu/convgemm.hpp"
#include "codelets/cpu/convgemm_ukernels.hpp"
#include "core/cpu_features.hpp"

namespace {

namespace k = dtnn::kernels::cpu;

double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Kernel {
  std::string name;
  std::string precision;
  double flops_per_call;
  std::function<void(long)> run;  // calls the kernel n times
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GFLOP/s of each GEMM micro-kernel on cache-resident panels"};
  long kc = 384;
  int runs = 5;
  double seconds = 0.2;
  std::string json_file;
  app.add_option("--k", kc, "reduction length of a call (a multiple of 32)")->check(CLI::Range(32L, 4096L))
      ->capture_default_str();
  app.add_option("--runs", runs, "timings per kernel, the median reported")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--seconds", seconds, "length of one timing")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--json", json_file, "also write the figures as JSON");
  CLI11_PARSE(app, argc, argv);
  if (kc % 32 != 0) {
    fmt::print(stderr, "ukernel_peak: --k {}, expected a multiple of 32 (AMX's tiles hold 32 bf16 of the reduction)\n",
               kc);
    return 2;
  }

  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const auto words = [&](std::size_t count) {
    std::vector<std::uint32_t> w(count);
    for (auto& e : w) e = k::bf16_pair(dist(gen), dist(gen));
    return w;
  };

  std::vector<Kernel> kernels;
  // fp32: each own kernel this CPU runs, and BLIS's. Panels of MR x K and K x NR, C of MR x NR.
  struct Fp32Panels {
    k::AlignedFloats a, b, c;
    auxinfo_t aux{};
  };
  std::vector<std::unique_ptr<Fp32Panels>> keep;
  const auto add_fp32 = [&](const std::string& name, sgemm_ukr_ft ukr, int mr, int nr, bool col_pref, cntx_t* cntx) {
    auto p = std::make_unique<Fp32Panels>();
    float* a = p->a.reserve(static_cast<std::size_t>(mr * kc));
    float* b = p->b.reserve(static_cast<std::size_t>(nr * kc));
    float* c = p->c.reserve(static_cast<std::size_t>(mr * nr));
    for (long i = 0; i < mr * kc; ++i) a[i] = dist(gen);
    for (long i = 0; i < nr * kc; ++i) b[i] = dist(gen);
    bli_auxinfo_set_next_a(a, &p->aux);
    bli_auxinfo_set_next_b(b, &p->aux);
    auxinfo_t* aux = &p->aux;
    kernels.push_back({name, "fp32", 2.0 * mr * nr * kc, [=](long n) {
                         float one = 1.0f;
                         float zero = 0.0f;
                         for (long r = 0; r < n; ++r) {
                           if (col_pref) {
                             ukr(mr, nr, kc, &one, a, b, &zero, c, 1, mr, aux, cntx);
                           } else {
                             ukr(mr, nr, kc, &one, a, b, &zero, c, nr, 1, aux, cntx);
                           }
                         }
                       }});
    keep.push_back(std::move(p));
  };
  {
    cntx_t* cntx = bli_gks_query_cntx();
    auto ukr = reinterpret_cast<sgemm_ukr_ft>(bli_cntx_get_l3_nat_ukr_dt(BLIS_FLOAT, BLIS_GEMM_UKR, cntx));
    const auto mr = static_cast<int>(bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_MR, cntx));
    const auto nr = static_cast<int>(bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_NR, cntx));
    const bool col_pref = !bli_cntx_l3_nat_ukr_prefers_rows_dt(BLIS_FLOAT, BLIS_GEMM_UKR, cntx);
    add_fp32(fmt::format("blis ({}, {}x{})", bli_arch_string(bli_arch_query_id()), mr, nr), ukr, mr, nr, col_pref,
             cntx);
  }
  const std::vector<std::string> own = k::convgemm_ukernels();
  const auto runs_here = [&](const std::string& n) { return std::find(own.begin(), own.end(), n) != own.end(); };
#if defined(__x86_64__)
  if (runs_here("avx512_32x8")) add_fp32("avx512_32x8", k::sgemm_ukr_avx512_32x8, 32, 8, true, nullptr);
  if (runs_here("avx512_48x8")) add_fp32("avx512_48x8", k::sgemm_ukr_avx512_48x8, 48, 8, true, nullptr);
  if (runs_here("avx2_24x4")) add_fp32("avx2_24x4", k::sgemm_ukr_avx2_24x4, 24, 4, true, nullptr);
#endif

  // bf16 pairs: 32 x 8 (vdpbf16ps and its emulation), K / 2 pair words per row.
  const long kp = kc / 2;
  const auto bf16_a = words(static_cast<std::size_t>(32 * kp));
  const auto bf16_b = words(static_cast<std::size_t>(8 * kp));
  std::vector<float> bf16_c(32 * 8);
  const auto add_bf16 = [&](const std::string& name, k::bf16gemm_ukr_ft ukr) {
    kernels.push_back({name, "bf16", 2.0 * 32 * 8 * kc, [&, ukr](long n) {
                         for (long r = 0; r < n; ++r) {
                           ukr(32, 8, kp, bf16_a.data(), bf16_b.data(), 0.0f, bf16_c.data(), 32);
                         }
                       }});
  };
#if defined(__x86_64__)
  if (dtnn::cpu_has_avx512_bf16()) add_bf16("avx512bf16_32x8 (vdpbf16ps)", k::bf16gemm_ukr_avx512bf16_32x8);
#endif
  add_bf16("emulated_32x8", k::bf16gemm_ukr_emulated_32x8);

  // AMX: 32 x 32 from 2 x 2 tiles, a the u side's pair panel, b the v side's rows of pairs. Checked once against the
  // same sums in double, so that the figure is that of a kernel computing the right thing.
  const bool amx = dtnn::cpu_has_amx_bf16();
  const std::string amx_why = "this CPU has no AMX-BF16 (or DTNN_MAX_CPU_ISA caps it, or Linux did not grant it)";
  const auto amx_a = words(static_cast<std::size_t>(32 * kp));
  const auto amx_b = words(static_cast<std::size_t>(32 * kp));
  std::vector<float> amx_c(32 * 32);
  double amx_error = 0.0;
#if defined(__x86_64__)
  if (amx) {
    k::bf16_amx_begin();
    k::bf16gemm_ukr_amx_32x32(32, 32, kp, amx_a.data(), amx_b.data(), 0.0f, amx_c.data(), 32);
    double scale = 0.0;
    for (int u = 0; u < 32; ++u) {
      for (int v = 0; v < 32; ++v) {
        double ref = 0.0;
        for (long t = 0; t < kp; ++t) {
          const std::uint32_t wa = amx_a[static_cast<std::size_t>(t * 32 + u)];
          const std::uint32_t wb = amx_b[static_cast<std::size_t>(v * kp + t)];
          ref += static_cast<double>(k::pair_even(wa)) * k::pair_even(wb) +
                 static_cast<double>(k::pair_odd(wa)) * k::pair_odd(wb);
        }
        amx_error = std::max(amx_error, std::abs(ref - amx_c[static_cast<std::size_t>(u + v * 32)]));
        scale = std::max(scale, std::abs(ref));
      }
    }
    amx_error /= scale > 0.0 ? scale : 1.0;
    kernels.push_back({"amx_32x32 (tdpbf16ps, 2x2 tiles)", "bf16", 2.0 * 32 * 32 * kc, [&](long n) {
                         for (long r = 0; r < n; ++r) {
                           k::bf16gemm_ukr_amx_32x32(32, 32, kp, amx_a.data(), amx_b.data(), 0.0f, amx_c.data(), 32);
                         }
                       }});
  }
#endif

  nlohmann::json doc;
  doc["k"] = kc;
  doc["runs"] = runs;
  doc["isa"] = dtnn::cpu_isa_name(dtnn::cpu_isa_setting().effective);
  doc["avx512_bf16"] = dtnn::cpu_has_avx512_bf16();
  doc["amx"] = amx ? "usable" : amx_why;
  fmt::print("K {}, one thread, median of {} timings of ~{} s (thread CPU time); AMX: {}\n", kc, runs, seconds,
             amx ? fmt::format("usable (largest error against double sums {:.1e} of the largest)", amx_error)
                 : amx_why);
  fmt::print("{:<36} {:>9} {:>10} {:>12}\n", "micro-kernel", "precision", "GFLOP/s", "/ best fp32");
  std::vector<double> gflops(kernels.size());
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    Kernel& kn = kernels[i];
    // Calls per timing from a short calibration.
    long calls = 16;
    for (;;) {
      const double t0 = thread_seconds();
      kn.run(calls);
      const double t = thread_seconds() - t0;
      if (t > seconds / 8 || calls > (1L << 30)) {
        calls = std::max(1L, static_cast<long>(static_cast<double>(calls) * seconds / std::max(t, 1e-9)));
        break;
      }
      calls *= 4;
    }
    std::vector<double> rates;
    for (int r = 0; r < runs; ++r) {
      const double t0 = thread_seconds();
      kn.run(calls);
      rates.push_back(kn.flops_per_call * static_cast<double>(calls) / (thread_seconds() - t0) * 1e-9);
    }
    gflops[i] = median(rates);
  }
  double best_fp32 = 0.0;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    if (kernels[i].precision == "fp32") best_fp32 = std::max(best_fp32, gflops[i]);
  }
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    fmt::print("{:<36} {:>9} {:>10.1f} {:>12.2f}\n", kernels[i].name, kernels[i].precision, gflops[i],
               gflops[i] / best_fp32);
    doc["kernels"].push_back({{"name", kernels[i].name},
                              {"precision", kernels[i].precision},
                              {"gflops", gflops[i]},
                              {"over_best_fp32", gflops[i] / best_fp32}});
  }
  if (amx) doc["amx_relative_error"] = amx_error;
  if (!json_file.empty()) {
    std::ofstream(json_file) << doc.dump(2) << "\n";
    fmt::print("wrote {}\n", json_file);
  }
  return 0;
}
