// SPDX-License-Identifier: Apache-2.0
#include "runtime/blis_setup.hpp"

#include <blis.h>

#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "core/cpu_features.hpp"

namespace dtnn::runtime {
namespace {

BlisSetup choose() {
  BlisSetup s;
  const char* user = std::getenv("BLIS_ARCH_TYPE");
  if (user != nullptr && *user != '\0') {
    s.reason = fmt::format("BLIS_ARCH_TYPE={} set by the user", user);
  } else if (cpu_has_avx512()) {
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
