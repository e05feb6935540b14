// SPDX-License-Identifier: Apache-2.0
// The interfaces through which the batch-loading tasks read images and token streams that stay on disk. io implements
// them (HDF5 files larger than memory); the tasks only call them, so they need nothing of io.
#pragma once

#include <cstdint>
#include <span>

namespace dtnn {

// Images that stay on disk, read on demand by the batch-loading tasks. Implementations are thread-safe: the
// tasks of several tiles read at the same time.
class SampleReader {
 public:
  virtual ~SampleReader() = default;
  // The samples at these dataset indices, as NCHW floats in [0,1], into out (indices.size() samples).
  virtual void read(std::span<const std::int64_t> indices, float* out) = 0;
};

// A stream of token ids that stays on disk, read window by window by the batch-loading tasks. Implementations are
// thread-safe, like SampleReader's.
class TokenReader {
 public:
  virtual ~TokenReader() = default;
  // Tokens [first, first + count) of the stream into out; a failure (damage, an id outside the vocabulary) throws.
  virtual void read(std::int64_t first, std::int64_t count, std::int32_t* out) = 0;
};

}  // namespace dtnn
