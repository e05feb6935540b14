// SPDX-License-Identifier: Apache-2.0
// batch_norm_impl.hpp's passes compiled for AVX2 (CMake sets this file's flags).
#include "codelets/cpu/batch_norm.hpp"
#include "codelets/cpu/batch_norm_impl.hpp"

namespace dtnn::kernels::cpu {

const BatchNormPasses& batch_norm_passes_avx2() { return kBatchNormRows; }

}  // namespace dtnn::kernels::cpu
