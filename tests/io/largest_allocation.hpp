// SPDX-License-Identifier: Apache-2.0
// The largest single request to operator new since the last reset (tests/io/largest_allocation.cpp replaces it in
// test_io): a reader given a file whose header announces far more data than the file holds must allocate no more
// than the file could fill, which a DataError alone does not show.
#pragma once

#include <cstddef>

namespace dtnn::io::test_util {

void reset_largest_allocation();
std::size_t largest_allocation();

}  // namespace dtnn::io::test_util
