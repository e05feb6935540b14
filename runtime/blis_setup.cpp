// SPDX-License-Identifier: Apache-2.0
#include "runtime/blis_setup.hpp"

#include <blis.h>

#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

namespace dtnn::runtime {
namespace {

// AVX-512 kernels (BLIS's skx configuration) need F, DQ, BW and VL, and the OS must save the zmm state.
bool cpu_runs_avx512() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))) {
    return false;
  }
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  constexpr unsigned kOpmaskZmm = (1u << 5) | (1u << 6) | (1u << 7);
  constexpr unsigned kSseAvx = (1u << 1) | (1u << 2);
  return (lo & (kOpmaskZmm | kSseAvx)) == (kOpmaskZmm | kSseAvx);
#else
  return false;
#endif
}

BlisSetup choose() {
  BlisSetup s;
  const char* user = std::getenv("BLIS_ARCH_TYPE");
  if (user != nullptr && *user != '\0') {
    s.reason = fmt::format("BLIS_ARCH_TYPE={} set by the user", user);
  } else if (cpu_runs_avx512()) {
    // BLIS 0.9 does not know Zen 4/5 and falls back to generic or zen3 kernels; the AVX-512 (skx)
    // kernels run several times faster on any CPU that has AVX-512. BLIS 0.9 only parses numeric ids.
    setenv("BLIS_ARCH_TYPE", fmt::format("{}", static_cast<int>(BLIS_ARCH_SKX)).c_str(), 1);
    s.reason = "CPU has AVX-512: using BLIS's skx kernels";
  } else {
    s.reason = "BLIS's own CPU detection (no AVX-512)";
  }
  // Parallelism comes from the task graph: a BLIS call inside a task must never spawn threads.
  bli_thread_set_num_threads(1);
  s.version = bli_info_get_version_str();
  s.arch = bli_arch_string(bli_arch_query_id());
  return s;
}

}  // namespace

const BlisSetup& configure_blis() {
  static const BlisSetup setup = choose();
  return setup;
}

}  // namespace dtnn::runtime
