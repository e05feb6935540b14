// SPDX-License-Identifier: Apache-2.0
#include "io/h5tokens.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "io/hdf5.hpp"

namespace dtnn::io {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "dtnn-tokens";
constexpr std::int64_t kChunkBytes = std::int64_t{64} << 10;
// Tokens per write: whole chunks, so that each compressed chunk is written once.
constexpr std::int64_t kTransferTokens = std::int64_t{16} << 20;
// A deflated chunk of one repeated byte shrinks about 1000 times: a shape asking for more than that of what the file
// holds is damage (or a hand-made header), refused before any allocation.
constexpr std::int64_t kMaxCompressionRatio = 1100;

h5::DType stored_type(int vocabulary) {
  return vocabulary <= 256 ? h5::DType::kUInt8 : h5::DType::kInt32;
}

H5TokensInfo read_info(const h5::File& f) {
  const std::string format = f.has_attribute("format") ? f.get_string("format") : std::string();
  if (format != kFormat) {
    f.fail(fmt::format("not a dtnn token dataset, expected format \"{}\", got \"{}\"", kFormat, format));
  }
  const std::int64_t version = f.get_int("format_version");
  if (version < 1 || version > kH5TokensFormatVersion) {
    f.fail(fmt::format("format_version expected 1..{}, got {}", kH5TokensFormatVersion, version));
  }
  H5TokensInfo info;
  info.name = f.has_attribute("name") ? f.get_string("name") : fs::path(f.file()).stem().string();
  const std::int64_t vocabulary = f.get_int("vocabulary");
  if (vocabulary < 1 || vocabulary > std::numeric_limits<std::int32_t>::max()) {
    f.fail(fmt::format("attribute vocabulary expected >= 1, got {}", vocabulary));
  }
  info.vocabulary = static_cast<int>(vocabulary);
  for (const std::string& member : f.members()) {
    if (f.contains_group(member) && f.open_group(member).contains_dataset("tokens")) info.splits.push_back(member);
  }
  return info;
}

// A split's tokens: one-dimensional integers of the type the vocabulary calls for, as many as the file can hold.
h5::Dataset open_tokens(const h5::File& f, const H5TokensInfo& info, std::string_view split) {
  if (std::find(info.splits.begin(), info.splits.end(), split) == info.splits.end()) {
    f.fail(fmt::format("no split '{}', expected one of [{}]", split, fmt::join(info.splits, ", ")));
  }
  h5::Dataset tokens = f.open_group(split).open_dataset("tokens", h5::ChunkCache{kChunkBytes * 16, 521});
  const h5::DType type = tokens.dtype();
  if (type != h5::DType::kUInt8 && type != h5::DType::kInt32 && type != h5::DType::kUInt16 &&
      type != h5::DType::kInt16) {
    tokens.fail(fmt::format("dtype expected uint8 or int32 token ids, got {}", h5::to_string(type)));
  }
  const std::vector<std::int64_t> shape = tokens.shape();
  if (shape.size() != 1) {
    tokens.fail(fmt::format("shape expected [tokens], got {}", h5::shape_to_string(shape)));
  }
  const std::int64_t element = type == h5::DType::kUInt8 ? 1 : type == h5::DType::kInt32 ? 4 : 2;
  const std::int64_t stored = tokens.storage_bytes();
  const std::int64_t ratio = tokens.filter_count() > 0 ? kMaxCompressionRatio : 1;
  if (shape[0] * element > stored * ratio + kChunkBytes) {
    tokens.fail(fmt::format("shape {} needs {} bytes, the file holds {}", h5::shape_to_string(shape),
                            shape[0] * element, stored));
  }
  return tokens;
}

void check_ids(const h5::Dataset& d, std::span<const std::int32_t> ids, std::int64_t first, int vocabulary) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocabulary) {
      d.fail(fmt::format("token {} at position {}, expected 0 <= token < {} (the vocabulary)", ids[i],
                         first + static_cast<std::int64_t>(i), vocabulary));
    }
  }
}

// The batch-loading tasks of several tiles read at once; one open file serves them in turn (HDF5's serial library
// is not thread-safe).
class H5TokenReader : public TokenReader {
 public:
  H5TokenReader(h5::File file, h5::Dataset tokens, int vocabulary)
      : file_(std::move(file)), tokens_(std::move(tokens)), vocabulary_(vocabulary) {}
  void read(std::int64_t first, std::int64_t count, std::int32_t* out) override {
    std::lock_guard lock(mutex_);
    const std::span<std::int32_t> ids(out, static_cast<std::size_t>(count));
    tokens_.read_rows(first, count, ids);
    check_ids(tokens_, ids, first, vocabulary_);
  }

 private:
  std::mutex mutex_;
  h5::File file_;
  h5::Dataset tokens_;
  int vocabulary_;
};

}  // namespace

void write_h5_tokens(const fs::path& file, std::string_view name, int vocabulary,
                     const std::vector<H5TokenSplit>& splits) {
  if (vocabulary < 1) {
    throw InvalidArgument(fmt::format("{}: vocabulary {}, expected at least 1", file.string(), vocabulary));
  }
  if (splits.empty()) {
    throw InvalidArgument(fmt::format("{}: no split to write, expected at least one", file.string()));
  }
  for (std::size_t i = 0; i < splits.size(); ++i) {
    const H5TokenSplit& s = splits[i];
    if (s.tokens.empty()) {
      throw InvalidArgument(fmt::format("{}: split {} has no tokens, expected at least one", file.string(), s.name));
    }
    const bool clash = std::any_of(splits.begin(), splits.begin() + static_cast<std::ptrdiff_t>(i),
                                   [&](const H5TokenSplit& o) { return o.name == s.name; });
    if (s.name.empty() || s.name.find('/') != std::string::npos || clash) {
      throw InvalidArgument(fmt::format("{}: split name '{}', expected a unique non-empty name without '/'",
                                        file.string(), s.name));
    }
    for (std::size_t k = 0; k < s.tokens.size(); ++k) {
      if (s.tokens[k] < 0 || s.tokens[k] >= vocabulary) {
        throw DataError(fmt::format("{}: split {}: token {} at position {}, expected 0 <= token < {}", file.string(),
                                    s.name, s.tokens[k], k, vocabulary));
      }
    }
  }
  const h5::DType type = stored_type(vocabulary);
  const std::int64_t element = type == h5::DType::kUInt8 ? 1 : 4;
  h5::write_atomically(file, [&](h5::File& f) {
    f.set_string("format", kFormat);
    f.set_int("format_version", kH5TokensFormatVersion);
    f.set_string("name", name);
    f.set_int("vocabulary", vocabulary);
    for (const H5TokenSplit& s : splits) {
      const h5::Group group = f.create_group(s.name);
      const auto n = static_cast<std::int64_t>(s.tokens.size());
      const std::vector<std::int64_t> shape{n};
      const std::int64_t chunk = std::min(n, kChunkBytes / element);
      const h5::Dataset tokens =
          group.create_dataset("tokens", type, shape, {{chunk}, 4, h5::ChunkChecksum::kFletcher32});
      tokens.set_int("records", s.records);
      const std::int64_t per_transfer = chunk * std::max<std::int64_t>(1, kTransferTokens / chunk);
      std::vector<std::uint8_t> bytes;
      for (std::int64_t first = 0; first < n; first += per_transfer) {
        const std::int64_t count = std::min(per_transfer, n - first);
        const auto part = s.tokens.subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(count));
        if (type == h5::DType::kInt32) {
          tokens.write_rows(first, count, part);
          continue;
        }
        bytes.assign(part.begin(), part.end());
        tokens.write_rows(first, count, std::span<const std::uint8_t>(bytes));
      }
    }
  });
}

bool is_h5_tokens(const fs::path& file) {
  const h5::File f = h5::File::open(file, h5::FileMode::kReadOnly);
  return f.has_attribute("format") && f.get_string("format") == kFormat;
}

H5TokensInfo read_h5_tokens_info(const fs::path& file) {
  return read_info(h5::File::open(file, h5::FileMode::kReadOnly));
}

Dataset open_h5_tokens(const fs::path& file, std::string_view split, int sequence) {
  if (sequence < 1) {
    throw InvalidArgument(fmt::format("{}: windows of sequence {}, expected at least 1", file.string(), sequence));
  }
  h5::File f = h5::File::open(file, h5::FileMode::kReadOnly);
  const H5TokensInfo info = read_info(f);
  h5::Dataset tokens = open_tokens(f, info, split);
  const std::int64_t n = tokens.shape()[0];
  if (n < std::int64_t{sequence} + 1) {
    tokens.fail(fmt::format("{} tokens, expected at least {} for one window (sequence {} + 1)", n,
                            std::int64_t{sequence} + 1, sequence));
  }
  Dataset out;
  out.name = info.name + "/" + std::string(split);
  out.classes = info.vocabulary;
  out.sequence = sequence;
  const std::int64_t count = (n - 1) / sequence;
  out.windows.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) out.windows[static_cast<std::size_t>(i)] = i * sequence;
  out.token_reader = std::make_shared<H5TokenReader>(std::move(f), std::move(tokens), info.vocabulary);
  return out;
}

std::vector<std::int32_t> read_h5_tokens(const fs::path& file, std::string_view split) {
  const h5::File f = h5::File::open(file, h5::FileMode::kReadOnly);
  const H5TokensInfo info = read_info(f);
  const h5::Dataset tokens = open_tokens(f, info, split);
  std::vector<std::int32_t> out(static_cast<std::size_t>(tokens.shape()[0]));
  tokens.read(std::span<std::int32_t>(out));
  check_ids(tokens, out, 0, info.vocabulary);
  return out;
}

}  // namespace dtnn::io
