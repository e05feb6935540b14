// SPDX-License-Identifier: Apache-2.0
#include "runtime/tensor.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <starpu.h>

#include "core/errors.hpp"

namespace dtnn {
namespace {

starpu_data_access_mode starpu_mode(Tensor::HostMode mode) {
  switch (mode) {
    case Tensor::HostMode::kWrite: return STARPU_W;
    case Tensor::HostMode::kReadWrite: return STARPU_RW;
    case Tensor::HostMode::kRead: break;
  }
  return STARPU_R;
}

}  // namespace

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    n *= d;
  }
  return n;
}

std::string to_string(const Shape& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  }
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::vector<TileRange> split_rows(std::int64_t n, int tiles) {
  if (n < 1 || tiles < 1) {
    throw InvalidArgument(fmt::format("split_rows: rows={} tiles={}, expected both >= 1", n, tiles));
  }
  const std::int64_t t = std::min<std::int64_t>(tiles, n);
  std::vector<TileRange> ranges;
  ranges.reserve(static_cast<std::size_t>(t));
  const std::int64_t base = n / t;
  const std::int64_t extra = n % t;
  std::int64_t begin = 0;
  for (std::int64_t i = 0; i < t; ++i) {
    const std::int64_t count = base + (i < extra ? 1 : 0);
    ranges.push_back({begin, count});
    begin += count;
  }
  return ranges;
}

Tensor::Tensor(Shape shape, int tiles, Storage storage)
    : Tensor(std::move(shape), TensorOptions().tiles(tiles).storage(storage)) {}

Tensor::Tensor(Shape shape, const TensorOptions& options) : shape_(std::move(shape)), dtype_(options.dtype_) {
  const int tiles = options.tiles_;
  const Storage storage = options.storage_;
  const std::size_t elem = dtype_size(dtype_);
  if (shape_.empty()) {
    throw InvalidArgument("Tensor: empty shape, expected at least one dimension");
  }
  for (std::int64_t d : shape_) {
    if (d < 1) {
      throw InvalidArgument(fmt::format("Tensor: shape {} has a dimension < 1, expected all >= 1", to_string(shape_)));
    }
  }
  numel_ = dtnn::numel(shape_);
  ranges_ = split_rows(shape_[0], tiles);
  const std::int64_t row = row_elements();
  handles_.reserve(ranges_.size());
  if (storage == Storage::kTransient) {
    // No home node (-1): StarPU allocates a tile where a task first writes it, and frees it on invalidation.
    for (const TileRange& r : ranges_) {
      starpu_data_handle_t h = nullptr;
      starpu_vector_data_register(&h, -1, 0, static_cast<uint32_t>(r.count * row), elem);
      handles_.push_back(h);
    }
    return;
  }
  // 64-byte alignment: full cache lines and AVX-512 loads for every tile that starts on a row boundary.
  const std::size_t bytes = (static_cast<std::size_t>(numel_) * elem + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, bytes);
  if (data_ == nullptr) {
    throw std::bad_alloc();
  }
  std::memset(data_, 0, bytes);
  // With GPUs, page-locked host memory lets StarPU copy tiles asynchronously (and overlap them with kernels).
  if (starpu_is_initialized() && starpu_cuda_worker_get_count() > 0 && starpu_memory_pin(data_, bytes) == 0) {
    pinned_bytes_ = bytes;
  }
  for (const TileRange& r : ranges_) {
    starpu_data_handle_t h = nullptr;
    starpu_vector_data_register(&h, STARPU_MAIN_RAM,
                                reinterpret_cast<uintptr_t>(static_cast<char*>(data_) + r.begin * row * elem),
                                static_cast<uint32_t>(r.count * row), elem);
    handles_.push_back(h);
  }
}

Tensor::~Tensor() { release(); }

Tensor::Tensor(Tensor&& other) noexcept
    : shape_(std::move(other.shape_)),
      dtype_(other.dtype_),
      numel_(std::exchange(other.numel_, 0)),
      data_(std::exchange(other.data_, nullptr)),
      pinned_bytes_(std::exchange(other.pinned_bytes_, 0)),
      ranges_(std::move(other.ranges_)),
      handles_(std::move(other.handles_)) {}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    release();
    shape_ = std::move(other.shape_);
    dtype_ = other.dtype_;
    numel_ = std::exchange(other.numel_, 0);
    data_ = std::exchange(other.data_, nullptr);
    pinned_bytes_ = std::exchange(other.pinned_bytes_, 0);
    ranges_ = std::move(other.ranges_);
    handles_ = std::move(other.handles_);
  }
  return *this;
}

void Tensor::release() noexcept {
  // Unregistering waits for the tasks still using each handle, so the buffer outlives them.
  for (starpu_data_handle_t h : handles_) {
    starpu_data_unregister(h);
  }
  handles_.clear();
  ranges_.clear();
  if (pinned_bytes_ > 0) {
    starpu_memory_unpin(data_, pinned_bytes_);
    pinned_bytes_ = 0;
  }
  std::free(data_);
  data_ = nullptr;
}

void Tensor::discard() const {
  // DTNN_KEEP_DEAD_TENSORS=1 keeps every transient tensor to the end of its life (the memory of the runs before
  // liveness release): the A/B of that release, for memory studies and for telling a kernel that depends on
  // its output's earlier content from one that does not.
  static const bool keep = [] {
    const char* v = std::getenv("DTNN_KEEP_DEAD_TENSORS");
    return v != nullptr && std::string_view(v) != "0" && std::string_view(v) != "";
  }();
  if (data_ != nullptr || keep) return;
  for (starpu_data_handle_t h : handles_) {
    starpu_data_invalidate_submit(h);
  }
}

std::int64_t Tensor::row_elements() const { return shape_.empty() ? 0 : numel_ / shape_[0]; }

starpu_data_handle_t Tensor::handle() const {
  if (handles_.size() != 1) {
    throw InvalidArgument(fmt::format("Tensor {}: handle() of a tensor split into {} tiles, expected 1 tile",
                                      to_string(shape_), handles_.size()));
  }
  return handles_[0];
}

Tensor::HostAccess::HostAccess(const Tensor& t, HostMode mode)
    : tensor_(&t), ptr_(t.data_), count_(t.numel_), dtype_(t.dtype_) {
  if (!t.defined()) {
    throw InvalidArgument("Tensor: host access to an undefined tensor");
  }
  if (t.data_ == nullptr && t.handles_.size() != 1) {
    throw InvalidArgument(fmt::format("Tensor {}: host access to a transient tensor of {} tiles, expected 1 tile",
                                      to_string(t.shape_), t.handles_.size()));
  }
  for (std::size_t i = 0; i < t.handles_.size(); ++i) {
    const int rc = starpu_data_acquire(t.handles_[i], starpu_mode(mode));
    if (rc != 0) {
      for (std::size_t j = 0; j < i; ++j) starpu_data_release(t.handles_[j]);
      throw RuntimeError(fmt::format("Tensor {}: starpu_data_acquire failed ({})", to_string(t.shape_), rc));
    }
  }
  if (t.data_ == nullptr) {
    ptr_ = starpu_data_get_local_ptr(t.handles_[0]);
  }
}

void Tensor::HostAccess::wrong_dtype(DType asked) const {
  throw InvalidArgument(fmt::format("Tensor {}: host access as {}, expected its element type {}",
                                    to_string(tensor_->shape_), to_string(asked), to_string(dtype_)));
}

Tensor::HostAccess::~HostAccess() {
  for (starpu_data_handle_t h : tensor_->handles_) {
    starpu_data_release(h);
  }
}

void Tensor::check_count(std::size_t count, const char* what) const {
  if (static_cast<std::int64_t>(count) != numel_) {
    throw InvalidArgument(fmt::format("Tensor {}: {} {} values, expected {}", to_string(shape_), what, count, numel_));
  }
}

void Tensor::fill(float value) {
  auto access = write();
  std::fill(access.data().begin(), access.data().end(), value);
}

}  // namespace dtnn
