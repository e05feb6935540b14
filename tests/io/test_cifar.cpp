// SPDX-License-Identifier: Apache-2.0
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "io/cifar.hpp"
#include "io/io_test_util.hpp"
#include "core/errors.hpp"

namespace dtnn::io {
namespace {

namespace fs = std::filesystem;
using namespace test_util;  // NOLINT(google-build-using-namespace)

// A pixel value that differs between neighbouring records, channels, rows and columns, so that any
// transposition or off-by-one in the reader changes some value.
std::uint8_t pixel(int id, int c, int y, int x) {
  return static_cast<std::uint8_t>((id * 37 + c * 101 + y * 13 + x * 3) & 0xff);
}

void append_pixels(Bytes& out, int id) {
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 32; ++y) {
      for (int x = 0; x < 32; ++x) {
        out.push_back(pixel(id, c, y, x));
      }
    }
  }
}

struct Record10 {
  int label;
  int id;  // selects the pixels
};

Bytes cifar10_file(const std::vector<Record10>& records) {
  Bytes out;
  for (const auto& r : records) {
    out.push_back(static_cast<std::uint8_t>(r.label));
    append_pixels(out, r.id);
  }
  return out;
}

struct Record100 {
  int coarse;
  int fine;
  int id;
};

Bytes cifar100_file(const std::vector<Record100>& records) {
  Bytes out;
  for (const auto& r : records) {
    out.push_back(static_cast<std::uint8_t>(r.coarse));
    out.push_back(static_cast<std::uint8_t>(r.fine));
    append_pixels(out, r.id);
  }
  return out;
}

// Checks sample `index` of d against the pixels of record `id`, element by element in NCHW order.
::testing::AssertionResult holds_record(const Dataset& d, std::int64_t index, int id) {
  const float* sample = d.images.data() + index * d.sample_elements();
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 32; ++y) {
      for (int x = 0; x < 32; ++x) {
        const float expected = static_cast<float>(pixel(id, c, y, x)) / 255.0f;
        const float got = sample[(c * 32 + y) * 32 + x];
        if (got != expected) {
          return ::testing::AssertionFailure()
                 << "sample " << index << " [" << c << "][" << y << "][" << x << "] = " << got << ", expected "
                 << expected << " (record " << id << ")";
        }
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// Five training batches of three records (ids 0..14) and a test batch of two (ids 100, 101).
void write_cifar10_dir(const TempDir& dir) {
  for (int b = 0; b < 5; ++b) {
    std::vector<Record10> records;
    for (int r = 0; r < 3; ++r) {
      const int id = b * 3 + r;
      records.push_back({(id * 7) % 10, id});
    }
    write_file(dir / fmt::format("data_batch_{}.bin", b + 1), cifar10_file(records));
  }
  write_file(dir / "test_batch.bin", cifar10_file({{9, 100}, {0, 101}}));
}

void write_cifar100_dir(const TempDir& dir) {
  write_file(dir / "train.bin", cifar100_file({{19, 99, 0}, {0, 0, 1}, {7, 42, 2}}));
  write_file(dir / "test.bin", cifar100_file({{3, 58, 100}}));
}

TEST(ReadCifar10FileTest, ScalesPixelsAndKeepsLabels) {
  TempDir dir;
  Bytes bytes = cifar10_file({{3, 0}, {9, 1}});
  bytes[1] = 0;
  bytes[2] = 255;
  write_file(dir / "batch.bin", bytes);
  const Dataset d = read_cifar10_file(dir / "batch.bin", "toy");
  EXPECT_EQ(d.name, "toy");
  EXPECT_EQ(d.size(), 2);
  EXPECT_EQ(d.channels, 3);
  EXPECT_EQ(d.height, 32);
  EXPECT_EQ(d.width, 32);
  EXPECT_EQ(d.classes, 10);
  ASSERT_EQ(d.images.size(), 2u * 3072u);
  EXPECT_EQ(d.labels, (std::vector<std::int32_t>{3, 9}));
  EXPECT_EQ(d.images[0], 0.0f);
  EXPECT_EQ(d.images[1], 1.0f);
  EXPECT_TRUE(holds_record(d, 1, 1));
}

TEST(LoadCifar10Test, ConcatenatesTheBatchesInOrder) {
  TempDir dir;
  write_cifar10_dir(dir);
  const TrainTest data = load_cifar10(dir.path());
  EXPECT_EQ(data.train.name, "cifar10/train");
  EXPECT_EQ(data.test.name, "cifar10/test");
  ASSERT_EQ(data.train.size(), 15);
  ASSERT_EQ(data.test.size(), 2);
  for (const Dataset* d : {&data.train, &data.test}) {
    EXPECT_EQ(d->channels, 3);
    EXPECT_EQ(d->height, 32);
    EXPECT_EQ(d->width, 32);
    EXPECT_EQ(d->classes, 10);
    EXPECT_EQ(d->images.size(), static_cast<std::size_t>(d->size() * 3072));
  }
  for (int id = 0; id < 15; ++id) {
    EXPECT_EQ(data.train.labels[static_cast<std::size_t>(id)], (id * 7) % 10) << id;
    EXPECT_TRUE(holds_record(data.train, id, id));
  }
  EXPECT_EQ(data.test.labels, (std::vector<std::int32_t>{9, 0}));
  EXPECT_TRUE(holds_record(data.test, 0, 100));
  EXPECT_TRUE(holds_record(data.test, 1, 101));
}

TEST(LoadCifar10Test, MissingFileListsTheExpectedFiles) {
  TempDir dir;
  write_cifar10_dir(dir);
  fs::remove(dir / "data_batch_3.bin");
  EXPECT_TRUE(throws_with<DataError>([&] { load_cifar10(dir.path()); },
                                     {dir.path().string(), "missing data_batch_3.bin", "data_batch_1.bin",
                                      "data_batch_5.bin", "test_batch.bin", "CIFAR-10"}));
}

TEST(LoadCifar10Test, EmptyDirectoryListsEveryFile) {
  TempDir dir;
  EXPECT_TRUE(throws_with<DataError>(
      [&] { load_cifar10(dir.path()); },
      {"missing data_batch_1.bin, data_batch_2.bin, data_batch_3.bin, data_batch_4.bin, data_batch_5.bin, "
       "test_batch.bin"}));
}

TEST(LoadCifar10Test, PartialRecordNamesFileAndSize) {
  TempDir dir;
  write_cifar10_dir(dir);
  Bytes bytes = cifar10_file(std::vector<Record10>(10, {1, 0}));
  bytes.push_back(0);
  write_file(dir / "data_batch_2.bin", bytes);
  const std::string file = (dir / "data_batch_2.bin").string();
  EXPECT_TRUE(throws_with<DataError>(
      [&] { load_cifar10(dir.path()); },
      {file + ": 30731 bytes is not a whole number of 3073-byte CIFAR-10 records"}));
}

TEST(LoadCifar10Test, BadTestFileIsReportedLikeATrainingFile) {
  TempDir dir;
  write_cifar10_dir(dir);
  write_file(dir / "test_batch.bin", Bytes(3072, 0));
  EXPECT_TRUE(throws_with<DataError>([&] { load_cifar10(dir.path()); },
                                     {(dir / "test_batch.bin").string(), "3072 bytes", "3073-byte"}));
}

TEST(ReadCifar10FileTest, EmptyFile) {
  TempDir dir;
  write_file(dir / "empty.bin", {});
  EXPECT_TRUE(throws_with<DataError>([&] { read_cifar10_file(dir / "empty.bin", "toy"); },
                                     {(dir / "empty.bin").string(), "empty", "3073-byte", "got 0 bytes"}));
}

TEST(ReadCifar10FileTest, LabelOutOfRangeNamesFileRecordAndValue) {
  TempDir dir;
  write_file(dir / "batch.bin", cifar10_file({{0, 0}, {9, 1}, {10, 2}}));
  EXPECT_TRUE(throws_with<DataError>(
      [&] { read_cifar10_file(dir / "batch.bin", "toy"); },
      {(dir / "batch.bin").string(), "label of record 2 out of range, expected 0..9, got 10"}));
}

TEST(ReadCifar10FileTest, LabelOutOfRangePastTheFirstReadChunk) {
  TempDir dir;
  std::vector<Record10> records(600, {5, 3});
  records[555].label = 255;
  write_file(dir / "batch.bin", cifar10_file(records));
  EXPECT_TRUE(throws_with<DataError>([&] { read_cifar10_file(dir / "batch.bin", "toy"); },
                                     {"record 555", "got 255"}));
}

TEST(ReadCifar10FileTest, ManyRecordsAcrossReadChunks) {
  TempDir dir;
  std::vector<Record10> records;
  for (int i = 0; i < 1100; ++i) {
    records.push_back({i % 10, i});
  }
  write_file(dir / "batch.bin", cifar10_file(records));
  const Dataset d = read_cifar10_file(dir / "batch.bin", "toy");
  ASSERT_EQ(d.size(), 1100);
  for (int i : {0, 511, 512, 513, 1023, 1024, 1099}) {
    EXPECT_EQ(d.labels[static_cast<std::size_t>(i)], i % 10);
    EXPECT_TRUE(holds_record(d, i, i));
  }
}

TEST(ReadCifar10FileTest, UnreadableFiles) {
  TempDir dir;
  EXPECT_TRUE(throws_with<DataError>([&] { read_cifar10_file(dir / "absent.bin", "toy"); },
                                     {(dir / "absent.bin").string(), "no such file"}));
  fs::create_directory(dir / "folder.bin");
  EXPECT_TRUE(throws_with<DataError>([&] { read_cifar10_file(dir / "folder.bin", "toy"); },
                                     {(dir / "folder.bin").string(), "expected a regular file, got a directory"}));
}

// The check of ReadCifar10FileTest.PermissionDenied as `user` (by name) in a child process, which root can become:
// whether it passed, then its message. Empty when the child could not become the user.
std::string check_as_user(const char* user, const std::function<::testing::AssertionResult()>& check) {
  const passwd* pw = ::getpwnam(user);
  if (pw == nullptr) return "";
  const uid_t uid = pw->pw_uid;
  const gid_t gid = pw->pw_gid;
  int fds[2];
  if (::pipe(fds) != 0) return "";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string result;
    if (::setgroups(0, nullptr) == 0 && ::setgid(gid) == 0 && ::setuid(uid) == 0) {
      const ::testing::AssertionResult r = check();
      result = (r ? "1" : "0") + std::string(r.message());
    }
    ssize_t written = 0;
    while (written < static_cast<ssize_t>(result.size())) {
      const ssize_t n = ::write(fds[1], result.data() + written, result.size() - static_cast<std::size_t>(written));
      if (n <= 0) break;
      written += n;
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string result;
  char buf[512];
  ssize_t n = 0;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0) result.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  if (pid > 0) ::waitpid(pid, nullptr, 0);
  return result;
}

// Root reads files whatever their permissions: as root the read runs in a child process that became the
// unprivileged user nobody.
TEST(ReadCifar10FileTest, PermissionDenied) {
  TempDir dir;
  write_file(dir / "locked.bin", cifar10_file({{1, 0}}));
  fs::permissions(dir / "locked.bin", fs::perms::none);
  const auto check = [&] {
    return throws_with<DataError>([&] { read_cifar10_file(dir / "locked.bin", "toy"); },
                                  {(dir / "locked.bin").string(), "cannot open", "ermission denied"});
  };
  if (::geteuid() != 0) {
    EXPECT_TRUE(check());
    return;
  }
  // nobody must reach the file: the folder open to all (the file itself stays closed to all).
  fs::permissions(dir.path(), fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  const std::string result = check_as_user("nobody", check);
  if (result.empty()) GTEST_SKIP() << "root could not become the user nobody here";
  EXPECT_EQ(result[0], '1') << "as nobody: " << result.substr(1);
}

TEST(LoadCifar100Test, FineLabelsByDefault) {
  TempDir dir;
  write_cifar100_dir(dir);
  const TrainTest data = load_cifar100(dir.path());
  EXPECT_EQ(data.train.name, "cifar100/train");
  EXPECT_EQ(data.test.name, "cifar100/test");
  EXPECT_EQ(data.train.classes, 100);
  EXPECT_EQ(data.test.classes, 100);
  EXPECT_EQ(data.train.labels, (std::vector<std::int32_t>{99, 0, 42}));
  EXPECT_EQ(data.test.labels, (std::vector<std::int32_t>{58}));
  EXPECT_EQ(data.train.channels, 3);
  EXPECT_EQ(data.train.height, 32);
  EXPECT_EQ(data.train.width, 32);
  for (int id = 0; id < 3; ++id) {
    EXPECT_TRUE(holds_record(data.train, id, id));
  }
  EXPECT_TRUE(holds_record(data.test, 0, 100));
}

TEST(LoadCifar100Test, CoarseLabels) {
  TempDir dir;
  write_cifar100_dir(dir);
  const TrainTest data = load_cifar100(dir.path(), CifarLabels::kCoarse);
  EXPECT_EQ(data.train.name, "cifar100-coarse/train");
  EXPECT_EQ(data.test.name, "cifar100-coarse/test");
  EXPECT_EQ(data.train.classes, 20);
  EXPECT_EQ(data.train.labels, (std::vector<std::int32_t>{19, 0, 7}));
  EXPECT_EQ(data.test.labels, (std::vector<std::int32_t>{3}));
  EXPECT_TRUE(holds_record(data.train, 2, 2));
  EXPECT_TRUE(holds_record(data.test, 0, 100));
}

TEST(LoadCifar100Test, MissingFileListsTheExpectedFiles) {
  TempDir dir;
  write_cifar100_dir(dir);
  fs::remove(dir / "test.bin");
  EXPECT_TRUE(throws_with<DataError>([&] { load_cifar100(dir.path(), CifarLabels::kFine); },
                                     {dir.path().string(), "missing test.bin", "train.bin, test.bin",
                                      "CIFAR-100"}));
}

TEST(ReadCifar100FileTest, Cifar10FileIsNotWholeRecords) {
  TempDir dir;
  write_file(dir / "train.bin", cifar10_file({{1, 0}, {2, 1}, {3, 2}}));
  EXPECT_TRUE(throws_with<DataError>(
      [&] { read_cifar100_file(dir / "train.bin", CifarLabels::kFine, "toy"); },
      {(dir / "train.bin").string() + ": 9219 bytes is not a whole number of 3074-byte CIFAR-100 records"}));
}

TEST(ReadCifar100FileTest, FineLabelOutOfRange) {
  TempDir dir;
  write_file(dir / "train.bin", cifar100_file({{0, 0, 0}, {1, 100, 1}}));
  EXPECT_TRUE(throws_with<DataError>(
      [&] { read_cifar100_file(dir / "train.bin", CifarLabels::kFine, "toy"); },
      {(dir / "train.bin").string(), "fine label of record 1 out of range, expected 0..99, got 100"}));
}

TEST(ReadCifar100FileTest, CoarseLabelCheckedEvenWhenFineIsKept) {
  TempDir dir;
  write_file(dir / "train.bin", cifar100_file({{20, 5, 0}}));
  for (const CifarLabels labels : {CifarLabels::kFine, CifarLabels::kCoarse}) {
    EXPECT_TRUE(throws_with<DataError>(
        [&] { read_cifar100_file(dir / "train.bin", labels, "toy"); },
        {(dir / "train.bin").string(), "coarse label of record 0 out of range, expected 0..19, got 20"}));
  }
}

}  // namespace
}  // namespace dtnn::io
