// SPDX-License-Identifier: Apache-2.0
// CUDA kernels of the option-A residual shortcut (subsampling by a stride, zero channels on both sides): launchers
// that enqueue on a stream and return (no StarPU here); same names and contracts as the CPU kernels
// (codelets/cpu/shortcut_pad.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include "core/shapes.hpp"

namespace dtnn::kernels::cuda {

void shortcut_pad_fwd(const ShortcutPadShape& sh, const float* x, float* y, cudaStream_t stream);
void shortcut_pad_bwd_data(const ShortcutPadShape& sh, const float* dy, float* dx, cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
