// SPDX-License-Identifier: Apache-2.0
// A thin RAII layer over the HDF5 C API, just wide enough for checkpoints and datasets. Handles are move-only
// owners of HDF5 identifiers. Every failure is a dtnn::DataError of the form "<file>: <object>: <what>",
// with HDF5's innermost message appended; HDF5's own error printing is switched off, so a corrupt file never
// dumps a stack of library errors on the user. HDF5 types stay out of this header (identifiers are carried
// as std::int64_t, which is what hid_t is since HDF5 1.10), so users need no HDF5 include path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dtnn::io::h5 {

using Id = std::int64_t;

// What a dataset or attribute holds in the file. Reads convert between integer types (HDF5 does that
// exactly or fails), so kOther and kString are the only ones a numeric read refuses outright.
enum class DType { kUInt8, kInt8, kInt32, kUInt32, kInt64, kUInt64, kInt16, kUInt16, kFloat32, kFloat64,
                   kString, kOther };
std::string to_string(DType type);  // "float32", "uint8", ...

std::string shape_to_string(std::span<const std::int64_t> shape);  // "[64, 3, 3, 3]", "[]" for a scalar

// Owns one HDF5 identifier and releases it with the close function of its kind.
class Handle {
 public:
  using Closer = int (*)(Id);
  Handle() = default;
  Handle(Id id, Closer close) noexcept : id_(id), close_(close) {}
  ~Handle() { reset(); }
  Handle(Handle&& other) noexcept;
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  [[nodiscard]] Id id() const { return id_; }
  [[nodiscard]] bool valid() const { return id_ >= 0; }
  void reset() noexcept;
  // Closes now and reports failure (a write that could not be flushed), which the destructor must swallow.
  int close() noexcept;

 private:
  Id id_ = -1;
  Closer close_ = nullptr;
};

// A selection of the file or of memory. Rank 0 is HDF5's scalar dataspace.
class Dataspace {
 public:
  static Dataspace simple(std::span<const std::int64_t> shape);
  explicit Dataspace(Handle handle) : handle_(std::move(handle)) {}
  [[nodiscard]] Id id() const { return handle_.id(); }
  [[nodiscard]] std::vector<std::int64_t> shape() const;
  // Selects indices [first, first + count) of the first dimension, every index of the others.
  void select_rows(std::int64_t first, std::int64_t count);
  // Adds those rows to the current selection.
  void add_rows(std::int64_t first, std::int64_t count);

 private:
  void rows(std::int64_t first, std::int64_t count, int op);
  Handle handle_;
};

// Something that carries attributes: a group (the file's root included) or a dataset. Values are written
// in forms that h5py reads directly: fixed-length UTF-8 strings (kept in the object header, which the file
// format checksums, rather than in the unchecked global heap), int64, float64, float32 arrays.
class Object {
 public:
  [[nodiscard]] Id id() const { return handle_.id(); }
  [[nodiscard]] const std::string& file() const { return file_; }
  [[nodiscard]] const std::string& path() const { return path_; }

  [[nodiscard]] bool has_attribute(std::string_view name) const;
  void set_string(std::string_view name, std::string_view value) const;
  void set_int(std::string_view name, std::int64_t value) const;
  void set_double(std::string_view name, double value) const;
  void set_floats(std::string_view name, std::span<const float> values) const;
  void set_strings(std::string_view name, std::span<const std::string> values) const;
  void remove_attribute(std::string_view name) const;

  // Each read names the attribute in its error when it is missing or holds another type. Fixed-length and
  // variable-length strings are both accepted, so files written by other tools read too.
  [[nodiscard]] std::string get_string(std::string_view name) const;
  [[nodiscard]] std::int64_t get_int(std::string_view name) const;
  [[nodiscard]] double get_double(std::string_view name) const;
  [[nodiscard]] std::vector<float> get_floats(std::string_view name) const;
  [[nodiscard]] std::vector<std::string> get_strings(std::string_view name) const;

  // DataError "<file>: <path>: <what>", with HDF5's innermost message when HDF5 reported one.
  [[noreturn]] void fail(std::string_view what) const;

 protected:
  Object(Handle handle, std::string file, std::string path)
      : handle_(std::move(handle)), file_(std::move(file)), path_(std::move(path)) {}
  [[nodiscard]] std::string child_path(std::string_view name) const;

  Handle handle_;
  std::string file_;
  std::string path_;
};

// Chunked storage is what makes compression, checksums of raw data and partial reads of a compressed
// dataset possible; contiguous storage (an empty chunk shape) is the fastest for whole-array writes.
enum class ChunkChecksum { kNone, kFletcher32 };

struct DatasetLayout {
  std::vector<std::int64_t> chunk;  // empty: contiguous
  int deflate_level = 0;            // 0..9, chunked only; 0 stores chunks as they are
  ChunkChecksum checksum = ChunkChecksum::kNone;
};

// The raw-data chunk cache of one open dataset. Zero keeps HDF5's default (1 MiB, 521 slots).
struct ChunkCache {
  std::int64_t bytes = 0;
  std::int64_t slots = 0;
};

class Dataset : public Object {
 public:
  Dataset(Handle handle, std::string file, std::string path) : Object(std::move(handle), std::move(file),
                                                                      std::move(path)) {}
  [[nodiscard]] std::vector<std::int64_t> shape() const;
  [[nodiscard]] DType dtype() const;
  [[nodiscard]] std::int64_t storage_bytes() const;  // bytes the file really holds for the data
  [[nodiscard]] int filter_count() const;            // compression and checksum filters of the chunks
  [[nodiscard]] std::vector<std::int64_t> chunk() const;  // empty when not chunked

  // Whole-dataset transfers; the span's size must be the product of shape(). Supported element types:
  // float, double, std::uint8_t, std::int32_t, std::int64_t.
  template <class T>
  void write(std::span<const T> values) const;
  template <class T>
  void read(std::span<T> values) const;

  // Rows [first, first + count) of the first dimension, through a hyperslab: values holds count rows.
  template <class T>
  void write_rows(std::int64_t first, std::int64_t count, std::span<const T> values) const;
  template <class T>
  void read_rows(std::int64_t first, std::int64_t count, std::span<T> values) const;

  // A one-dimensional dataset of fixed-length UTF-8 strings (see Group::create_strings).
  [[nodiscard]] std::vector<std::string> read_strings() const;
};

class Group : public Object {
 public:
  Group(Handle handle, std::string file, std::string path) : Object(std::move(handle), std::move(file),
                                                                    std::move(path)) {}

  // New groups record the creation order of their members, so members() gives entries back in the order
  // they were written (state_dict order) rather than sorted by name.
  [[nodiscard]] Group create_group(std::string_view name) const;
  [[nodiscard]] Group open_group(std::string_view name) const;
  [[nodiscard]] bool contains(std::string_view name) const;
  [[nodiscard]] bool contains_group(std::string_view name) const;
  [[nodiscard]] bool contains_dataset(std::string_view name) const;
  // Names of the members, in creation order when the group tracks it, else in name order.
  [[nodiscard]] std::vector<std::string> members() const;

  [[nodiscard]] Dataset create_dataset(std::string_view name, DType type, std::span<const std::int64_t> shape,
                                       const DatasetLayout& layout = {}) const;
  [[nodiscard]] Dataset open_dataset(std::string_view name, const ChunkCache& cache = {}) const;
  // A one-dimensional dataset of values.size() fixed-length UTF-8 strings, as long as the longest.
  Dataset create_strings(std::string_view name, std::span<const std::string> values) const;
  void remove(std::string_view name) const;
};

enum class FileMode { kReadOnly, kReadWrite };

// Where write_atomically builds the file: in memory, then written out in one go (for files of bounded size, such
// as checkpoints: a write that fails, a full disk say, is then a plain error of ours, never a half-written HDF5 file
// that HDF5 tries again to close at exit), or in the temporary file itself (large datasets).
enum class Staging { kInMemory, kOnDisk };

class File : public Group {
 public:
  // Creates (or truncates) a file in the newest file format, whose metadata HDF5 checksums: a flipped
  // byte in an object header or index is then an error on open instead of undefined behaviour.
  static File create(const std::filesystem::path& file);
  // DataError when the file is missing, a directory, not HDF5 (checked before HDF5 is asked, for a clearer
  // message), truncated, or its metadata fails a checksum.
  static File open(const std::filesystem::path& file, FileMode mode);

  // Closes the file and everything still open in it, and reports what could not be written.
  void close();

 private:
  using Group::Group;
  friend void write_atomically(const std::filesystem::path& file, const std::function<void(File&)>& write,
                               Staging staging);
};


// Writes file crash-safely: write fills a new file, which goes into the same directory under a temporary name
// (file + "." + pid + ".tmp") that is fsync'ed, renamed over file and made durable by an fsync of the directory.
// Killed at any moment, the process leaves either the old file or the new one complete, plus at most a stale
// temporary file. On an exception the temporary file is removed and file is untouched; the DataError names file
// and why it could not be written.
void write_atomically(const std::filesystem::path& file, const std::function<void(File&)>& write,
                      Staging staging = Staging::kOnDisk);

// The temporary name write_atomically uses for file in this process.
std::filesystem::path temporary_path(const std::filesystem::path& file);

// fsync of a file or a directory; DataError naming it when that fails.
void sync_path(const std::filesystem::path& path);

}  // namespace dtnn::io::h5
