// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "io/dataset.hpp"
#include "io/io_test_util.hpp"
#include "core/errors.hpp"
#include "support/environment.hpp"

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

Bytes images_file(std::uint32_t count, std::uint32_t rows, std::uint32_t cols, const Bytes& pixels) {
  Bytes out;
  put_u32(out, 0x00000803);
  put_u32(out, count);
  put_u32(out, rows);
  put_u32(out, cols);
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

// Sample i holds the value i / 1000 everywhere, so a subset reveals which samples it copied.
Dataset indexed_dataset(const std::vector<std::int32_t>& labels, int classes) {
  Dataset d;
  d.name = "indexed";
  d.channels = 2;
  d.height = 1;
  d.width = 3;
  d.classes = classes;
  d.labels = labels;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    d.images.insert(d.images.end(), 6, static_cast<float>(i) / 1000.0f);
  }
  return d;
}

std::vector<std::int64_t> source_indices(const Dataset& subset) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < subset.size(); ++i) {
    out.push_back(std::lround(subset.images[static_cast<std::size_t>(i * subset.sample_elements())] * 1000.0f));
  }
  return out;
}

std::vector<std::int64_t> class_counts(const Dataset& d) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(d.classes), 0);
  for (const auto label : d.labels) {
    ++counts.at(static_cast<std::size_t>(label));
  }
  return counts;
}

// Restores the variable on scope exit so that one test's setting never leaks into the next.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
    }
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(LoadIdxDatasetTest, ScalesPixelsAndKeepsLabels) {
  TempDir dir;
  const Bytes pixels = {0, 255, 128, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  write_file(dir / "images.gz", images_file(2, 2, 3, pixels));
  write_file(dir / "labels", labels_file({7, 2}));
  const Dataset d = load_idx_dataset(dir / "images.gz", dir / "labels", "toy/train", 10);
  EXPECT_EQ(d.name, "toy/train");
  EXPECT_EQ(d.size(), 2);
  EXPECT_EQ(d.channels, 1);
  EXPECT_EQ(d.height, 2);
  EXPECT_EQ(d.width, 3);
  EXPECT_EQ(d.classes, 10);
  EXPECT_EQ(d.sample_elements(), 6);
  ASSERT_EQ(d.images.size(), pixels.size());
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    EXPECT_FLOAT_EQ(d.images[i], static_cast<float>(pixels[i]) / 255.0f) << i;
  }
  EXPECT_EQ(d.images[0], 0.0f);
  EXPECT_EQ(d.images[1], 1.0f);
  EXPECT_EQ(d.labels, (std::vector<std::int32_t>{7, 2}));
}

TEST(LoadIdxDatasetTest, CountMismatchNamesBothFiles) {
  TempDir dir;
  const auto images = dir / "images";
  const auto labels = dir / "labels.gz";
  write_file(images, images_file(5, 1, 1, Bytes(5, 0)));
  write_file(labels, labels_file({1, 2, 3, 4}));
  EXPECT_TRUE(throws_with<DataError>([&] { load_idx_dataset(images, labels, "toy", 10); },
                                     {images.string(), labels.string(), "expected 5 labels, got 4"}));
}

TEST(LoadIdxDatasetTest, LabelOutOfRange) {
  TempDir dir;
  const auto images = dir / "images";
  const auto labels = dir / "labels";
  write_file(images, images_file(5, 1, 1, Bytes(5, 0)));
  write_file(labels, labels_file({1, 9, 10, 3, 12}));
  EXPECT_TRUE(throws_with<DataError>([&] { load_idx_dataset(images, labels, "toy", 10); },
                                     {labels.string(), "index 2", "expected 0..9, got 10"}));
  EXPECT_NO_THROW(load_idx_dataset(images, labels, "toy", 13));
}

TEST(LoadIdxDatasetTest, RejectsClassCountBelowOne) {
  TempDir dir;
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { load_idx_dataset(dir / "i", dir / "l", "toy", 0); }, {"got 0"}));
}

TEST(LoadMnistLikeTest, MixesRawAndGzipFiles) {
  TempDir dir;
  write_file(dir / "train-images-idx3-ubyte", images_file(3, 4, 4, Bytes(48, 51)));
  write_file(dir / "train-labels-idx1-ubyte.gz", labels_file({0, 1, 9}));
  write_file(dir / "t10k-images-idx3-ubyte.gz", images_file(2, 4, 4, Bytes(32, 255)));
  write_file(dir / "t10k-labels-idx1-ubyte", labels_file({5, 4}));
  const TrainTest data = load_mnist_like(dir.path(), "toy");
  EXPECT_EQ(data.train.name, "toy/train");
  EXPECT_EQ(data.test.name, "toy/test");
  EXPECT_EQ(data.train.size(), 3);
  EXPECT_EQ(data.test.size(), 2);
  EXPECT_EQ(data.train.classes, 10);
  EXPECT_EQ(data.test.height, 4);
  EXPECT_FLOAT_EQ(data.train.images[0], 0.2f);
  EXPECT_EQ(data.test.images[31], 1.0f);
  EXPECT_EQ(data.test.labels, (std::vector<std::int32_t>{5, 4}));
}

TEST(LoadMnistLikeTest, MissingFileListsThePathsTried) {
  TempDir dir;
  write_file(dir / "train-images-idx3-ubyte", images_file(1, 1, 1, Bytes{0}));
  write_file(dir / "train-labels-idx1-ubyte", labels_file({0}));
  write_file(dir / "t10k-labels-idx1-ubyte", labels_file({0}));
  EXPECT_TRUE(throws_with<DataError>([&] { load_mnist_like(dir.path(), "toy"); },
                                     {(dir / "t10k-images-idx3-ubyte").string(),
                                      (dir / "t10k-images-idx3-ubyte.gz").string()}));
}

TEST(LoadMnistLikeTest, TestShapeMustMatchTrain) {
  TempDir dir;
  write_file(dir / "train-images-idx3-ubyte", images_file(1, 2, 2, Bytes(4, 0)));
  write_file(dir / "train-labels-idx1-ubyte", labels_file({0}));
  write_file(dir / "t10k-images-idx3-ubyte", images_file(1, 3, 3, Bytes(9, 0)));
  write_file(dir / "t10k-labels-idx1-ubyte", labels_file({0}));
  EXPECT_TRUE(throws_with<DataError>([&] { load_mnist_like(dir.path(), "toy"); },
                                     {(dir / "t10k-images-idx3-ubyte").string(), "3x3", "expected the 2x2"}));
}

TEST(DefaultFashionMnistDirTest, EnvironmentOverridesThePackagePath) {
  {
    ScopedEnv env("DTNN_FASHION_MNIST_DIR", nullptr);
    EXPECT_EQ(default_fashion_mnist_dir(), fs::path("/usr/share/datasets/fashion-mnist"));
  }
  {
    ScopedEnv env("DTNN_FASHION_MNIST_DIR", "");
    EXPECT_EQ(default_fashion_mnist_dir(), fs::path("/usr/share/datasets/fashion-mnist"));
  }
  {
    ScopedEnv env("DTNN_FASHION_MNIST_DIR", "/data/fmnist");
    EXPECT_EQ(default_fashion_mnist_dir(), fs::path("/data/fmnist"));
  }
}

TEST(SubsetTest, CopiesAContiguousRange) {
  const Dataset d = indexed_dataset({0, 1, 2, 0, 1, 2, 0, 1}, 3);
  const Dataset s = d.subset(2, 4);
  EXPECT_EQ(s.size(), 4);
  EXPECT_EQ(s.channels, 2);
  EXPECT_EQ(s.width, 3);
  EXPECT_EQ(s.classes, 3);
  EXPECT_EQ(s.images.size(), 4u * 6u);
  EXPECT_EQ(source_indices(s), (std::vector<std::int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(s.labels, (std::vector<std::int32_t>{2, 0, 1, 2}));
  EXPECT_NE(s.name.find("indexed"), std::string::npos);

  EXPECT_EQ(d.subset(0, 8).images, d.images);
  EXPECT_EQ(d.subset(8, 0).size(), 0);
  EXPECT_EQ(source_indices(d.subset(7, 1)), (std::vector<std::int64_t>{7}));
}

TEST(SubsetTest, RejectsRangesOutsideTheDataset) {
  const Dataset d = indexed_dataset({0, 1, 2, 0}, 3);
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { d.subset(-1, 2); }, {"indexed", "[0, 4)"}));
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { d.subset(3, 2); }, {"[3, 3+2)"}));
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { d.subset(5, 0); }, {"[0, 4)"}));
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { d.subset(0, -1); }, {"[0, 4)"}));
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { d.subset(1, INT64_MAX); }, {"[0, 4)"}));
}

TEST(SubsetTest, RejectsInconsistentImages) {
  Dataset d = indexed_dataset({0, 1, 2, 0}, 3);
  d.images.pop_back();
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { d.subset(0, 1); }, {"expected 24", "23"}));
}

TEST(StratifiedSubsetTest, KeepsClassProportions) {
  std::vector<std::int32_t> labels;
  for (int i = 0; i < 100; ++i) {
    labels.push_back(i % 10 < 5 ? 0 : (i % 10 < 8 ? 1 : 2));  // 50 / 30 / 20
  }
  const Dataset d = indexed_dataset(labels, 3);
  const Dataset s = d.stratified_subset(10, 42);
  EXPECT_EQ(s.size(), 10);
  EXPECT_EQ(class_counts(s), (std::vector<std::int64_t>{5, 3, 2}));
  EXPECT_EQ(class_counts(d.stratified_subset(7, 1)), (std::vector<std::int64_t>{4, 2, 1}));  // 3.5, 2.1, 1.4

  const auto indices = source_indices(s);
  EXPECT_TRUE(std::is_sorted(indices.begin(), indices.end()));
  EXPECT_EQ(std::set<std::int64_t>(indices.begin(), indices.end()).size(), indices.size());
  for (std::int64_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s.labels[static_cast<std::size_t>(i)], d.labels[static_cast<std::size_t>(indices[i])]);
  }
}

TEST(StratifiedSubsetTest, TiesInRoundingGoToLowerClasses) {
  const Dataset d = indexed_dataset({2, 1, 0}, 3);
  const Dataset s = d.stratified_subset(2, 7);
  EXPECT_EQ(class_counts(s), (std::vector<std::int64_t>{1, 1, 0}));
  EXPECT_EQ(source_indices(s), (std::vector<std::int64_t>{1, 2}));
}

TEST(StratifiedSubsetTest, IsReproducibleAndDependsOnTheSeed) {
  std::vector<std::int32_t> labels;
  for (int i = 0; i < 500; ++i) {
    labels.push_back((i * 7) % 10);
  }
  const Dataset d = indexed_dataset(labels, 10);
  const auto a = d.stratified_subset(50, 123);
  const auto b = d.stratified_subset(50, 123);
  const auto c = d.stratified_subset(50, 124);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(source_indices(a), source_indices(c));
  EXPECT_EQ(class_counts(a), std::vector<std::int64_t>(10, 5));
  // Pinned so that a change of algorithm or a platform difference shows up as a failure.
  EXPECT_EQ(source_indices(d.stratified_subset(5, 2024)), (std::vector<std::int64_t>{122, 149, 193, 240, 316}));
}

TEST(StratifiedSubsetTest, WholeAndEmptySubsets) {
  const Dataset d = indexed_dataset({0, 1, 1, 0, 2}, 3);
  const Dataset all = d.stratified_subset(5, 9);
  EXPECT_EQ(all.images, d.images);
  EXPECT_EQ(all.labels, d.labels);
  EXPECT_EQ(d.stratified_subset(0, 9).size(), 0);
}

TEST(StratifiedSubsetTest, RejectsBadArguments) {
  const Dataset d = indexed_dataset({0, 1, 1, 0, 2}, 3);
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { d.stratified_subset(6, 1); }, {"indexed", "6", "0..5"}));
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { d.stratified_subset(-1, 1); }, {"-1", "0..5"}));
  const Dataset bad = indexed_dataset({0, 1, 3}, 3);
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { bad.stratified_subset(2, 1); }, {"index 2", "0..2", "got 3"}));
}

TEST(SyntheticDatasetTest, ShapeAndRanges) {
  const Dataset d = synthetic_dataset(64, 3, 5, 7, 4, 1);
  EXPECT_EQ(d.size(), 64);
  EXPECT_EQ(d.channels, 3);
  EXPECT_EQ(d.height, 5);
  EXPECT_EQ(d.width, 7);
  EXPECT_EQ(d.classes, 4);
  EXPECT_EQ(d.images.size(), 64u * 3u * 5u * 7u);
  for (const float v : d.images) {
    ASSERT_GE(v, 0.0f);
    ASSERT_LE(v, 1.0f);
  }
  for (const auto label : d.labels) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 4);
  }
  for (const auto n : class_counts(d)) {
    EXPECT_GT(n, 0);
  }
}

TEST(SyntheticDatasetTest, DeterministicPerSeed) {
  const Dataset a = synthetic_dataset(32, 1, 4, 4, 10, 77);
  const Dataset b = synthetic_dataset(32, 1, 4, 4, 10, 77);
  const Dataset c = synthetic_dataset(32, 1, 4, 4, 10, 78);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.name, b.name);
  EXPECT_NE(a.images, c.images);
  EXPECT_NE(a.labels, c.labels);

  const Dataset larger = synthetic_dataset(40, 1, 4, 4, 10, 77);
  EXPECT_EQ(larger.subset(0, 32).images, a.images);
  EXPECT_EQ(larger.subset(0, 32).labels, a.labels);
}

TEST(SyntheticDatasetTest, PinnedValues) {
  // Seed 5489 is mt19937_64's default, whose stream starts 14514284786278117030, 4620546740167642908, ...:
  // label 0 is the first draw mod 10 and pixel 0 the top 24 bits of the second. Any machine must agree.
  const Dataset d = synthetic_dataset(4, 1, 1, 2, 10, 5489);
  EXPECT_EQ(d.labels, (std::vector<std::int32_t>{0, 2, 9, 2}));
  const std::vector<std::uint32_t> top_bits = {4202362, 11923084, 323314, 6793130, 381051, 8734942, 4600238, 9412556};
  ASSERT_EQ(d.images.size(), top_bits.size());
  for (std::size_t i = 0; i < top_bits.size(); ++i) {
    EXPECT_EQ(d.images[i], static_cast<float>(top_bits[i]) * 0x1.0p-24f) << i;
  }
}

TEST(SyntheticDatasetTest, RejectsBadArguments) {
  EXPECT_TRUE(throws_with<InvalidArgument>([] { synthetic_dataset(0, 1, 2, 2, 10, 1); }, {"got 0, 1, 2, 2, 10"}));
  EXPECT_TRUE(throws_with<InvalidArgument>([] { synthetic_dataset(4, 1, 2, 2, 0, 1); }, {"got 4, 1, 2, 2, 0"}));
  EXPECT_TRUE(throws_with<InvalidArgument>([] { synthetic_dataset(1, 64, 1024, 1024, 10, 1); },
                                           {"64x1024x1024", "at most 16777216"}));
}

TEST(FashionMnistTest, InstalledDatasetLoads) {
  const fs::path dir = default_fashion_mnist_dir();
  if (!fs::is_directory(dir)) {
    DTNN_SKIP_UNLESS_STRICT("Fashion-MNIST not installed at " << dir << " (package dataset-fashion-mnist)");
  }
  const TrainTest data = load_mnist_like(dir, "fashion-mnist");
  for (const Dataset* d : {&data.train, &data.test}) {
    EXPECT_EQ(d->channels, 1);
    EXPECT_EQ(d->height, 28);
    EXPECT_EQ(d->width, 28);
    EXPECT_EQ(d->classes, 10);
    EXPECT_EQ(static_cast<std::int64_t>(d->images.size()), d->size() * 28 * 28);
    const auto [lo, hi] = std::minmax_element(d->images.begin(), d->images.end());
    EXPECT_EQ(*lo, 0.0f);
    EXPECT_EQ(*hi, 1.0f);
  }
  EXPECT_EQ(data.train.size(), 60000);
  EXPECT_EQ(data.test.size(), 10000);
  // Fashion-MNIST is balanced: every class appears 6000 times in train and 1000 times in test.
  EXPECT_EQ(class_counts(data.train), std::vector<std::int64_t>(10, 6000));
  EXPECT_EQ(class_counts(data.test), std::vector<std::int64_t>(10, 1000));
  EXPECT_EQ(class_counts(data.train.stratified_subset(1000, 1)), std::vector<std::int64_t>(10, 100));
}

}  // namespace
}  // namespace dtnn::io
