// SPDX-License-Identifier: Apache-2.0
// Plane sums in double on the GPU, in exactly the order of the CPU's detail::sum_plane_of
// (codelets/cpu/plane_sums.hpp): a task then writes the same bits on a CPU and on a CUDA worker, so the scheduler's
// choice of worker never changes a result. Shared by the BatchNorm and global pooling kernels (internal).
//
// The CPU order: eight lanes, lane l adding terms l, l + 8, l + 16, ... of the whole blocks of eight; then a total
// that starts at 0.0, adds the tail terms in order, then lanes 0 to 7. Each lane is a dependent chain of additions,
// so the GPU gives each lane its own thread: a group of eight consecutive threads per plane.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace dtnn::kernels::cuda::detail {

inline constexpr unsigned kSumLanes = 8;
inline constexpr unsigned kWarp = 32;
inline constexpr unsigned kGroupsPerWarp = kWarp / kSumLanes;

// N sums over one plane by the group of kSumLanes threads that this thread belongs to: term(i, t) writes the N
// terms of element i into t. The result is valid in the group's first thread (threadIdx.x % kSumLanes == 0) of an
// active group. Every thread of the warp must call it together (shuffles): groups without a plane pass
// active = false.
template <int N, class Term>
__device__ void group_plane_sums(std::size_t len, bool active, const Term& term, double (&total)[N]) {
  const unsigned l = threadIdx.x % kSumLanes;
  const std::size_t whole = active ? len / kSumLanes * kSumLanes : 0;
  double lane[N];
  double t[N];
  for (int k = 0; k < N; ++k) lane[k] = 0.0;
#pragma unroll 4
  for (std::size_t i = l; i < whole; i += kSumLanes) {
    term(i, t);
    for (int k = 0; k < N; ++k) lane[k] = __dadd_rn(lane[k], t[k]);
  }
  for (int k = 0; k < N; ++k) total[k] = 0.0;
  if (active && l == 0) {
    for (std::size_t i = whole; i < len; ++i) {
      term(i, t);
      for (int k = 0; k < N; ++k) total[k] = __dadd_rn(total[k], t[k]);
    }
  }
  for (unsigned s = 0; s < kSumLanes; ++s) {
    for (int k = 0; k < N; ++k) {
      total[k] = __dadd_rn(total[k], __shfl_sync(0xffffffffu, lane[k], static_cast<int>(s), kSumLanes));
    }
  }
}

// Runs body(g, active) for the plane indices g in [0, planes), one group of kSumLanes threads per plane, in a
// grid-stride loop that every thread of a warp iterates alike (the shuffles need the whole warp). blockDim.x must be
// a multiple of the warp size.
template <class Body>
__device__ void for_each_group(std::size_t planes, const Body& body) {
  const std::size_t thread = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * blockDim.x / kWarp;
  const std::size_t in_warp = (threadIdx.x % kWarp) / kSumLanes;
  for (std::size_t first = thread / kWarp * kGroupsPerWarp; first < planes; first += warps * kGroupsPerWarp) {
    const std::size_t g = first + in_warp;
    body(g, g < planes);
  }
}

// Threads to launch for `planes` groups.
inline std::size_t group_threads(std::size_t planes) { return planes * kSumLanes; }

}  // namespace dtnn::kernels::cuda::detail
