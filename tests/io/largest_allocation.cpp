// SPDX-License-Identifier: Apache-2.0
// The replaceable global operator new of test_io: it records the largest request, then allocates as the default
// one does (libstdc++'s array and nothrow forms call this one).
#include "io/largest_allocation.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<std::size_t> largest{0};

}  // namespace

namespace dtnn::io::test_util {

void reset_largest_allocation() { largest.store(0); }
std::size_t largest_allocation() { return largest.load(); }

}  // namespace dtnn::io::test_util

void* operator new(std::size_t size) {
  std::size_t seen = largest.load(std::memory_order_relaxed);
  while (size > seen && !largest.compare_exchange_weak(seen, size, std::memory_order_relaxed)) {
  }
  for (;;) {
    if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
