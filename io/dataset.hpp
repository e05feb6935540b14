// SPDX-License-Identifier: Apache-2.0
// Datasets: classification (images as NCHW floats in [0,1], one int32 label per sample) and token windows for
// sequence models (a stream of int32 token ids cut into windows; io/text.hpp reads byte-level text into one).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/sample_reader.hpp"

namespace dtnn::io {

struct Dataset {
  std::string name;  // e.g. "fashion-mnist/train"; subsets append the range or the draw that made them
  int channels = 0;
  int height = 0;
  int width = 0;
  int classes = 0;  // a token dataset's: the vocabulary (every id is below it)
  std::vector<float> images;         // size() * sample_elements(), values in [0,1]; empty when streamed
  std::vector<std::int32_t> labels;  // size(), each in [0, classes)
  // Set for a dataset larger than memory (an HDF5 file): images stay empty and are read by batch.
  std::shared_ptr<SampleReader> reader;

  // A token dataset (sequence > 0; channels, height, width, images and labels stay empty): sample i is the window
  // of sequence + 1 ids of `tokens` starting at windows[i]; the model reads its first `sequence` ids and is taught
  // its last `sequence` (each id's successor). Subsets share `tokens` and select windows.
  int sequence = 0;
  std::shared_ptr<const std::vector<std::int32_t>> tokens;
  std::vector<std::int64_t> windows;
  // Set instead of tokens for a stream larger than memory (an HDF5 token file): read window by window.
  std::shared_ptr<TokenReader> token_reader;

  [[nodiscard]] bool has_tokens() const { return sequence > 0; }
  std::int64_t size() const;
  std::int64_t sample_elements() const;  // channels * height * width; a token dataset's: sequence

  // Samples [first, first + count), in order. InvalidArgument when the range leaves [0, size()).
  Dataset subset(std::int64_t first, std::int64_t count) const;

  // count samples drawn without replacement so that each class keeps its share of the dataset (largest
  // remainder rounding), which keeps small evaluation subsets balanced. Samples keep their original relative
  // order. The same seed gives the same subset on every run and machine. A token dataset has no classes of
  // samples: its windows are drawn uniformly, the same way.
  Dataset stratified_subset(std::int64_t count, std::uint64_t seed) const;
};

// Loads a pair of IDX files (1 channel). DataError when the counts differ or a label is not below classes.
Dataset load_idx_dataset(const std::filesystem::path& images_file, const std::filesystem::path& labels_file,
                         std::string name, int classes);

struct TrainTest {
  Dataset train;
  Dataset test;
};

// Loads the MNIST file layout (train-*-idx?-ubyte and t10k-*-idx?-ubyte, raw or .gz) from dir, 10 classes.
// The datasets are named name + "/train" and name + "/test".
TrainTest load_mnist_like(const std::filesystem::path& dir, std::string name);

// $DTNN_FASHION_MNIST_DIR when set and not empty, else where the dataset-fashion-mnist package installs it.
std::filesystem::path default_fashion_mnist_dir();

// Random images in [0,1) and uniform random labels. Values come from the raw output of std::mt19937_64,
// which the standard fixes bit for bit, so a seed gives the same data with every compiler and machine.
Dataset synthetic_dataset(int count, int channels, int height, int width, int classes, std::uint64_t seed);

// count windows of sequence + 1 random ids in [0, vocabulary), from one stream of count x sequence + 1 ids (the
// windows at stride sequence, as io/text.hpp's), drawn as synthetic_dataset's labels.
Dataset synthetic_token_dataset(int count, int sequence, int vocabulary, std::uint64_t seed);

// The token dataset of windows at stride `sequence` over `tokens` (window i starts at i x sequence; the last id of
// a window is the first of the next), as many as fit: (tokens - 1) / sequence. InvalidArgument for sequence or
// vocabulary < 1; DataError naming `source` when not even one window fits or an id is outside [0, vocabulary).
Dataset token_windows(std::shared_ptr<const std::vector<std::int32_t>> tokens, int sequence, int vocabulary,
                      std::string name, const std::string& source);

}  // namespace dtnn::io
