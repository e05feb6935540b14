// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "io/idx.hpp"
#include "io/io_test_util.hpp"
#include "io/largest_allocation.hpp"
#include "core/errors.hpp"

namespace dtnn::io {
namespace {

namespace fs = std::filesystem;
using namespace test_util;  // NOLINT(google-build-using-namespace)

void put_u32(Bytes& out, std::uint32_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 24));
  out.push_back(static_cast<std::uint8_t>(v >> 16));
  out.push_back(static_cast<std::uint8_t>(v >> 8));
  out.push_back(static_cast<std::uint8_t>(v));
}

Bytes images_header(std::uint32_t count, std::uint32_t rows, std::uint32_t cols) {
  Bytes out;
  put_u32(out, 0x00000803);
  put_u32(out, count);
  put_u32(out, rows);
  put_u32(out, cols);
  return out;
}

Bytes images_file(std::uint32_t count, std::uint32_t rows, std::uint32_t cols, const Bytes& pixels) {
  Bytes out = images_header(count, rows, cols);
  out.insert(out.end(), pixels.begin(), pixels.end());
  return out;
}

Bytes labels_file(const Bytes& labels) {
  Bytes out;
  put_u32(out, 0x00000801);
  put_u32(out, static_cast<std::uint32_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

Bytes pattern(std::size_t n) {
  Bytes out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = static_cast<std::uint8_t>((i * 131 + i / 7) % 256);
  }
  return out;
}

TEST(IdxImagesTest, RoundTripRaw) {
  TempDir dir;
  const Bytes pixels = pattern(3 * 2 * 4);
  const auto file = dir / "images-idx3-ubyte";
  write_bytes(file, images_file(3, 2, 4, pixels));
  const IdxImages images = read_idx_images(file);
  EXPECT_EQ(images.count, 3);
  EXPECT_EQ(images.rows, 2);
  EXPECT_EQ(images.cols, 4);
  EXPECT_EQ(images.pixels, pixels);
}

TEST(IdxImagesTest, RoundTripGzipLargerThanOneBuffer) {
  TempDir dir;
  const Bytes pixels = pattern(2000 * 28 * 28);
  const auto file = dir / "images-idx3-ubyte.gz";
  write_gz(file, images_file(2000, 28, 28, pixels));
  const IdxImages images = read_idx_images(file);
  EXPECT_EQ(images.count, 2000);
  EXPECT_EQ(images.rows, 28);
  EXPECT_EQ(images.cols, 28);
  EXPECT_EQ(images.pixels, pixels);
}

TEST(IdxImagesTest, NonSquareImages) {
  TempDir dir;
  const Bytes pixels = pattern(5 * 3 * 7);
  const auto file = dir / "images.gz";
  write_gz(file, images_file(5, 3, 7, pixels));
  const IdxImages images = read_idx_images(file);
  EXPECT_EQ(images.rows, 3);
  EXPECT_EQ(images.cols, 7);
  EXPECT_EQ(images.pixels, pixels);
}

TEST(IdxLabelsTest, RoundTripRawAndGzip) {
  TempDir dir;
  const Bytes labels = {0, 9, 3, 3, 255, 1, 7};
  write_bytes(dir / "labels", labels_file(labels));
  write_gz(dir / "labels.gz", labels_file(labels));
  EXPECT_EQ(read_idx_labels(dir / "labels"), labels);
  EXPECT_EQ(read_idx_labels(dir / "labels.gz"), labels);
}

TEST(IdxErrorsTest, MissingFile) {
  TempDir dir;
  const auto file = dir / "absent-idx3-ubyte.gz";
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_images(file); }, {file.string(), "no such file"}));
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_labels(file); }, {file.string(), "no such file"}));
}

TEST(IdxErrorsTest, DirectoryInsteadOfFile) {
  TempDir dir;
  const auto file = dir / "subdir";
  fs::create_directory(file);
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_images(file); }, {file.string(), "directory"}));
}

TEST(IdxErrorsTest, LabelsFileReadAsImages) {
  TempDir dir;
  const auto file = dir / "train-labels-idx1-ubyte.gz";
  write_gz(file, labels_file({1, 2, 3}));
  EXPECT_TRUE(throws_with<DataError>(
      [&] { read_idx_images(file); },
      {file.string(), "bad magic number, expected 0x00000803 (IDX unsigned-byte images), got 0x00000801"}));
}

TEST(IdxErrorsTest, ImagesFileReadAsLabels) {
  TempDir dir;
  const auto file = dir / "train-images-idx3-ubyte";
  write_bytes(file, images_file(1, 2, 2, pattern(4)));
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_labels(file); },
                                     {file.string(), "expected 0x00000801", "got 0x00000803"}));
}

TEST(IdxErrorsTest, NotAnIdxFile) {
  TempDir dir;
  const auto file = dir / "notes.txt";
  write_bytes(file, Bytes{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!', '!', '!', '!', '!'});
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_images(file); },
                                     {file.string(), "expected 0x00000803", "got 0x68656c6c", "not an IDX file"}));
}

TEST(IdxErrorsTest, CompressedTwice) {
  TempDir dir;
  const auto inner = dir / "inner.gz";
  write_gz(inner, images_file(1, 2, 2, pattern(4)));
  const auto file = dir / "twice.gz";
  write_gz(file, read_bytes(inner));
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_images(file); },
                                     {file.string(), "got 0x1f8b08", "compressed twice"}));
}

TEST(IdxErrorsTest, TruncatedHeader) {
  TempDir dir;
  Bytes header = images_header(10, 28, 28);
  header.resize(9);
  const auto file = dir / "short-header";
  write_bytes(file, header);
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_images(file); },
                                     {file.string(), "truncated header, expected 16 bytes, got 9"}));

  const auto tiny = dir / "tiny.gz";
  write_gz(tiny, Bytes{0, 0});
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_labels(tiny); },
                                     {tiny.string(), "truncated header, expected 8 bytes, got 2"}));

  const auto empty = dir / "empty";
  write_bytes(empty, Bytes{});
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_labels(empty); },
                                     {empty.string(), "expected 8 bytes, got 0"}));
}

TEST(IdxErrorsTest, TruncatedPixels) {
  TempDir dir;
  for (const bool gzip : {false, true}) {
    const auto file = dir / (gzip ? "train-images-idx3-ubyte.gz" : "train-images-idx3-ubyte");
    const Bytes bytes = images_file(60000, 28, 28, pattern(1000));
    gzip ? write_gz(file, bytes) : write_bytes(file, bytes);
    EXPECT_TRUE(throws_with<DataError>([&] { read_idx_images(file); },
                                       {file.string(), "expected 47040000 bytes of pixels, got 1000"}));
  }
}

TEST(IdxErrorsTest, TruncatedLabels) {
  TempDir dir;
  Bytes bytes = labels_file(Bytes(100, 1));
  bytes.resize(bytes.size() - 40);
  const auto file = dir / "labels.gz";
  write_gz(file, bytes);
  EXPECT_TRUE(
      throws_with<DataError>([&] { read_idx_labels(file); }, {file.string(), "expected 100 bytes of labels, got 60"}));
}

TEST(IdxErrorsTest, GzipStreamCutShort) {
  TempDir dir;
  const auto whole = dir / "whole.gz";
  // Incompressible-looking content keeps the compressed stream long enough to cut in the middle of the data.
  Bytes pixels(50 * 28 * 28);
  std::uint32_t state = 12345;
  for (auto& p : pixels) {
    state = state * 1664525u + 1013904223u;
    p = static_cast<std::uint8_t>(state >> 24);
  }
  write_gz(whole, images_file(50, 28, 28, pixels));
  Bytes compressed = read_bytes(whole);
  compressed.resize(compressed.size() / 2);
  const auto file = dir / "cut.gz";
  write_bytes(file, compressed);
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_images(file); },
                                     {file.string(), "expected 39200 bytes of pixels, got", "cut short"}));
}

TEST(IdxErrorsTest, GzipTrailerMissing) {
  TempDir dir;
  const auto whole = dir / "whole.gz";
  write_gz(whole, labels_file({1, 2, 3, 4}));
  Bytes compressed = read_bytes(whole);
  compressed.resize(compressed.size() - 8);  // CRC-32 and length
  const auto file = dir / "no-trailer.gz";
  write_bytes(file, compressed);
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_labels(file); }, {file.string(), "corrupt gzip stream"}));
}

TEST(IdxErrorsTest, GzipChecksumMismatch) {
  TempDir dir;
  const auto whole = dir / "whole.gz";
  write_gz(whole, images_file(4, 3, 3, pattern(36)));
  Bytes compressed = read_bytes(whole);
  compressed[compressed.size() - 8] ^= 0x5a;  // first byte of the CRC-32 in the trailer
  const auto file = dir / "bad-crc.gz";
  write_bytes(file, compressed);
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_images(file); },
                                     {file.string(), "corrupt gzip stream", "incorrect data check"}));
}

TEST(IdxErrorsTest, GzipInvalidDeflateData) {
  TempDir dir;
  const auto whole = dir / "whole.gz";
  write_gz(whole, labels_file({1, 2, 3}));
  Bytes compressed = read_bytes(whole);
  // After the 10-byte gzip header, all-ones bits announce deflate block type 3, which does not exist.
  std::fill(compressed.begin() + 10, compressed.end(), std::uint8_t{0xff});
  const auto file = dir / "garbage.gz";
  write_bytes(file, compressed);
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_labels(file); },
                                     {file.string(), "corrupt gzip stream", "invalid block type"}));
}

TEST(IdxErrorsTest, ZeroDimensions) {
  TempDir dir;
  const auto no_rows = dir / "no-rows";
  write_bytes(no_rows, images_header(10, 0, 28));
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_images(no_rows); },
                                     {no_rows.string(), "expected 1..16777216 pixels per image, got 0x28"}));

  const auto no_images = dir / "no-images";
  write_bytes(no_images, images_header(0, 28, 28));
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_images(no_images); },
                                     {no_images.string(), "image count", "expected 1..2147483647, got 0"}));

  const auto no_labels = dir / "no-labels";
  write_bytes(no_labels, labels_file({}));
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_labels(no_labels); },
                                     {no_labels.string(), "label count", "got 0"}));
}

TEST(IdxErrorsTest, AbsurdDimensions) {
  TempDir dir;
  const auto huge = dir / "huge.gz";
  write_gz(huge, images_header(1, 5000, 5000));
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_images(huge); },
                                     {huge.string(), "expected 1..16777216 pixels per image, got 5000x5000"}));

  const auto overflow = dir / "overflow";
  write_bytes(overflow, images_header(1, 0xffffffffu, 0xffffffffu));
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_images(overflow); },
                                     {overflow.string(), "got 4294967295x4294967295"}));

  const auto many = dir / "many";
  write_bytes(many, images_header(0x80000000u, 1, 1));
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_images(many); }, {many.string(), "got 2147483648"}));
}

TEST(IdxErrorsTest, HeaderAnnouncingHugeDataFailsWithoutAllocatingIt) {
  TempDir dir;
  const auto file = dir / "liar";
  // 2^31-1 images of 4096x4096 would be 32 PiB: the reader must report the missing data, not try to allocate.
  write_bytes(file, images_file(0x7fffffffu, 4096, 4096, pattern(100)));
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_images(file); },
                                     {file.string(), "expected 36028797002186752 bytes of pixels, got 100"}));
}

// Found by fuzz_idx: 76 bytes announcing 16776963 images of 4x5 had the reader reserve 256 MiB before reading a
// byte of them. Raw or compressed, it allocates no more than the file could hold (deflate: 1032 times its size).
TEST(IdxErrorsTest, HeaderAnnouncingMoreThanTheFileHoldsAllocatesNoMoreThanTheFile) {
  TempDir dir;
  const Bytes bytes = images_file(0x00ffff03u, 4, 5, pattern(60));
  ASSERT_EQ(bytes.size(), 76u);
  for (const bool gzip : {false, true}) {
    const auto file = dir / (gzip ? "liar.gz" : "liar");
    gzip ? write_gz(file, bytes) : write_bytes(file, bytes);
    reset_largest_allocation();
    EXPECT_TRUE(throws_with<DataError>([&] { read_idx_images(file); },
                                       {file.string(), "expected 335539260 bytes of pixels, got 60"}));
    EXPECT_LE(largest_allocation(), std::size_t{1} << 20) << file;
  }
}

TEST(IdxErrorsTest, TrailingData) {
  TempDir dir;
  Bytes bytes = labels_file({1, 2, 3});
  bytes.push_back(4);
  const auto file = dir / "labels-with-extra.gz";
  write_gz(file, bytes);
  EXPECT_TRUE(throws_with<DataError>([&] { read_idx_labels(file); },
                                     {file.string(), "trailing data", "expected end of file after 3 bytes of labels"}));
}

}  // namespace
}  // namespace dtnn::io
