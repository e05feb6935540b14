// SPDX-License-Identifier: Apache-2.0
// Failures on StarPU worker threads: recorded there (code on workers never throws), re-raised on the
// submitting thread at the next synchronisation point.
#pragma once

#include <string_view>

namespace dtnn::runtime {

// Records a failure of the task running on this thread. Thread-safe, never throws.
void record_task_failure(std::string_view what) noexcept;

// Throws dtnn::RuntimeError naming the first recorded failure (and how many followed) and clears the record.
void rethrow_task_failures();

// Wraps a codelet body so that an exception becomes a recorded failure.
template <void (*Body)(void** buffers, void* cl_arg)>
void guarded(void** buffers, void* cl_arg) noexcept {
  try {
    Body(buffers, cl_arg);
  } catch (const std::exception& e) {
    record_task_failure(e.what());
  } catch (...) {
    record_task_failure("unknown exception");
  }
}

}  // namespace dtnn::runtime
