// SPDX-License-Identifier: Apache-2.0
// Skips for what a machine may lack (PyTorch and h5py, Fashion-MNIST, a StarPU with FxT). `scripts/setup.sh test`,
// which CI runs, installs or builds all of them and sets DTNN_TEST_STRICT=1: then such a skip fails instead, so that a
// broken set-up cannot pass as a suite of skipped tests. Header only: the binaries that link no support library use
// it too.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string_view>

namespace dtnn::test_support {

inline bool strict_environment() {
  const char* strict = std::getenv("DTNN_TEST_STRICT");
  return strict != nullptr && std::string_view(strict) == "1";
}

}  // namespace dtnn::test_support

// Skips the test with `message` (anything that streams into a gtest message), or fails it under DTNN_TEST_STRICT=1.
// A macro because GTEST_SKIP and GTEST_FAIL return from the test's own body.
#define DTNN_SKIP_UNLESS_STRICT(message)                                                                  \
  do {                                                                                                    \
    if (::dtnn::test_support::strict_environment()) {                                                     \
      GTEST_FAIL() << "DTNN_TEST_STRICT=1 (CI's set-up provides this), but " << message;                  \
    }                                                                                                     \
    GTEST_SKIP() << message;                                                                              \
  } while (false)
