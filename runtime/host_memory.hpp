// SPDX-License-Identifier: Apache-2.0
// Host memory that StarPU allocates: the tiles of transient tensors (Storage::kTransient), allocated where a task
// first writes them and released by Tensor::discard(). Which allocator serves them is a choice of the Engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dtnn::runtime {

enum class HostAllocator {
  // A best-fit pool: a released buffer is kept and serves later requests of its size or a little smaller, without
  // going back to malloc (no page faults, no zeroing by the kernel). Never shrinks while the engine runs.
  kPool,
  // Every buffer from aligned_alloc, every release to free (glibc keeps or unmaps it as it sees fit).
  kSystem,
  // StarPU's own allocation cache (STARPU_LIMIT_CPU_MEM set to the machine's memory): a released buffer serves the
  // next allocation of exactly the same size. Not counted (host_memory_stats() stays 0).
  kStarpu,
};

inline constexpr HostAllocator kDefaultHostAllocator = HostAllocator::kPool;

// "pool", "system", "starpu".
[[nodiscard]] const char* to_string(HostAllocator a);
// Throws InvalidArgument naming `option` and the accepted names.
[[nodiscard]] HostAllocator parse_host_allocator(const std::string& name, const char* option);

// Bytes of StarPU's host buffers, counted by kPool and kSystem.
struct HostMemoryStats {
  std::size_t in_use = 0;         // held by live tiles now
  std::size_t peak_in_use = 0;    // the most held at once since the last reset
  std::size_t reserved = 0;       // in_use + released buffers the pool keeps (kSystem: in_use)
  std::size_t peak_reserved = 0;  // the most reserved at once since the last reset
  std::int64_t allocations = 0;   // requests
  std::int64_t reused = 0;        // requests served by a buffer the pool kept
};

[[nodiscard]] HostMemoryStats host_memory_stats();
// The peaks restart from the current values.
void reset_host_memory_peaks();

// Engine only: installs the allocator before starpu_init, and frees the pool after starpu_shutdown.
void install_host_allocator(HostAllocator a);
void release_host_allocator();

}  // namespace dtnn::runtime
