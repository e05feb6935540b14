// SPDX-License-Identifier: Apache-2.0
// Which BLIS configuration runs, chosen once before BLIS's first use by everything that calls BLIS: the engine
// (runtime/blis_setup.cpp), the kernel tests and bench/conv_layers, so that all of them run what production runs.
// The one header of core/ that needs BLIS's header: only targets that link BLIS include it.
#pragma once

#include <blis.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "core/cpu_features.hpp"

namespace dtnn {

struct BlisArch {
  std::optional<arch_t> forced;  // put in BLIS_ARCH_TYPE; none where the user set it or BLIS detects the CPU
  std::string reason;            // for start-up lines: which configuration and why
};

// Pure, for tests: the choice on a CPU of this setting and vendor, BLIS_ARCH_TYPE being user_value (null: unset).
//  - The user's BLIS_ARCH_TYPE wins (DTNN_MAX_CPU_ISA then caps dtnn's own kernels only).
//  - avx512: skx. BLIS 0.9 does not know Zen 4/5 and falls back to zen3 or generic kernels; skx's run several
//    times faster on any CPU that has AVX-512 (docs/design.md, BLIS).
//  - avx2 below what the CPU runs: zen3 on AMD (what BLIS 0.9 picks on the AMD cores it knows; haswell's 6x16
//    micro-kernel with cache blocks for AMD's caches), haswell elsewhere.
//  - generic asked for: BLIS's generic configuration, whatever the CPU.
//  - otherwise BLIS's own detection.
inline BlisArch choose_blis_arch(const CpuIsaSetting& isa, bool amd, const char* user_value) {
  BlisArch a;
  const std::string cap = isa.cap ? std::string("DTNN_MAX_CPU_ISA=") + cpu_isa_name(*isa.cap) + ", CPU " +
                                        cpu_isa_name(isa.detected)
                                  : std::string();
  if (user_value != nullptr && *user_value != '\0') {
    a.reason = std::string("BLIS_ARCH_TYPE=") + user_value + " set by the user";
    if (isa.capped()) {
      a.reason += "; dtnn's own kernels capped by " + cap;
    }
    return a;
  }
  if (isa.effective == CpuIsa::kAvx512) {
    a.forced = BLIS_ARCH_SKX;
    a.reason = "CPU has AVX-512: using BLIS's skx kernels";
  } else if (isa.cap == CpuIsa::kGeneric) {
    a.forced = BLIS_ARCH_GENERIC;
    a.reason = "capped by " + cap + ": BLIS's generic kernels";
  } else if (isa.capped()) {
    a.forced = amd ? BLIS_ARCH_ZEN3 : BLIS_ARCH_HASWELL;
    a.reason = std::string("capped by ") + cap + ": BLIS's " + (amd ? "zen3" : "haswell") + " kernels";
  } else {
    a.reason = "BLIS's own CPU detection (no AVX-512)";
  }
  return a;
}

// This process's choice, applied once (BLIS reads BLIS_ARCH_TYPE once, at its first use). Thread-safe;
// InvalidArgument for a bad DTNN_MAX_CPU_ISA.
inline const BlisArch& configure_blis_arch() {
  static const BlisArch arch = [] {
    BlisArch a = choose_blis_arch(cpu_isa_setting(), cpu_is_amd(), std::getenv("BLIS_ARCH_TYPE"));
    if (a.forced) {
      // BLIS 0.9 parses numeric ids only.
      setenv("BLIS_ARCH_TYPE", std::to_string(static_cast<int>(*a.forced)).c_str(), 1);
    }
    return a;
  }();
  return arch;
}

}  // namespace dtnn
