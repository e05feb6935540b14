// SPDX-License-Identifier: Apache-2.0
// Tensor: move-only owner of a buffer of one element type (core/dtype.hpp: fp32 values, int32 token ids) and of the
// StarPU handles that cover it. A tensor is split along its first dimension into batch tiles, one StarPU handle per
// tile, so that a layer submits one task per tile. Parameters and other unbatched tensors have a single tile.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.hpp"

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

// How a tensor is tiled, stored and typed: Tensor(shape, TensorOptions().dtype(DType::kInt32).tiles(2)).
struct TensorOptions {
  // tiles > 1 splits the first dimension (see split_rows).
  TensorOptions& tiles(int n) { tiles_ = n; return *this; }
  TensorOptions& storage(Storage s) { storage_ = s; return *this; }
  TensorOptions& dtype(DType t) { dtype_ = t; return *this; }

  int tiles_ = 1;
  Storage storage_ = Storage::kOwned;
  DType dtype_ = DType::kFloat32;
};

class Tensor {
 public:
  Tensor() = default;
  // An fp32 tensor; tiles > 1 splits the first dimension (see split_rows).
  explicit Tensor(Shape shape, int tiles = 1, Storage storage = Storage::kOwned);
  Tensor(Shape shape, const TensorOptions& options);
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
  [[nodiscard]] DType dtype() const { return dtype_; }
  [[nodiscard]] std::int64_t numel() const { return numel_; }
  [[nodiscard]] std::int64_t bytes() const { return numel_ * static_cast<std::int64_t>(dtype_size(dtype_)); }
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
  // data() and operator[] are the fp32 view; values<T>() the view of any element type, checked against dtype().
  class HostAccess {
   public:
    HostAccess(const Tensor& t, HostMode mode);
    ~HostAccess();
    HostAccess(const HostAccess&) = delete;
    HostAccess& operator=(const HostAccess&) = delete;
    [[nodiscard]] std::span<float> data() const { return values<float>(); }
    float& operator[](std::int64_t i) const { return data_as<float>()[i]; }
    template <class T>
    [[nodiscard]] std::span<T> values() const {
      return {data_as<T>(), static_cast<std::size_t>(count_)};
    }

   private:
    // Inline and cheap: operator[] runs it for every element a host loop touches.
    template <class T>
    T* data_as() const {
      if (dtype_of<T> != dtype_) [[unlikely]] {
        wrong_dtype(dtype_of<T>);
      }
      return static_cast<T*>(ptr_);
    }
    [[noreturn]] void wrong_dtype(DType asked) const;

    const Tensor* tensor_;
    void* ptr_;
    std::int64_t count_;
    DType dtype_;
  };
  [[nodiscard]] HostAccess read() const { return HostAccess(*this, HostMode::kRead); }
  [[nodiscard]] HostAccess write() { return HostAccess(*this, HostMode::kWrite); }
  [[nodiscard]] HostAccess read_write() { return HostAccess(*this, HostMode::kReadWrite); }

  // Host-side conveniences (each waits for pending tasks on the tensor); the fp32 ones need an fp32 tensor, the
  // templates a tensor of T's dtype.
  [[nodiscard]] std::vector<float> to_vector() const { return values_as<float>(); }
  void copy_from(std::span<const float> values) { copy_from_values<float>(values); }
  void fill(float value);
  template <class T>
  [[nodiscard]] std::vector<T> values_as() const {
    auto access = read();
    const std::span<T> v = access.values<T>();
    return {v.begin(), v.end()};
  }
  template <class T>
  void copy_from_values(std::span<const T> values) {
    check_count(values.size(), "copy_from");
    auto access = write();
    std::copy(values.begin(), values.end(), access.values<T>().begin());
  }

 private:
  void release() noexcept;
  void check_count(std::size_t count, const char* what) const;

  Shape shape_;
  DType dtype_ = DType::kFloat32;
  std::int64_t numel_ = 0;
  void* data_ = nullptr;
  std::size_t pinned_bytes_ = 0;  // > 0: the buffer is page-locked for asynchronous GPU transfers
  std::vector<TileRange> ranges_;
  std::vector<starpu_data_handle_t> handles_;
};

}  // namespace dtnn
