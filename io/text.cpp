// SPDX-License-Identifier: Apache-2.0
#include "io/text.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <system_error>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dtnn::io {
namespace {

namespace fs = std::filesystem;

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos;
}

bool separator(std::string_view line) {
  return line == "%" || line == "%\r";
}

// The lines of text, each without its '\n'.
std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) {
      out.push_back(text.substr(at));
      break;
    }
    out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

std::string read_file(const fs::path& file) {
  std::error_code ec;
  const auto status = fs::status(file, ec);
  if (ec || !fs::exists(status)) {
    throw DataError(fmt::format("{}: cannot open, no such file", file.string()));
  }
  if (fs::is_directory(status)) {
    throw DataError(fmt::format("{}: cannot read, expected a text file, got a directory", file.string()));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw DataError(fmt::format("{}: cannot open: {}", file.string(), std::strerror(errno)));
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    throw DataError(fmt::format("{}: cannot read: {}", file.string(), std::strerror(errno)));
  }
  return text;
}

}  // namespace

TextRecords text_records(std::string_view text) {
  const std::vector<std::string_view> lines = lines_of(text);
  TextRecords out;
  out.fortunes = std::any_of(lines.begin(), lines.end(), separator);
  std::string record;
  auto close = [&] {
    if (!blank(record)) out.records.push_back(std::move(record));
    record.clear();
  };
  for (const std::string_view line : lines) {
    if (out.fortunes ? separator(line) : blank(line)) {
      close();
      continue;
    }
    record.append(line);
    record.push_back('\n');
  }
  close();
  return out;
}

std::vector<fs::path> text_files_in(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw DataError(fmt::format("{}: cannot list, expected a folder of text files{}", dir.string(),
                                fs::exists(dir, ec) ? ", got a file" : ", no such folder"));
  }
  std::vector<fs::path> files;
  int skipped = 0;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    const auto status = it->symlink_status(ec);
    if (ec) break;
    if (!fs::is_regular_file(status) || name.starts_with('.') || name.ends_with(".dat") || name.ends_with(".u8")) {
      ++skipped;
      continue;
    }
    files.push_back(p);
  }
  if (ec) {
    throw DataError(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
  }
  if (files.empty()) {
    throw DataError(fmt::format("{}: no text file, expected at least one regular file of fortunes or paragraphs "
                                "(skipped {} links, folders, hidden files and *.dat/*.u8 indexes)",
                                dir.string(), skipped));
  }
  std::sort(files.begin(), files.end());
  return files;
}

TextSplits split_text_files(const std::vector<fs::path>& files, std::string name, const std::string& source) {
  TextSplits out;
  out.name = std::move(name);
  std::int64_t k = 0;
  for (const fs::path& file : files) {
    const std::string text = read_file(file);
    if (text.empty()) {
      throw DataError(fmt::format("{}: empty, expected text, got 0 bytes", file.string()));
    }
    const std::size_t nul = text.find('\0');
    if (nul != std::string::npos) {
      throw DataError(fmt::format("{}: a NUL byte at offset {}, expected text (a binary file, such as a fortune "
                                  "*.dat index?)", file.string(), nul));
    }
    const TextRecords r = text_records(text);
    if (r.records.empty()) {
      throw DataError(fmt::format("{}: no text, expected at least one fortune or paragraph, got {} bytes of "
                                  "separators and white space", file.string(), text.size()));
    }
    const std::string_view after = r.fortunes ? "%\n" : "\n";
    for (const std::string& record : r.records) {
      const bool test = k % kTestEvery == kTestEvery - 1;
      std::string& split = test ? out.test : out.train;
      split += record;
      split += after;
      ++(test ? out.test_records : out.train_records);
      ++k;
    }
    out.files.push_back(file);
  }
  if (k < kTestEvery) {
    throw DataError(fmt::format("{}: {} fortunes or paragraphs, expected at least {} (every {}th goes to the test "
                                "split)", source, k, kTestEvery, kTestEvery));
  }
  return out;
}

TextSplits read_text_corpus(const fs::path& dir_or_file) {
  std::error_code ec;
  if (fs::is_directory(dir_or_file, ec)) {
    const fs::path name = dir_or_file.filename().empty() ? dir_or_file.parent_path().filename()
                                                         : dir_or_file.filename();
    return split_text_files(text_files_in(dir_or_file), name.string(), dir_or_file.string());
  }
  return split_text_files({dir_or_file}, dir_or_file.stem().string(), dir_or_file.string());
}

std::vector<std::int32_t> byte_tokens(std::string_view text) {
  std::vector<std::int32_t> out(text.size());
  std::transform(text.begin(), text.end(), out.begin(),
                 [](char c) { return static_cast<std::int32_t>(static_cast<unsigned char>(c)); });
  return out;
}

TrainTest load_text_dataset(const fs::path& dir_or_file, int sequence) {
  if (sequence < 1) {
    throw InvalidArgument(fmt::format("{}: windows of sequence {}, expected at least 1", dir_or_file.string(),
                                      sequence));
  }
  const TextSplits s = read_text_corpus(dir_or_file);
  auto windows = [&](const std::string& text, std::int64_t records, const char* split) {
    if (static_cast<std::int64_t>(text.size()) < std::int64_t{sequence} + 1) {
      throw DataError(fmt::format("{}: the {} split holds {} bytes ({} fortunes or paragraphs), expected at least {} "
                                  "for one window (sequence {} + 1)",
                                  dir_or_file.string(), split, text.size(), records, std::int64_t{sequence} + 1,
                                  sequence));
    }
    return token_windows(std::make_shared<const std::vector<std::int32_t>>(byte_tokens(text)), sequence,
                         kByteVocabulary, s.name + "/" + split, dir_or_file.string() + " (" + split + " split)");
  };
  return {windows(s.train, s.train_records, "train"), windows(s.test, s.test_records, "test")};
}

fs::path default_text_dir() {
  const char* env = std::getenv("DTNN_TEXT_DIR");
  if (env != nullptr && *env != '\0') {
    return env;
  }
  return "/usr/share/games/fortunes";
}

}  // namespace dtnn::io
