// SPDX-License-Identifier: Apache-2.0
// Image classification datasets in HDF5, read whole or one rank's shard at a time.
//
// Layout (format_version 1; h5py reads it as is):
//   /                 attributes: format = "dtnn-dataset", format_version, name, classes, channels, height,
//                     width, class_names (strings), mean and std (float32 per channel, in [0,1] pixel units,
//                     over the "train" split, else the first one)
//   /<split>/images   uint8 [N, H, W, C], chunked along N (about 64 KiB per chunk), deflate, Fletcher-32
//   /<split>/labels   int32 [N], chunked, deflate, Fletcher-32
// Readers also accept files made by other tools: images [N, H, W] (one channel), labels of any integer
// type, and "classes" taken from the number of class_names when that attribute is missing.
//
// Images in memory are io::Dataset's NCHW floats in [0,1]; on disk they are the bytes round(255 x), which
// is exact for data that came from 8-bit files (IDX, CIFAR).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/dataset.hpp"

namespace dtnn::io {

inline constexpr int kH5DatasetFormatVersion = 1;

struct H5DatasetOptions {
  std::string name;                      // empty: the first split's Dataset::name up to its first '/'
  std::vector<std::string> class_names;  // empty: known_class_names(name, classes)
  std::int64_t samples_per_chunk = 0;    // 0: as many as fit in about 64 KiB, at least one
  int deflate_level = 4;                 // 0..9; 0 stores chunks uncompressed
};

struct H5Split {
  std::string name;  // group name in the file, e.g. "train"
  const Dataset& data;
};

// Writes the splits (same image shape and class count) crash-safely: a temporary file, then a rename.
// InvalidArgument when a split is empty or inconsistent, or the names clash; DataError when writing fails.
void write_h5_dataset(const std::filesystem::path& file, const std::vector<H5Split>& splits,
                      const H5DatasetOptions& options = {});
// Splits "train" and "test": what `dtnn convert` writes from IDX or CIFAR files.
void write_h5_dataset(const std::filesystem::path& file, const TrainTest& data, const H5DatasetOptions& options = {});

// Class names of the datasets dtnn knows ("fashion-mnist", "mnist", "cifar10"), else "0", "1", ...
std::vector<std::string> known_class_names(std::string_view dataset, int classes);

struct H5DatasetInfo {
  std::string name;
  int channels = 0;
  int height = 0;
  int width = 0;
  int classes = 0;
  std::vector<std::string> class_names;  // empty when the file has none
  std::vector<float> mean;               // per channel; empty when the file has none
  std::vector<float> std;
  std::vector<std::string> splits;       // groups holding images and labels, in file order
};

H5DatasetInfo read_h5_dataset_info(const std::filesystem::path& file);

// A whole split in memory, named info.name + "/" + split. DataError for a missing split, wrong types or
// shapes, a label outside [0, classes), a checksum failure or any other damage.
Dataset read_h5_dataset(const std::filesystem::path& file, std::string_view split);

struct H5ReaderOptions {
  std::string split = "train";
  int rank = 0;
  int world = 1;
  // Sizes the chunk cache: it holds the chunks one read of this many samples spans, plus one, so that a
  // chunk cut by a batch boundary is decompressed once, not once per batch.
  std::int64_t samples_per_read = 256;
};

// Reads one rank's shard of a split through hyperslabs, never the whole split. The split's N samples are
// cut into world contiguous shards whose sizes differ by at most one, the larger ones first (as
// split_rows does for batch tiles); rank r's shard is the r-th. With more ranks than samples, some shards
// are empty.
class H5DatasetReader {
 public:
  explicit H5DatasetReader(const std::filesystem::path& file, const H5ReaderOptions& options = {});
  H5DatasetReader(const std::filesystem::path& file, int rank, int world);
  ~H5DatasetReader();
  H5DatasetReader(H5DatasetReader&&) noexcept;
  H5DatasetReader& operator=(H5DatasetReader&&) noexcept;
  H5DatasetReader(const H5DatasetReader&) = delete;
  H5DatasetReader& operator=(const H5DatasetReader&) = delete;

  [[nodiscard]] std::int64_t size() const;          // samples in this rank's shard
  [[nodiscard]] std::int64_t shard_begin() const;   // index in the split of the shard's first sample
  [[nodiscard]] std::int64_t split_size() const;    // samples in the whole split
  [[nodiscard]] std::int64_t sample_elements() const;  // channels * height * width
  [[nodiscard]] const H5DatasetInfo& info() const;

  // Samples [first, first + count) of the shard, as NCHW floats in [0,1] and labels. images must hold
  // count * sample_elements() values and labels count. InvalidArgument for a range outside the shard or a
  // wrong buffer size; DataError for damage in the file or a label outside [0, classes).
  void read(std::int64_t first, std::int64_t count, std::span<float> images, std::span<std::int32_t> labels);
  // The samples at the given shard indices, in that order (repeats allowed), for shuffled batches: reads
  // each run of consecutive indices once.
  void read_samples(std::span<const std::int64_t> indices, std::span<float> images, std::span<std::int32_t> labels);
  // Every label of the shard, without reading images (labels are small: a streamed dataset keeps them in memory).
  std::vector<std::int32_t> labels();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A split streamed from the file: labels in memory, images read by the batch-loading tasks (through a reader
// whose chunk cache is sized for batches of batch_hint samples).
Dataset open_h5_dataset(const std::filesystem::path& file, std::string_view split, std::int64_t batch_hint = 256);

// A file of random images and labels in the dataset layout, generated a chunk at a time (the whole split
// is never in memory). The defaults are an ImageNet-like layout.
struct SyntheticH5Spec {
  std::string name = "imagenet-like";
  std::int64_t train = 8;
  std::int64_t test = 8;
  int channels = 3;
  int height = 224;
  int width = 224;
  int classes = 1000;
  std::uint64_t seed = 1;
};

void write_synthetic_h5_dataset(const std::filesystem::path& file, const SyntheticH5Spec& spec = {});

}  // namespace dtnn::io
