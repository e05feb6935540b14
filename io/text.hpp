// SPDX-License-Identifier: Apache-2.0
// Byte-level text corpora for sequence models (docs/text.md). A corpus is a folder of text files or one file, each
// a list of records: fortunes separated by lines "%" (the format of Debian's fortunes package), or, in a file with
// no such line, paragraphs separated by blank lines. Records are split by a fixed rule, so that the two splits share
// no record: counted from 0 over the files in name order, every tenth record (9, 19, 29, ...) goes to the test
// split. Each split's text is its records in order, each followed by its separator ("%\n", or a blank line), and
// its tokens are that text's bytes (vocabulary 256).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "io/dataset.hpp"

namespace dtnn::io {

inline constexpr int kByteVocabulary = 256;
// Record k goes to the test split when k % kTestEvery == kTestEvery - 1.
inline constexpr int kTestEvery = 10;

// The records of one file's text, in order: the fortunes when some line is exactly "%" (or "%\r"), else the
// paragraphs. A record keeps its lines' newlines (one is added to a last line without); records of white space only
// are dropped.
struct TextRecords {
  std::vector<std::string> records;
  bool fortunes = false;  // separated by "%" lines
};
TextRecords text_records(std::string_view text);

// The two splits of a corpus as text.
struct TextSplits {
  std::string name;  // the folder's or the file's name
  std::string train;
  std::string test;
  std::int64_t train_records = 0;
  std::int64_t test_records = 0;
  std::vector<std::filesystem::path> files;  // read, in that order
};

// The text files of a folder, in name order: its regular files, not its links (Debian's *.u8 names link to the
// fortune files), sub-folders (fortunes-off's off/, which is rot13-encoded), hidden files, nor the strfile indexes
// (*.dat). DataError naming the folder when it cannot be listed or holds no such file.
std::vector<std::filesystem::path> text_files_in(const std::filesystem::path& dir);

// Splits the records of `files`, read in order. DataError naming the file for one that cannot be read, is empty,
// holds a NUL byte (a binary file, such as a .dat index) or no record; naming `source` for fewer than kTestEvery
// records in all (the test split would be empty).
TextSplits split_text_files(const std::vector<std::filesystem::path>& files, std::string name,
                            const std::string& source);

// A folder of text files (text_files_in) or one text file, split.
TextSplits read_text_corpus(const std::filesystem::path& dir_or_file);

// The bytes of a text as token ids.
std::vector<std::int32_t> byte_tokens(std::string_view text);

// The corpus as token windows of `sequence` (io::token_windows), named name + "/train" and name + "/test". DataError
// naming the corpus when a split is shorter than one window.
TrainTest load_text_dataset(const std::filesystem::path& dir_or_file, int sequence);

// $DTNN_TEXT_DIR when set and not empty, else where Debian's fortunes package installs its fortunes.
std::filesystem::path default_text_dir();

}  // namespace dtnn::io
