// SPDX-License-Identifier: Apache-2.0
// The HDF5 harnesses' check that a reader let go of everything it opened (io/hdf5.hpp's handles are RAII owners):
// an identifier left open at the end of an input is a leak that LeakSanitizer cannot see (HDF5 frees it at exit).
#pragma once

#include <hdf5.h>

#include "fuzz/fuzz_input.hpp"

namespace dtnn::fuzz {

inline void require_hdf5_closed() {
  require(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) == 0, "HDF5: every file, group, dataset and attribute closed");
}

}  // namespace dtnn::fuzz
