// SPDX-License-Identifier: Apache-2.0
// BLIS configuration chosen at start-up: single-threaded inside tasks, best kernels for this CPU (or for the
// level DTNN_MAX_CPU_ISA caps it at).
#pragma once

#include <string>

namespace dtnn::runtime {

struct BlisSetup {
  std::string version;  // BLIS version string
  std::string arch;     // sub-configuration in use, e.g. "skx", "zen3", "generic"
  std::string reason;   // why this one (core/blis_arch.hpp): the user's BLIS_ARCH_TYPE, AVX-512, DTNN_MAX_CPU_ISA
                        // or BLIS's own detection
};

// Idempotent and thread-safe. Must run before any other BLIS call in the process: BLIS reads
// BLIS_ARCH_TYPE once, at its first use.
const BlisSetup& configure_blis();

}  // namespace dtnn::runtime
