// SPDX-License-Identifier: Apache-2.0
// Reductions over the 32 lanes of a warp for the kernels that give a row to a warp (attention, LayerNorm; internal).
// A butterfly of shuffles: at each level a lane adds its partner's value to its own, and since a + b == b + a in
// IEEE arithmetic every lane ends with the same bits, in an order fixed by the lane numbers only (no atomics), so the
// results repeat from run to run.
#pragma once

#include <cuda_runtime.h>

namespace dtnn::kernels::cuda::detail {

inline constexpr int kWarpLanes = 32;

__device__ inline double warp_sum(double v) {
  for (int offset = kWarpLanes / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The largest non-NaN value of the lanes' (-inf when there is none).
__device__ inline float warp_max(float v) {
  for (int offset = kWarpLanes / 2; offset > 0; offset >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = o > v ? o : v;
  }
  return v;
}

}  // namespace dtnn::kernels::cuda::detail
