// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the io tests: a per-test temporary directory, whole-file byte writers and readers, and the
// check for an exception's type and message (support/throws_with.hpp).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "support/throws_with.hpp"

// Not dtnn::io::testing: the tests live in dtnn::io and name gtest's ::testing unqualified.
namespace dtnn::io::test_util {

using Bytes = std::vector<std::uint8_t>;

// Each test gets its own directory so that parallel ctest runs and reruns never see each other's files.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("dtnn-io-{}-{}-{}", ::getpid(), info->test_suite_name(), info->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Writes the bytes as they are, replacing the file.
inline void write_bytes(const std::filesystem::path& file, const Bytes& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << file;
}

// Writes the bytes gzip-compressed, replacing the file.
inline void write_gz(const std::filesystem::path& file, const Bytes& bytes) {
  gzFile gz = gzopen(file.c_str(), "wb");
  ASSERT_NE(gz, nullptr) << file;
  const int written = gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size()));
  const int closed = gzclose(gz);
  ASSERT_EQ(written, static_cast<int>(bytes.size())) << file;
  ASSERT_EQ(closed, Z_OK) << file;
}

// gzip-compressed when the name ends in .gz, as is otherwise.
inline void write_file(const std::filesystem::path& file, const Bytes& bytes) {
  if (file.extension() == ".gz") {
    write_gz(file, bytes);
  } else {
    write_bytes(file, bytes);
  }
}

// The whole file as it is on disk (no decompression); empty when it cannot be read.
inline Bytes read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

using test_support::throws_with;

// Asserts a DataError whose message holds every one of the given parts.
template <class F>
void expect_data_error(F&& f, std::initializer_list<std::string> parts) {
  EXPECT_TRUE(throws_with<DataError>(std::forward<F>(f), parts));
}

}  // namespace dtnn::io::test_util
