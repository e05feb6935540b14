// SPDX-License-Identifier: Apache-2.0
// Test binaries that use the runtime share one StarPU engine per process (StarPU is initialised once).
// Cases that need another scheduler or worker count run the dtnn program as a child process.
#include <gtest/gtest.h>

#include "runtime/engine.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dtnn::runtime::Engine engine(dtnn::runtime::EngineOptions().workers(2).profiling(1));
  return RUN_ALL_TESTS();
}
