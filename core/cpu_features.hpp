// SPDX-License-Identifier: Apache-2.0
// CPU feature detection, and the cap on it. Header-only and free of StarPU and MPI, so that the CPU kernels, their
// tests and benchmarks make the same choices as the runtime (runtime/blis_setup.cpp, core/blis_arch.hpp).
//
// The kernels that have code for one instruction set (convgemm's micro-kernels, Winograd, BLIS's configuration)
// ask cpu_has_avx512 / cpu_has_avx2_fma, which answer for the effective level: what the CPU runs, capped by
// DTNN_MAX_CPU_ISA (as oneDNN's DNNL_MAX_CPU_ISA), so that an AVX-512 machine also tests and measures the AVX2
// paths.
#pragma once

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <cctype>
#include <cstdlib>
#include <optional>
#include <string>

#include "core/errors.hpp"

namespace dtnn {

// The instruction-set levels the kernels have code for, each including the ones below.
//   avx512:  AVX-512 F, DQ, BW and VL with the OS saving the zmm state (BLIS's skx, our avx512_* micro-kernels)
//   avx2:    AVX2 and FMA (BLIS's haswell or zen3, our avx2_* micro-kernels)
//   generic: none of these (BLIS's generic configuration; no micro-kernel of ours, no Winograd)
enum class CpuIsa { kGeneric, kAvx2, kAvx512 };

inline const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kGeneric: break;
  }
  return "generic";
}

// The level this CPU and OS run. False / generic on anything but x86-64.
inline CpuIsa detect_cpu_isa() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  // libgcc reports AVX features only where the OS saves the ymm state; the zmm and opmask state is checked here.
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    // XCR0 bits 1, 2, 5, 6 and 7: SSE, AVX, opmask and the two halves of the zmm state.
    constexpr unsigned kSseAvxOpmaskZmm = (1u << 1) | (1u << 2) | (1u << 5) | (1u << 6) | (1u << 7);
    if ((lo & kSseAvxOpmaskZmm) == kSseAvxOpmaskZmm) {
      return CpuIsa::kAvx512;
    }
  }
  return avx2 ? CpuIsa::kAvx2 : CpuIsa::kGeneric;
#else
  return CpuIsa::kGeneric;
#endif
}

// An AMD CPU: BLIS's AVX2 configuration for it is zen3 rather than haswell.
inline bool cpu_is_amd() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_is("amd");
#else
  return false;
#endif
}

// The value of DTNN_MAX_CPU_ISA: a level name in any case; null or empty is no cap.
inline std::optional<CpuIsa> parse_cpu_isa_cap(const char* value) {
  if (value == nullptr || *value == '\0') {
    return std::nullopt;
  }
  std::string lower;
  for (const char* p = value; *p != '\0'; ++p) {
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
  }
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2, CpuIsa::kGeneric}) {
    if (lower == cpu_isa_name(isa)) {
      return isa;
    }
  }
  throw InvalidArgument(std::string("DTNN_MAX_CPU_ISA='") + value +
                        "', expected avx512, avx2 or generic (any case), or unset for no cap");
}

// What the CPU runs, the cap and what the kernels use: the lower of the two (a cap above the CPU changes nothing).
struct CpuIsaSetting {
  CpuIsa detected = CpuIsa::kGeneric;
  std::optional<CpuIsa> cap;
  CpuIsa effective = CpuIsa::kGeneric;

  // Whether the cap takes something away from the kernels.
  [[nodiscard]] bool capped() const { return effective < detected; }
};

// Pure, for tests: the setting of a CPU of level `detected` under DTNN_MAX_CPU_ISA=cap_value (null: unset).
inline CpuIsaSetting cpu_isa_setting(CpuIsa detected, const char* cap_value) {
  CpuIsaSetting s;
  s.detected = detected;
  s.cap = parse_cpu_isa_cap(cap_value);
  s.effective = s.cap && *s.cap < detected ? *s.cap : detected;
  return s;
}

// This process's: read once; InvalidArgument for a bad DTNN_MAX_CPU_ISA, at every call until it is fixed.
inline const CpuIsaSetting& cpu_isa_setting() {
  static const CpuIsaSetting setting = cpu_isa_setting(detect_cpu_isa(), std::getenv("DTNN_MAX_CPU_ISA"));
  return setting;
}

// What kernels may use (DTNN_MAX_CPU_ISA applied).
inline bool cpu_has_avx512() { return cpu_isa_setting().effective >= CpuIsa::kAvx512; }
inline bool cpu_has_avx2_fma() { return cpu_isa_setting().effective >= CpuIsa::kAvx2; }

// AVX512-BF16 (vdpbf16ps, vcvtne2ps2bf16) on top of the avx512 level: the bf16 kernels' instruction, which
// DTNN_MAX_CPU_ISA below avx512 takes away with the rest of AVX-512.
inline bool cpu_has_avx512_bf16() {
#if defined(__x86_64__)
  static const bool bf16 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") != 0;
  }();
  return cpu_has_avx512() && bf16;
#else
  return false;
#endif
}

// AMX-TILE and AMX-BF16 (TDPBF16PS; Intel Sapphire Rapids and later) on top of the avx512 level, with Linux's
// permission to use the tile state, asked for once per process (arch_prctl ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA, Linux 5.16 and later; every thread of the process may then load tiles).
inline bool cpu_has_amx_bf16() {
#if defined(__x86_64__) && defined(__linux__)
  static const bool amx = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) {
      return false;
    }
    constexpr unsigned kAmxBf16 = 1u << 22;
    constexpr unsigned kAmxTile = 1u << 24;
    if ((edx & kAmxBf16) == 0 || (edx & kAmxTile) == 0) {
      return false;
    }
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return cpu_has_avx512() && amx;
#else
  return false;
#endif
}

}  // namespace dtnn
