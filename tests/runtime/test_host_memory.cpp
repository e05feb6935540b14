// SPDX-License-Identifier: Apache-2.0
// Transient tensors (Storage::kTransient) and the host allocator that serves their tiles (runtime/host_memory.hpp).
// The suite's engine runs the default allocator, the pool; the others are run by the program (tests/examples).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/errors.hpp"
#include "runtime/engine.hpp"
#include "runtime/host_memory.hpp"
#include "runtime/tensor.hpp"

namespace dtnn {
namespace {

constexpr std::size_t kTileBytes = 4 * 1000 * sizeof(float);

TEST(HostMemoryTest, TransientTensorHoldsMemoryFromItsFirstWriteToItsDiscard) {
  ASSERT_EQ(runtime::Engine::current()->host_allocator(), runtime::HostAllocator::kPool);
  const runtime::HostMemoryStats before = runtime::host_memory_stats();
  Tensor t({4, 1000}, 1, Storage::kTransient);
  EXPECT_EQ(t.storage(), Storage::kTransient);
  EXPECT_EQ(runtime::host_memory_stats().in_use, before.in_use);  // nothing until a write
  t.fill(1.5f);
  EXPECT_EQ(runtime::host_memory_stats().in_use, before.in_use + kTileBytes);
  EXPECT_EQ(t.to_vector(), std::vector<float>(4000, 1.5f));
  t.discard();
  runtime::Engine::current()->wait_all();
  EXPECT_EQ(runtime::host_memory_stats().in_use, before.in_use);
  // Written again after the discard: memory again, the new values.
  t.fill(2.0f);
  EXPECT_EQ(t.to_vector(), std::vector<float>(4000, 2.0f));
  t.discard();
  runtime::Engine::current()->wait_all();
  EXPECT_EQ(runtime::host_memory_stats().in_use, before.in_use);
}

TEST(HostMemoryTest, PoolReusesAReleasedBufferForAnEqualOrSlightlySmallerTile) {
  Tensor a({4, 1000}, 1, Storage::kTransient);
  a.fill(1.0f);
  a.discard();
  runtime::Engine::current()->wait_all();
  const runtime::HostMemoryStats kept = runtime::host_memory_stats();
  // Equal, then smaller (9/10 of it): both served by the kept buffer, no new memory.
  Tensor b({4, 1000}, 1, Storage::kTransient);
  b.fill(2.0f);
  EXPECT_EQ(runtime::host_memory_stats().reused, kept.reused + 1);
  EXPECT_EQ(runtime::host_memory_stats().reserved, kept.reserved);
  b.discard();
  runtime::Engine::current()->wait_all();
  Tensor c({4, 900}, 1, Storage::kTransient);
  c.fill(3.0f);
  EXPECT_EQ(runtime::host_memory_stats().reused, kept.reused + 2);
  EXPECT_EQ(runtime::host_memory_stats().reserved, kept.reserved);
  EXPECT_EQ(c.to_vector(), std::vector<float>(3600, 3.0f));
  // Twice the size, and half of it: buffers of their own (and the peak counts them all).
  Tensor d({8, 1000}, 1, Storage::kTransient);
  d.fill(4.0f);
  Tensor e({2, 1000}, 1, Storage::kTransient);
  e.fill(5.0f);
  EXPECT_EQ(runtime::host_memory_stats().reused, kept.reused + 2);
  EXPECT_GE(runtime::host_memory_stats().peak_in_use, 9 * kTileBytes / 10 + 2 * kTileBytes + kTileBytes / 2);
}

TEST(HostMemoryTest, OwnedTensorIgnoresDiscard) {
  Tensor t({2, 3});
  t.fill(7.0f);
  t.discard();
  EXPECT_EQ(t.storage(), Storage::kOwned);
  EXPECT_EQ(t.to_vector(), std::vector<float>(6, 7.0f));
}

TEST(HostMemoryTest, RejectsHostAccessToATiledTransientTensorAndUnknownAllocators) {
  Tensor t({4, 5}, 2, Storage::kTransient);
  try {
    t.fill(1.0f);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("transient tensor of 2 tiles, expected 1 tile"), std::string::npos) << e.what();
  }
  EXPECT_EQ(runtime::parse_host_allocator("system", "--host-allocator"), runtime::HostAllocator::kSystem);
  try {
    (void)runtime::parse_host_allocator("jemalloc", "--host-allocator");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--host-allocator: 'jemalloc', expected pool, system or starpu"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dtnn
