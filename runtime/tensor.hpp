// SPDX-License-Identifier: Apache-2.0
// Tensor: move-only owner of an NCHW fp32 buffer and of the StarPU handles that cover it.
// A tensor is split along its first dimension into batch tiles, one StarPU handle per tile, so that
// a layer submits one task per tile. Parameters and other unbatched tensors have a single tile.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

// StarPU's handle type, declared as starpu_data.h declares it: a program that builds and trains models through the
// public headers compiles without StarPU's headers, and code that submits tasks includes starpu.h as well.
struct _starpu_data_state;
typedef struct _starpu_data_state* starpu_data_handle_t;

namespace dtnn {

using Shape = std::vector<std::int64_t>;

std::int64_t numel(const Shape& shape);
std::string to_string(const Shape& shape);  // "(64, 1, 28, 28)"

// Rows [begin, begin + count) of the first dimension.
struct TileRange {
  std::int64_t begin = 0;
  std::int64_t count = 0;
};

// Splits n rows into min(tiles, n) ranges whose sizes differ by at most one (larger ones first).
std::vector<TileRange> split_rows(std::int64_t n, int tiles);

// Where a tensor's memory comes from.
enum class Storage {
  // One buffer owned by the tensor for its whole life, zero-filled.
  kOwned,
  // Each tile's buffer is allocated by StarPU when a task first writes the tile and released by discard(): the
  // activations and gradients of a step, live from their first write to their last read. Not zero-filled; the
  // first task after creation or discard() must write the whole tile (STARPU_W).
  kTransient,
};

class Tensor {
 public:
  Tensor() = default;
  // tiles > 1 splits the first dimension (see split_rows).
  explicit Tensor(Shape shape, int tiles = 1, Storage storage = Storage::kOwned);
  ~Tensor();
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  [[nodiscard]] bool defined() const { return !handles_.empty(); }
  [[nodiscard]] Storage storage() const {
    return data_ == nullptr && !handles_.empty() ? Storage::kTransient : Storage::kOwned;
  }
  [[nodiscard]] const Shape& shape() const { return shape_; }
  [[nodiscard]] std::int64_t numel() const { return numel_; }
  [[nodiscard]] std::int64_t row_elements() const;  // elements per index of the first dimension
  [[nodiscard]] int tiles() const { return static_cast<int>(handles_.size()); }
  [[nodiscard]] TileRange tile_range(int t) const { return ranges_.at(t); }
  [[nodiscard]] starpu_data_handle_t tile(int t) const { return handles_.at(t); }
  // The single handle of an untiled tensor.
  [[nodiscard]] starpu_data_handle_t handle() const;

  // Transient tensors: submits the release of every tile's buffer after the tasks submitted so far on it (StarPU's
  // starpu_data_invalidate_submit): the memory returns to the allocator once they have run, and the values are
  // gone. Owned tensors: nothing (their buffer lives as long as they do). const like a task that overwrites the
  // values: the tensor, its shape and handles do not change.
  void discard() const;

  // What host code does with the values: STARPU_R, STARPU_W and STARPU_RW.
  enum class HostMode { kRead, kWrite, kReadWrite };

  // Scoped host access: acquires every tile in the given mode (waiting for the tasks that use them),
  // releases them on destruction. A transient tensor must have a single tile (its tiles are separate buffers).
  class HostAccess {
   public:
    HostAccess(const Tensor& t, HostMode mode);
    ~HostAccess();
    HostAccess(const HostAccess&) = delete;
    HostAccess& operator=(const HostAccess&) = delete;
    [[nodiscard]] std::span<float> data() const { return {ptr_, static_cast<std::size_t>(count_)}; }
    float& operator[](std::int64_t i) const { return ptr_[i]; }

   private:
    const Tensor* tensor_;
    float* ptr_;
    std::int64_t count_;
  };
  [[nodiscard]] HostAccess read() const { return HostAccess(*this, HostMode::kRead); }
  [[nodiscard]] HostAccess write() { return HostAccess(*this, HostMode::kWrite); }
  [[nodiscard]] HostAccess read_write() { return HostAccess(*this, HostMode::kReadWrite); }

  // Host-side conveniences (each waits for pending tasks on the tensor).
  [[nodiscard]] std::vector<float> to_vector() const;
  void copy_from(std::span<const float> values);
  void fill(float value);

 private:
  void release() noexcept;

  Shape shape_;
  std::int64_t numel_ = 0;
  float* data_ = nullptr;
  std::size_t pinned_bytes_ = 0;  // > 0: the buffer is page-locked for asynchronous GPU transfers
  std::vector<TileRange> ranges_;
  std::vector<starpu_data_handle_t> handles_;
};

}  // namespace dtnn
