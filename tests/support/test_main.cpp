// SPDX-License-Identifier: Apache-2.0
// Test binaries that use the runtime share one StarPU engine per process (StarPU is initialised once).
// Cases that need another scheduler or worker count run the dtnn program as a child process.
// The CPU suite runs on CPU workers only, GPU or not; the CUDA tests (tests/cuda, built with
// DTNN_TEST_CUDA_WORKERS) also start a worker per GPU and skip where there is none.
#include <gtest/gtest.h>

#include "runtime/engine.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto options = dtnn::runtime::EngineOptions().workers(2).profiling(true);
#ifdef DTNN_TEST_CUDA_WORKERS
  if (dtnn::runtime::built_with_cuda()) {
    options.cuda(-1);
  }
#endif
  dtnn::runtime::Engine engine(options);
  return RUN_ALL_TESTS();
}
