// SPDX-License-Identifier: Apache-2.0
// Token datasets in HDF5 (`dtnn convert --dataset text`): a corpus's splits as token streams, which `--dataset h5`
// reads back window by window, never whole, so that a corpus need not fit in memory.
//
// Layout (format_version 1; h5py reads it as is):
//   /                 attributes: format = "dtnn-tokens", format_version, name, vocabulary
//   /<split>/tokens   uint8 [N] when the vocabulary is at most 256 (a byte-level corpus), else int32 [N]; chunked
//                     (64 KiB), deflate, Fletcher-32; attribute records (the fortunes or paragraphs it holds, or 0)
// The windows are cut when the file is opened, for the model's sequence, as io::token_windows cuts them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/dataset.hpp"

namespace dtnn::io {

inline constexpr int kH5TokensFormatVersion = 1;

struct H5TokenSplit {
  std::string name;  // group name in the file, e.g. "train"
  std::span<const std::int32_t> tokens;
  std::int64_t records = 0;
};

// Writes the splits crash-safely (a temporary file, then a rename). InvalidArgument for an empty split, a bad
// name or a vocabulary < 1; DataError naming the token and split for an id outside [0, vocabulary), or when writing
// fails.
void write_h5_tokens(const std::filesystem::path& file, std::string_view name, int vocabulary,
                     const std::vector<H5TokenSplit>& splits);

// Whether file is an HDF5 file whose format attribute is "dtnn-tokens" (false for a dtnn-dataset of images or any
// other file; DataError only when file cannot be opened).
bool is_h5_tokens(const std::filesystem::path& file);

struct H5TokensInfo {
  std::string name;
  int vocabulary = 0;
  std::vector<std::string> splits;  // groups holding tokens, in file order
};
H5TokensInfo read_h5_tokens_info(const std::filesystem::path& file);

// A split streamed from the file as windows of `sequence` (named info.name + "/" + split), read by the batch-loading
// tasks: only the window starts are in memory. DataError for a missing split, a wrong type or shape, damage, a split
// shorter than one window; an id outside the vocabulary fails the task that reads it.
Dataset open_h5_tokens(const std::filesystem::path& file, std::string_view split, int sequence);

// A whole split in memory (tests, small files).
std::vector<std::int32_t> read_h5_tokens(const std::filesystem::path& file, std::string_view split);

}  // namespace dtnn::io
