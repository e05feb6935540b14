// SPDX-License-Identifier: Apache-2.0
#include "io/idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dtnn::io {
namespace {

constexpr std::int64_t kMaxCount = std::numeric_limits<std::int32_t>::max();
// gzread takes an unsigned int and returns an int, so one call must stay well below INT_MAX.
constexpr std::int64_t kReadChunk = std::int64_t{1} << 24;
// Reserving more than this up front would let a corrupt header trigger a huge allocation before a byte of
// data has been seen; past it the buffer grows as data actually arrives.
constexpr std::int64_t kMaxReserve = std::int64_t{1} << 28;
// Deflate cannot shrink data by more than 1032:1 (a 258-byte match in 2 bits), so a gzip file of n bytes holds at
// most about 1032 n bytes of data.
constexpr std::int64_t kMaxDeflateRatio = 1032;

struct GzClose {
  void operator()(gzFile f) const noexcept { gzclose(f); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzClose>;

std::string describe_magic(std::uint32_t magic) {
  if ((magic >> 16) == 0x1f8b) {
    return " (a gzip header: is the file compressed twice?)";
  }
  if ((magic >> 16) != 0) {
    return " (not an IDX file)";
  }
  const unsigned type = (magic >> 8) & 0xff;
  const unsigned dims = magic & 0xff;
  if (type == 0x08 && dims == 3) {
    return " (IDX unsigned-byte images)";
  }
  if (type == 0x08 && dims == 1) {
    return " (IDX unsigned-byte labels)";
  }
  const char* type_name = nullptr;
  switch (type) {
    case 0x08: type_name = "unsigned-byte"; break;
    case 0x09: type_name = "signed-byte"; break;
    case 0x0b: type_name = "int16"; break;
    case 0x0c: type_name = "int32"; break;
    case 0x0d: type_name = "float32"; break;
    case 0x0e: type_name = "float64"; break;
    default: return " (not an IDX file)";
  }
  return fmt::format(" (IDX {} with {} dimensions)", type_name, dims);
}

std::uint32_t big_endian_u32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

// Sequential reader over a gzip or raw file. zlib reports errors as "<path>: <message>" and through errno;
// both are turned into DataError here so callers only deal with byte counts.
class IdxReader {
 public:
  explicit IdxReader(const std::filesystem::path& file) : name_(file.string()) {
    std::error_code ec;
    const auto status = std::filesystem::status(file, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) {
      throw DataError(fmt::format("{}: cannot open: {}", name_, ec.message()));
    }
    if (!std::filesystem::exists(status)) {
      throw DataError(fmt::format("{}: cannot open, no such file", name_));
    }
    if (std::filesystem::is_directory(status)) {
      throw DataError(fmt::format("{}: cannot open, expected a regular file, got a directory", name_));
    }
    errno = 0;
    gz_.reset(gzopen(name_.c_str(), "rb"));
    if (!gz_) {
      const int err = errno;
      throw DataError(fmt::format("{}: cannot open: {}", name_,
                                  err != 0 ? std::generic_category().message(err) : "out of memory"));
    }
    // zlib's 8 KiB default would mean thousands of read() calls per MNIST file.
    gzbuffer(gz_.get(), 1u << 20);
    const auto bytes = std::filesystem::file_size(file, ec);
    file_bytes_ = ec ? std::numeric_limits<std::int64_t>::max() / kMaxDeflateRatio : static_cast<std::int64_t>(bytes);
  }

  const std::string& name() const { return name_; }

  // The most bytes the whole stream can hold: the file's size when it is raw, deflate's best ratio times it when
  // it is compressed. Known once something has been read (zlib tells the two apart from the first bytes).
  std::int64_t max_stream_bytes() {
    return gzdirect(gz_.get()) != 0 ? file_bytes_ : file_bytes_ * kMaxDeflateRatio;
  }

  // Reads up to n bytes; fewer only at the end of the stream.
  std::int64_t read(std::uint8_t* dst, std::int64_t n) {
    std::int64_t total = 0;
    while (total < n) {
      const auto want = static_cast<unsigned>(std::min(n - total, kReadChunk));
      const int got = gzread(gz_.get(), dst + total, want);
      if (got < 0) {
        throw_stream_error();
      }
      if (got == 0) {
        break;
      }
      total += got;
    }
    if (total < n) {
      int errnum = Z_OK;
      gzerror(gz_.get(), &errnum);
      cut_short_ = errnum == Z_BUF_ERROR;
    }
    return total;
  }

  // Distinguishes a cut gzip stream from a well-formed file that simply holds too few bytes.
  const char* truncation_note() const { return cut_short_ ? " (the gzip stream is cut short)" : ""; }

  // True when nothing follows. Reading past the data also makes zlib check the gzip trailer, so a
  // corrupted CRC or length is caught here rather than silently accepted.
  bool at_end() {
    std::uint8_t extra = 0;
    if (read(&extra, 1) == 1) {
      return false;
    }
    if (cut_short_) {
      throw DataError(fmt::format("{}: corrupt gzip stream, expected the gzip trailer after the data, got end "
                                  "of file", name_));
    }
    return true;
  }

 private:
  [[noreturn]] void throw_stream_error() {
    int errnum = Z_OK;
    std::string message = gzerror(gz_.get(), &errnum);
    if (errnum == Z_ERRNO) {
      const int err = errno;
      throw DataError(fmt::format("{}: read error: {}", name_, std::generic_category().message(err)));
    }
    const std::string prefix = name_ + ": ";
    if (message.starts_with(prefix)) {
      message.erase(0, prefix.size());
    }
    throw DataError(fmt::format("{}: corrupt gzip stream, expected valid compressed data and checksums, got "
                                "zlib error {} ({})",
                                name_, errnum, message));
  }

  std::string name_;
  GzHandle gz_;
  std::int64_t file_bytes_ = 0;
  bool cut_short_ = false;
};

template <std::size_t N>
std::array<std::uint32_t, N> read_header(IdxReader& in, std::uint32_t magic, const char* what) {
  constexpr std::int64_t header_bytes = 4 * (N + 1);
  std::array<std::uint8_t, header_bytes> raw{};
  std::int64_t got = in.read(raw.data(), 4);
  if (got < 4) {
    throw DataError(fmt::format("{}: truncated header, expected {} bytes, got {}{}", in.name(), header_bytes, got,
                                in.truncation_note()));
  }
  // The magic number is checked before the rest of the header so that a labels file given as images is
  // reported as the wrong kind of file, not as a short header.
  const std::uint32_t found = big_endian_u32(raw.data());
  if (found != magic) {
    throw DataError(fmt::format("{}: bad magic number, expected 0x{:08x} ({}), got 0x{:08x}{}", in.name(), magic,
                                what, found, describe_magic(found)));
  }
  got += in.read(raw.data() + 4, header_bytes - 4);
  if (got < header_bytes) {
    throw DataError(fmt::format("{}: truncated header, expected {} bytes, got {}{}", in.name(), header_bytes, got,
                                in.truncation_note()));
  }
  std::array<std::uint32_t, N> dims{};
  for (std::size_t i = 0; i < N; ++i) {
    dims[i] = big_endian_u32(raw.data() + 4 * (i + 1));
  }
  return dims;
}

void check_count(const IdxReader& in, std::uint32_t count, const char* what) {
  if (count == 0 || count > kMaxCount) {
    throw DataError(fmt::format("{}: bad {} count in header, expected 1..{}, got {}", in.name(), what, kMaxCount,
                                count));
  }
}

// Grows the buffer as data arrives, never past what the file can hold (max_stream_bytes), so a header announcing
// far more than the file holds ends in a DataError about the missing bytes, after allocating no more than the
// file could fill.
std::vector<std::uint8_t> read_payload(IdxReader& in, std::int64_t expected, const std::string& what,
                                       const std::string& shape) {
  const std::int64_t can_hold = std::min(expected, in.max_stream_bytes());
  std::vector<std::uint8_t> data;
  data.reserve(static_cast<std::size_t>(std::min(can_hold, kMaxReserve)));
  std::int64_t total = 0;
  while (total < expected) {
    // Past what the file can hold, one byte more shows the data missing (a read of it returns nothing).
    const std::int64_t want = std::min({expected - total, kReadChunk, std::max<std::int64_t>(can_hold - total, 1)});
    data.resize(static_cast<std::size_t>(total + want));
    const std::int64_t got = in.read(data.data() + total, want);
    total += got;
    if (got < want) {
      throw DataError(fmt::format("{}: truncated data ({}), expected {} bytes of {}, got {}{}", in.name(), shape,
                                  expected, what, total, in.truncation_note()));
    }
  }
  if (!in.at_end()) {
    throw DataError(fmt::format("{}: trailing data after the {} announced by the header, expected end of file "
                                "after {} bytes of {}, got more",
                                in.name(), shape, expected, what));
  }
  return data;
}

}  // namespace

IdxImages read_idx_images(const std::filesystem::path& file) {
  IdxReader in(file);
  const auto [count, rows, cols] = read_header<3>(in, kIdxImagesMagic, "IDX unsigned-byte images");
  check_count(in, count, "image");
  if (rows == 0 || cols == 0 || std::uint64_t{rows} * cols > static_cast<std::uint64_t>(kIdxMaxImagePixels)) {
    throw DataError(fmt::format("{}: bad image size in header, expected 1..{} pixels per image, got {}x{}",
                                in.name(), kIdxMaxImagePixels, rows, cols));
  }
  IdxImages images;
  images.count = count;
  images.rows = static_cast<int>(rows);
  images.cols = static_cast<int>(cols);
  images.pixels = read_payload(in, images.count * images.rows * images.cols, "pixels",
                               fmt::format("{} images of {}x{}", count, rows, cols));
  return images;
}

std::vector<std::uint8_t> read_idx_labels(const std::filesystem::path& file) {
  IdxReader in(file);
  const auto [count] = read_header<1>(in, kIdxLabelsMagic, "IDX unsigned-byte labels");
  check_count(in, count, "label");
  return read_payload(in, count, "labels", fmt::format("{} labels", count));
}

}  // namespace dtnn::io
