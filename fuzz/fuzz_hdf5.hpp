// SPDX-License-Identifier: Apache-2.0
// What the HDF5 harnesses share.
//
// The check that a reader closed every HDF5 object it opened (io/hdf5.hpp's handles are RAII owners): an identifier
// left open is a leak of ours that LeakSanitizer cannot see (HDF5's tables still reach it, and HDF5 frees it at
// exit).
//
// The one leak of HDF5's own that is suppressed: memory of its metadata cache (allocated under H5C_protect) that
// HDF5 1.10 (Debian 12's 1.10.8) loses when an object header of a damaged file fails to load, e.g. the 424-byte
// object header of a header whose checksum is wrong (HDF5's H5O__prefix_deserialize, fixed upstream in 1.14.5 by
// HDFGroup/hdf5 pull request 4445; the continuation messages of a damaged header leak the same way, issues 2599 and
// 6386). No identifier reaches our code for such an object, so no call of ours can free it or avoid it: the file
// only shows it is damaged by failing to load. Leaks of anything HDF5 hands to us (strings it read, identifiers) have
// other allocation stacks, and stay reported.
#pragma once

#include <hdf5.h>

#include <sys/types.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "fuzz/fuzz_input.hpp"

//
// HDF5 1.10 also sizes some allocations from a damaged file's headers before checking them against the file (an
// object header's length, read before its checksum is: 0xffffff0000000050 bytes from a 6 KB file in H5Fopen). Where
// malloc cannot give that much it returns NULL, which HDF5 reports as an error (allocator_may_return_null=1 lets
// AddressSanitizer's malloc do the same), and a size malloc can give is only address space until HDF5 reads the file
// into it, which it cannot fill. So libFuzzer's limit on one allocation does not apply to these harnesses
// (scripts/fuzz.sh) and the same limit is kept on our own allocations instead: C++ is ours (operator new below),
// C's malloc is HDF5's; the limit on resident memory applies to both.
extern "C" const char* __lsan_default_suppressions() { return "leak:H5C_protect\n"; }
// libhdf5 has no frame pointers: the whole allocation stack, the suppression's frame included, needs the slow
// unwinder.
extern "C" const char* __asan_default_options() { return "fast_unwind_on_malloc=0:allocator_may_return_null=1"; }

// libFuzzer's -malloc_limit_mb for what scripts/fuzz.sh gives the other harnesses.
inline constexpr std::size_t kMaxOwnAllocation = std::size_t{128} << 20;

// Every form but the aligned ones (which we never use), so that AddressSanitizer sees malloc and free throughout.
void* operator new(std::size_t size) {
  if (size > kMaxOwnAllocation) {
    std::fprintf(stderr, "dtnn fuzz: operator new(%zu), over the %zu bytes one allocation of ours may take\n", size,
                 kMaxOwnAllocation);
    std::abort();
  }
  for (;;) {
    if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}
void* operator new[](std::size_t size) { return ::operator new(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(size);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept { return ::operator new(size, tag); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace dtnn::fuzz {

// The file objects open now (files, groups, datasets, attributes, named datatypes): H5Inmembers refuses HDF5's own
// identifier types, so dataspaces and property lists cannot be counted.
inline ssize_t hdf5_ids() { return H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL); }

inline void require_hdf5_closed() { require(hdf5_ids() == 0, "HDF5: every file object the reader opened closed again"); }

}  // namespace dtnn::fuzz
