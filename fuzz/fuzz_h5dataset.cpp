// SPDX-License-Identifier: Apache-2.0
// HDF5 datasets (io/h5dataset.cpp): the description, every split whole, and a split streamed as the data loader
// reads it (a shard, a range, shuffled samples, the labels). The seeds (fuzz/corpus/h5dataset) are files of
// write_h5_dataset and one of the foreign layout the readers accept, all in HDF5's newest format, whose metadata
// HDF5 checksums: most damage stops at HDF5's own checks, and what passes them reaches our checks. Files in HDF5's
// oldest format, without checksums, reach libhdf5 1.10's decoders of unchecked metadata, which crash on damaged
// files before our code sees anything (docs/fuzzing.md, fuzz/libhdf5/).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "fuzz/fuzz_hdf5.hpp"
#include "fuzz/fuzz_input.hpp"
#include "io/h5dataset.hpp"

namespace {

using dtnn::fuzz::require;

void check_labels(const std::vector<std::int32_t>& labels, int classes) {
  for (const std::int32_t label : labels) require(label >= 0 && label < classes, "h5 dataset: labels in [0, classes)");
}

void stream(const std::filesystem::path& file, const std::string& split) {
  dtnn::io::H5ReaderOptions options;
  options.split = split;
  options.samples_per_read = 3;
  dtnn::io::H5DatasetReader reader(file, options);
  const int classes = reader.info().classes;
  const std::vector<std::int32_t> all = reader.labels();
  require(static_cast<std::int64_t>(all.size()) == reader.size(), "h5 dataset: one label a sample of the shard");
  check_labels(all, classes);
  const std::int64_t n = std::min<std::int64_t>(reader.size(), 4);
  std::vector<float> images(static_cast<std::size_t>(n * reader.sample_elements()));
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  reader.read(0, n, images, labels);
  check_labels(labels, classes);
  std::vector<std::int64_t> indices;
  for (std::int64_t i = n - 1; i >= 0; --i) indices.push_back(i);
  reader.read_samples(indices, images, labels);
  check_labels(labels, classes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dtnn;
  const auto file = fuzz::write_input("input.h5", data, size);
  std::vector<std::string> splits;
  try {
    const io::H5DatasetInfo info = io::read_h5_dataset_info(file);
    require(info.classes > 0, "h5 dataset: at least one class");
    splits = info.splits;
  } catch (const DataError&) {
  }
  for (const std::string& split : splits) {
    try {
      const io::Dataset d = io::read_h5_dataset(file, split);
      require(static_cast<std::int64_t>(d.images.size()) == d.size() * d.sample_elements(),
              "h5 dataset: sample_elements() values a sample");
      check_labels(d.labels, d.classes);
    } catch (const DataError&) {
    }
    try {
      stream(file, split);
    } catch (const DataError&) {
    }
  }
  fuzz::require_hdf5_closed();
  return 0;
}
