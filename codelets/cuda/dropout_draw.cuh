// SPDX-License-Identifier: Apache-2.0
// Dropout's draw on the GPU (internal to the CUDA kernels): codelets/cpu/dropout.cpp's splitmix64 stream, line for
// line, so that a CUDA task drops exactly the elements its CPU version drops. Any change there must be made here too
// (the CPU-vs-CUDA tests compare the masks bit for bit). Shared by the Dropout layer's kernels and the attention's;
// host code too may call it (a launch computes a row's key once).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/params.hpp"

namespace dtnn::kernels::cuda::detail {

inline constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ull;

// splitmix64's output function.
__host__ __device__ inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__host__ __device__ inline std::uint64_t splitmix64(std::uint64_t x) { return mix64(x + kGolden); }

// One stream per (seed, step, row).
__host__ __device__ inline std::uint64_t row_key(std::uint64_t seed, std::int64_t step, std::int64_t row) {
  return splitmix64(splitmix64(splitmix64(seed) ^ static_cast<std::uint64_t>(step)) ^ static_cast<std::uint64_t>(row));
}

// The stream's output number j + 1, whose high half decides element 2j and low half element 2j + 1.
__host__ __device__ inline std::uint64_t draw_pair(std::uint64_t key, std::uint64_t j) {
  return mix64(key + (j + 1) * kGolden);
}

// kernels::cpu::dropout_draw: element e of the row whose stream is `key`.
__host__ __device__ inline std::uint32_t draw(std::uint64_t key, std::uint64_t e) {
  const std::uint64_t h = draw_pair(key, e / 2);
  return static_cast<std::uint32_t>(e % 2 == 0 ? h >> 32 : h);
}

// The mask value of a draw: the scale when kept, +0 when dropped (the CPU selects the scale's bits through a mask
// of zeros).
__host__ __device__ inline float mask_of(std::uint32_t d, const DropoutParams& p) {
  return static_cast<std::uint64_t>(d) >= p.threshold ? p.scale : 0.0f;
}

}  // namespace dtnn::kernels::cuda::detail
