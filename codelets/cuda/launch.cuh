// SPDX-License-Identifier: Apache-2.0
// Launch geometry shared by the element-wise CUDA kernels: grid-stride loops over a 1-D range.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

namespace dtnn::kernels::cuda {

inline constexpr int kThreads = 256;
// The most blocks a launch asks for: enough to fill the GPU several times over; grid-stride loops cover the rest.
inline constexpr unsigned kMaxBlocks = 65535;

inline unsigned blocks_for(std::size_t count) {
  const std::size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<std::size_t>(blocks, 1, kMaxBlocks));
}

#define DTNN_GRID_STRIDE(i, count)                                                                  \
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (count); \
       i += static_cast<std::size_t>(blockDim.x) * gridDim.x)

}  // namespace dtnn::kernels::cuda
