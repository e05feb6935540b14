// SPDX-License-Identifier: Apache-2.0
#include "io/cifar.hpp"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"

namespace dtnn::io {
namespace {

// Records are read this many at a time: the whole of CIFAR-100's train.bin (150 MiB) is never held as bytes
// next to its 600 MiB of floats.
constexpr std::int64_t kRecordsPerRead = 512;

struct LabelField {
  const char* what;  // as it appears in messages: "label", "coarse label", "fine label"
  int classes;
};

struct RecordFormat {
  const char* name;  // "CIFAR-10" or "CIFAR-100"
  std::int64_t record_bytes;
  std::vector<LabelField> fields;  // in file order, one byte each, before the pixels
  std::size_t kept;                // index into fields of the label that becomes Dataset::labels
};

RecordFormat cifar10_format() {
  return {"CIFAR-10", kCifar10RecordBytes, {{"label", kCifar10Classes}}, 0};
}

RecordFormat cifar100_format(CifarLabels labels) {
  return {"CIFAR-100",
          kCifar100RecordBytes,
          {{"coarse label", kCifar100CoarseClasses}, {"fine label", kCifar100FineClasses}},
          labels == CifarLabels::kCoarse ? std::size_t{0} : std::size_t{1}};
}

std::string errno_message(int err) {
  return err != 0 ? std::generic_category().message(err) : std::string("unknown error");
}

// Checks everything that the file size alone tells, so that a set of files is vetted before a long read.
std::int64_t record_count(const std::filesystem::path& file, const RecordFormat& format) {
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    throw DataError(fmt::format("{}: cannot open: {}", file.string(), ec.message()));
  }
  if (!std::filesystem::exists(status)) {
    throw DataError(fmt::format("{}: cannot open, no such file", file.string()));
  }
  if (std::filesystem::is_directory(status)) {
    throw DataError(fmt::format("{}: cannot open, expected a regular file, got a directory", file.string()));
  }
  const std::uintmax_t bytes = std::filesystem::file_size(file, ec);
  if (ec) {
    throw DataError(fmt::format("{}: cannot read the size: {}", file.string(), ec.message()));
  }
  const auto record = static_cast<std::uintmax_t>(format.record_bytes);
  if (bytes % record != 0) {
    throw DataError(fmt::format("{}: {} bytes is not a whole number of {}-byte {} records", file.string(), bytes,
                                format.record_bytes, format.name));
  }
  if (bytes == 0) {
    throw DataError(fmt::format("{}: empty, expected at least one {}-byte {} record, got 0 bytes", file.string(),
                                format.record_bytes, format.name));
  }
  return static_cast<std::int64_t>(bytes / record);
}

// Appends the records of one file to out, whose images and labels may already hold earlier files.
void append_records(const std::filesystem::path& file, const RecordFormat& format, std::int64_t records,
                    Dataset& out) {
  errno = 0;
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw DataError(fmt::format("{}: cannot open: {}", file.string(), errno_message(errno)));
  }
  const auto label_bytes = static_cast<std::int64_t>(format.fields.size());
  std::vector<std::uint8_t> buffer(
      static_cast<std::size_t>(std::min(records, kRecordsPerRead) * format.record_bytes));
  for (std::int64_t first = 0; first < records; first += kRecordsPerRead) {
    const std::int64_t count = std::min(records - first, kRecordsPerRead);
    const std::int64_t want = count * format.record_bytes;
    errno = 0;
    in.read(reinterpret_cast<char*>(buffer.data()), static_cast<std::streamsize>(want));
    const std::int64_t got = in.gcount();
    if (got != want) {
      // The size was checked just before, so this is an I/O error or a file cut while being read.
      throw DataError(fmt::format("{}: read error, expected {} bytes, got {}: {}", file.string(),
                                  records * format.record_bytes, first * format.record_bytes + got,
                                  errno_message(errno)));
    }
    for (std::int64_t r = 0; r < count; ++r) {
      const std::uint8_t* record = buffer.data() + r * format.record_bytes;
      for (std::size_t f = 0; f < format.fields.size(); ++f) {
        const LabelField& field = format.fields[f];
        if (record[f] >= field.classes) {
          throw DataError(fmt::format("{}: {} of record {} out of range, expected 0..{}, got {}", file.string(),
                                      field.what, first + r, field.classes - 1, record[f]));
        }
      }
      out.labels.push_back(record[format.kept]);
      std::transform(record + label_bytes, record + format.record_bytes, std::back_inserter(out.images),
                     [](std::uint8_t p) { return static_cast<float>(p) / 255.0f; });
    }
  }
}

// Reads files in order into one dataset. All sizes are checked before the first byte is read, which also
// gives the exact allocation up front.
Dataset read_files(const std::vector<std::filesystem::path>& files, const RecordFormat& format, std::string name) {
  std::vector<std::int64_t> counts;
  std::int64_t total = 0;
  for (const auto& file : files) {
    counts.push_back(record_count(file, format));
    total += counts.back();
  }
  Dataset out;
  out.name = std::move(name);
  out.channels = kCifarChannels;
  out.height = kCifarHeight;
  out.width = kCifarWidth;
  out.classes = format.fields[format.kept].classes;
  out.labels.reserve(static_cast<std::size_t>(total));
  out.images.reserve(static_cast<std::size_t>(total * kCifarPixelBytes));
  for (std::size_t i = 0; i < files.size(); ++i) {
    append_records(files[i], format, counts[i], out);
  }
  return out;
}

// A test file of the wrong size is reported before the training files have been read, not after.
void vet_sizes(const std::vector<std::filesystem::path>& files, const RecordFormat& format) {
  for (const auto& file : files) {
    record_count(file, format);
  }
}

// Every expected file is listed when one is missing: a download unpacked one level too deep or too shallow
// is then obvious from the message alone.
void require_files(const std::filesystem::path& dir, const std::vector<std::filesystem::path>& files,
                   const char* dataset) {
  std::vector<std::string> missing;
  std::vector<std::string> expected;
  for (const auto& file : files) {
    expected.push_back(file.filename().string());
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) {
      missing.push_back(expected.back());
    }
  }
  if (!missing.empty()) {
    throw DataError(fmt::format("{}: missing {}, expected the {} binary version files {}", dir.string(),
                                fmt::join(missing, ", "), dataset, fmt::join(expected, ", ")));
  }
}

}  // namespace

Dataset read_cifar10_file(const std::filesystem::path& file, std::string name) {
  return read_files({file}, cifar10_format(), std::move(name));
}

Dataset read_cifar100_file(const std::filesystem::path& file, CifarLabels labels, std::string name) {
  return read_files({file}, cifar100_format(labels), std::move(name));
}

TrainTest load_cifar10(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> train;
  for (int i = 1; i <= 5; ++i) {
    train.push_back(dir / fmt::format("data_batch_{}.bin", i));
  }
  const std::filesystem::path test = dir / "test_batch.bin";
  std::vector<std::filesystem::path> all = train;
  all.push_back(test);
  require_files(dir, all, "CIFAR-10");
  const RecordFormat format = cifar10_format();
  vet_sizes(all, format);
  return {read_files(train, format, "cifar10/train"), read_files({test}, format, "cifar10/test")};
}

TrainTest load_cifar100(const std::filesystem::path& dir, CifarLabels labels) {
  const std::filesystem::path train = dir / "train.bin";
  const std::filesystem::path test = dir / "test.bin";
  require_files(dir, {train, test}, "CIFAR-100");
  const RecordFormat format = cifar100_format(labels);
  vet_sizes({train, test}, format);
  const std::string prefix = labels == CifarLabels::kCoarse ? "cifar100-coarse" : "cifar100";
  return {read_files({train}, format, prefix + "/train"), read_files({test}, format, prefix + "/test")};
}

}  // namespace dtnn::io
