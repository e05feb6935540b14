// SPDX-License-Identifier: Apache-2.0
#include "runtime/failure.hpp"

#include <starpu.h>

#include <mutex>
#include <string>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dtnn::runtime {
namespace {

std::mutex g_mutex;
std::string g_first;
int g_count = 0;

}  // namespace

void record_task_failure(std::string_view what) noexcept {
  try {
    const starpu_task* task = starpu_task_get_current();
    const char* name = (task != nullptr && task->name != nullptr) ? task->name : "task";
    std::lock_guard lock(g_mutex);
    if (g_count++ == 0) {
      g_first = fmt::format("{}: {}", name, what);
    }
  } catch (...) {
    // Out of memory while formatting: nothing more can be recorded, the count above still is.
  }
}

void rethrow_task_failures() {
  std::string message;
  {
    std::lock_guard lock(g_mutex);
    if (g_count == 0) {
      return;
    }
    message = g_count == 1 ? g_first : fmt::format("{} (and {} more failed tasks)", g_first, g_count - 1);
    g_first.clear();
    g_count = 0;
  }
  throw RuntimeError(message);
}

}  // namespace dtnn::runtime
