// SPDX-License-Identifier: Apache-2.0
#include "runtime/host_memory.hpp"

#include <starpu.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dtnn::runtime {
namespace {

constexpr std::size_t kAlignment = 64;  // full cache lines, AVX-512 loads
// A kept buffer serves a request down to 4/5 of its size: the activation tiles of these networks come in sizes a
// power of two apart, and a buffer of one size serving the next one down would leave its own size to new buffers
// (measured on resnet18, down to half: the pool held 78 MiB more than the tiles alive at its peak; down to 4/5: 74).
constexpr std::size_t kFitNumerator = 5;
constexpr std::size_t kFitDenominator = 4;

struct Buffer {
  std::size_t capacity = 0;
  int pinned = 0;
};

// Host buffers of StarPU's data (the hooks below). One lock: allocations are a few per tile and step.
class HostHeap {
 public:
  void start(HostAllocator a) {
    std::lock_guard lock(mutex_);
    allocator_ = a;
    stats_ = {};
  }

  int allocate(void** out, std::size_t size, int pin) {
    const std::size_t capacity = (std::max<std::size_t>(size, 1) + kAlignment - 1) / kAlignment * kAlignment;
    {
      std::lock_guard lock(mutex_);
      ++stats_.allocations;
      if (allocator_ == HostAllocator::kPool) {
        // Best fit: the smallest kept buffer that holds the request, unless it is more than twice as large.
        auto& kept = kept_[pin];
        auto it = kept.lower_bound(capacity);
        if (it != kept.end() && it->first * kFitDenominator <= kFitNumerator * capacity) {
          void* p = it->second;
          used_.emplace(p, Buffer{it->first, pin});
          kept.erase(it);
          ++stats_.reused;
          stats_.in_use += used_[p].capacity;
          note_peaks();
          *out = p;
          return 0;
        }
      }
    }
    void* p = std::aligned_alloc(kAlignment, capacity);
    if (p == nullptr) return -ENOMEM;
    int pinned = 0;
    if (pin && starpu_memory_pin(p, capacity) == 0) pinned = 1;
    std::lock_guard lock(mutex_);
    used_.emplace(p, Buffer{capacity, pinned ? pin : 0});
    stats_.in_use += capacity;
    stats_.reserved += capacity;
    note_peaks();
    *out = p;
    return 0;
  }

  void release(void* p) {
    std::unique_lock lock(mutex_);
    auto it = used_.find(p);
    if (it == used_.end()) {
      // Not ours (allocated before the hooks were installed).
      lock.unlock();
      std::free(p);
      return;
    }
    const Buffer b = it->second;
    used_.erase(it);
    stats_.in_use -= b.capacity;
    if (allocator_ == HostAllocator::kPool) {
      kept_[b.pinned].emplace(b.capacity, p);
      return;
    }
    stats_.reserved -= b.capacity;
    lock.unlock();
    free_buffer(p, b);
  }

  // After starpu_shutdown: every buffer goes back to the system.
  void drain() {
    std::lock_guard lock(mutex_);
    for (auto& [p, b] : used_) free_buffer(p, b);
    used_.clear();
    for (int pin = 0; pin < 2; ++pin) {
      for (auto& [capacity, p] : kept_[pin]) free_buffer(p, Buffer{capacity, pin});
      kept_[pin].clear();
    }
    stats_.in_use = 0;
    stats_.reserved = 0;
  }

  HostMemoryStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }

  void reset_peaks() {
    std::lock_guard lock(mutex_);
    stats_.peak_in_use = stats_.in_use;
    stats_.peak_reserved = stats_.reserved;
  }

 private:
  void note_peaks() {
    stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  }
  static void free_buffer(void* p, const Buffer& b) {
    if (b.pinned) starpu_memory_unpin(p, b.capacity);
    std::free(p);
  }

  std::mutex mutex_;
  HostAllocator allocator_ = kDefaultHostAllocator;
  HostMemoryStats stats_;
  std::unordered_map<void*, Buffer> used_;
  std::multimap<std::size_t, void*> kept_[2];  // by capacity; [1]: page-locked
};

HostHeap& heap() {
  static HostHeap h;
  return h;
}

int malloc_hook(unsigned /*node*/, void** out, std::size_t size, int flags) {
  // Page-locked only when CUDA workers will copy the buffer (as StarPU's own allocator decides).
  const int pin = (flags & STARPU_MALLOC_PINNED) != 0 && starpu_cuda_worker_get_count() > 0;
  return heap().allocate(out, size, pin);
}

int free_hook(unsigned /*node*/, void* p, std::size_t /*size*/, int /*flags*/) {
  heap().release(p);
  return 0;
}

// What STARPU_LIMIT_CPU_MEM held before install_host_allocator(kStarpu) set it; restored on release.
struct SavedLimit {
  int saved = 0;
  int had_value = 0;
  std::string value;
};
SavedLimit g_limit;

}  // namespace

const char* to_string(HostAllocator a) {
  switch (a) {
    case HostAllocator::kPool:
      return "pool";
    case HostAllocator::kSystem:
      return "system";
    case HostAllocator::kStarpu:
      return "starpu";
  }
  return "?";
}

HostAllocator parse_host_allocator(const std::string& name, const char* option) {
  for (HostAllocator a : {HostAllocator::kPool, HostAllocator::kSystem, HostAllocator::kStarpu}) {
    if (name == to_string(a)) return a;
  }
  throw InvalidArgument(fmt::format("{}: '{}', expected pool, system or starpu", option, name));
}

HostMemoryStats host_memory_stats() { return heap().stats(); }

void reset_host_memory_peaks() { heap().reset_peaks(); }

void install_host_allocator(HostAllocator a) {
  heap().start(a);
  if (a == HostAllocator::kStarpu) {
    starpu_malloc_set_hooks(nullptr, nullptr);
    // StarPU caches released buffers for reuse only under a memory limit (otherwise it frees them at once): the
    // machine's memory, so that the limit itself never evicts anything.
    if (const char* old = std::getenv("STARPU_LIMIT_CPU_MEM")) {
      g_limit = {1, 1, old};
      return;
    }
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGE_SIZE);
    const long long mib = pages > 0 && page > 0 ? static_cast<long long>(pages) * page / (1 << 20) : 1 << 20;
    g_limit = {1, 0, {}};
    setenv("STARPU_LIMIT_CPU_MEM", std::to_string(mib).c_str(), 1);
    return;
  }
  starpu_malloc_set_hooks(malloc_hook, free_hook);
}

void release_host_allocator() {
  starpu_malloc_set_hooks(nullptr, nullptr);
  heap().drain();
  if (g_limit.saved) {
    if (g_limit.had_value) {
      setenv("STARPU_LIMIT_CPU_MEM", g_limit.value.c_str(), 1);
    } else {
      unsetenv("STARPU_LIMIT_CPU_MEM");
    }
    g_limit = {};
  }
}

}  // namespace dtnn::runtime
