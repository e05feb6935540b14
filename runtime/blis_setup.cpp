// SPDX-License-Identifier: Apache-2.0
#include "runtime/blis_setup.hpp"

#include <blis.h>

#include "core/blis_arch.hpp"

namespace dtnn::runtime {
namespace {

BlisSetup choose() {
  BlisSetup s;
  s.reason = configure_blis_arch().reason;
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
