// SPDX-License-Identifier: Apache-2.0
// CPU feature detection. Header-only and free of StarPU and MPI, so that the CPU kernels, their tests and
// benchmarks make the same choices as the runtime (runtime/blis_setup.cpp).
#pragma once

namespace dtnn {

// Whether the CPU runs AVX-512 code as BLIS's skx configuration needs it: F, DQ, BW and VL, and the OS saves
// the SSE, AVX, opmask and zmm state (XCR0 bits 1, 2, 5, 6 and 7). False on anything but x86-64.
inline bool cpu_has_avx512() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))) {
    return false;
  }
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  constexpr unsigned kSseAvxOpmaskZmm = (1u << 1) | (1u << 2) | (1u << 5) | (1u << 6) | (1u << 7);
  return (lo & kSseAvxOpmaskZmm) == kSseAvxOpmaskZmm;
#else
  return false;
#endif
}

// AVX2 and FMA (libgcc reports AVX features only where the OS saves the ymm state). False on anything but x86-64.
inline bool cpu_has_avx2_fma() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

}  // namespace dtnn
