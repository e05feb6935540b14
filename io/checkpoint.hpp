// SPDX-License-Identifier: Apache-2.0
// Training checkpoints in HDF5, described independently of the model classes. Entries carry PyTorch's
// dotted names and shapes (Conv OIHW, Dense (out, in)), so tools/checkpoint_to_pytorch.py and
// tools/pytorch_to_checkpoint.py move weights to and from a PyTorch state_dict.
//
// Layout (format_version 1, HDF5's newest file format, whose metadata HDF5 checksums):
//   /                      attributes: format = "dtnn-checkpoint", format_version, model_name, model_options,
//                          world_size, epoch, step, samples_seen, optimizer, schedule, created, [metric]
//   /parameters/<name>     float32 dataset of the entry's shape, attribute crc32 (zlib CRC-32 of the values'
//   /buffers/<name>        little-endian bytes); entries in the order they were given
//   /optimizer_state/<name>
//   /rng_states            one fixed-length UTF-8 string per rank (empty dataset when none), attribute crc32
//                          of the strings, each followed by a NUL byte
// JSON-valued attributes (model_options, optimizer, schedule) are opaque text to this layer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dtnn::io {

inline constexpr int kCheckpointFormatVersion = 1;

struct NamedArray {
  std::string name;                  // dotted PyTorch name, e.g. "features.0.weight"; no '/'
  std::vector<std::int64_t> shape;   // empty for a scalar (one value)
  std::vector<float> data;           // product(shape) values, row-major
};

struct Checkpoint {
  int format_version = kCheckpointFormatVersion;
  std::string model_name;
  std::string model_options = "{}";  // JSON text
  int world_size = 1;
  std::int64_t epoch = 0;
  std::int64_t step = 0;
  std::int64_t samples_seen = 0;
  std::vector<NamedArray> parameters;
  std::vector<NamedArray> buffers;          // BatchNorm running statistics and the like
  std::vector<NamedArray> optimizer_state;  // per-parameter state, named e.g. "<param>.momentum_buffer"
  std::string optimizer = "{}";             // JSON text: name, hyper-parameters, scalar state
  std::string schedule = "{}";              // JSON text
  std::vector<std::string> rng_states;      // empty or one opaque text per rank
  std::string created;                      // ISO 8601 UTC; save_checkpoint fills it when empty
  std::optional<double> metric;             // the validation metric it was saved with, when known
};

// Writes file crash-safely (temporary file in the same directory, fsync, rename, fsync of the directory).
// InvalidArgument when an entry's data does not match its shape, a name is empty, holds '/' or repeats
// within its group, or rng_states is neither empty nor world_size long; DataError when writing fails.
void save_checkpoint(const std::filesystem::path& file, const Checkpoint& checkpoint);

// Reads and validates a whole checkpoint: format and version, float32 entries, shapes against the bytes
// stored, and every checksum. Any problem, a corrupt or truncated file included, is a DataError naming the
// file and the object.
Checkpoint load_checkpoint(const std::filesystem::path& file);

struct Expected {
  std::string name;
  std::vector<std::int64_t> shape;
};

// Compares a loaded checkpoint with what a model holds. Every missing, unexpected or wrongly shaped
// parameter or buffer is listed in one DataError that names file.
void check_against(const Checkpoint& checkpoint, const std::vector<Expected>& parameters,
                   const std::vector<Expected>& buffers, const std::filesystem::path& file);

// Which way the metric given to CheckpointDirectory::save improves.
enum class MetricGoal { kMinimize, kMaximize };

// A directory of checkpoints named ckpt-epoch0003-step000123.h5, the newest keep_last of which are kept,
// plus best.h5 (a hard link to the best one, or a copy where links are not supported), replaced
// crash-safely. Stale temporary files of dead processes are removed when it is opened and after each save.
class CheckpointDirectory {
 public:
  static constexpr int kDefaultKeepLast = 3;
  // Creates dir when missing. InvalidArgument when keep_last < 1.
  explicit CheckpointDirectory(std::filesystem::path dir, int keep_last = kDefaultKeepLast);

  // Writes the checkpoint, prunes the older ones and returns its path.
  std::filesystem::path save(const Checkpoint& checkpoint);
  // The same, and makes it best.h5 when metric beats the metric stored in the current best.h5 (NaN never
  // does). The metric is stored in the checkpoint, so the best survives a restart.
  std::filesystem::path save(const Checkpoint& checkpoint, double metric, MetricGoal goal);

  // Newest by (epoch, step), or an empty path when there is none. Not checked for loadability: see
  // resolve_checkpoint.
  [[nodiscard]] std::filesystem::path latest() const;
  // best.h5, or an empty path when no checkpoint has been marked best yet.
  [[nodiscard]] std::filesystem::path best() const;
  // All ckpt-*.h5 files, oldest first.
  [[nodiscard]] std::vector<std::filesystem::path> checkpoints() const;
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path write(const Checkpoint& checkpoint, std::optional<double> metric);
  void prune() const;
  void remove_stale_temporaries() const;

  std::filesystem::path dir_;
  int keep_last_;
};

// The file itself when file_or_dir is a file; for a directory, its newest checkpoint that loads, skipping
// (with a warning on stderr) those that do not. DataError when there is none.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& file_or_dir);

}  // namespace dtnn::io
