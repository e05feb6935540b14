// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "io/dataset.hpp"
#include "io/h5dataset.hpp"
#include "io/hdf5.hpp"
#include "io/io_test_util.hpp"
#include "core/errors.hpp"

namespace dtnn::io {
namespace {

namespace fs = std::filesystem;
using namespace test_util;  // NOLINT(google-build-using-namespace)

// Random 8-bit images (values k / 255, as the IDX and CIFAR readers produce) and labels.
Dataset byte_dataset(std::string name, int count, int channels, int height, int width, int classes,
                     std::uint64_t seed) {
  Dataset d = synthetic_dataset(count, channels, height, width, classes, seed);
  d.name = std::move(name);
  for (float& x : d.images) {
    x = std::floor(x * 256.0f) / 255.0f;
  }
  return d;
}

void expect_same(const Dataset& a, const Dataset& b) {
  EXPECT_EQ(a.channels, b.channels);
  EXPECT_EQ(a.height, b.height);
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.classes, b.classes);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.images, b.images);
}


struct SmallFile {
  Dataset train = byte_dataset("toy/train", 23, 3, 5, 4, 7, 1);
  Dataset test = byte_dataset("toy/test", 9, 3, 5, 4, 7, 2);
  std::vector<std::string> names{"ant", "bee", "cat", "dog", "eel", "fox", "gnu"};

  void write(const fs::path& file, int deflate = 4) const {
    H5DatasetOptions options;
    options.class_names = names;
    options.samples_per_chunk = 4;  // several chunks, and reads that cut them
    options.deflate_level = deflate;
    write_h5_dataset(file, TrainTest{train, test}, options);
  }
};

// ---- writing and reading whole splits ----

TEST(H5DatasetTest, RoundTripKeepsImagesLabelsAndAttributes) {
  TempDir tmp;
  const SmallFile small;
  small.write(tmp / "toy.h5");
  const Dataset train = read_h5_dataset(tmp / "toy.h5", "train");
  const Dataset test = read_h5_dataset(tmp / "toy.h5", "test");
  expect_same(train, small.train);
  expect_same(test, small.test);
  EXPECT_EQ(train.name, "toy/train");
  EXPECT_EQ(test.name, "toy/test");

  const H5DatasetInfo info = read_h5_dataset_info(tmp / "toy.h5");
  EXPECT_EQ(info.name, "toy");
  EXPECT_EQ(info.class_names, small.names);
  EXPECT_EQ(info.classes, 7);
  EXPECT_EQ(info.channels, 3);
  EXPECT_EQ(info.height, 5);
  EXPECT_EQ(info.width, 4);
  EXPECT_EQ(info.splits, (std::vector<std::string>{"train", "test"}));
  // Mean and std per channel of the training split.
  ASSERT_EQ(info.mean.size(), 3u);
  ASSERT_EQ(info.std.size(), 3u);
  for (int c = 0; c < 3; ++c) {
    double sum = 0;
    double sum_sq = 0;
    int n = 0;
    for (int i = 0; i < 23; ++i) {
      for (int p = 0; p < 20; ++p) {
        const double x = small.train.images[static_cast<std::size_t>(i * 60 + c * 20 + p)];
        sum += x;
        sum_sq += x * x;
        ++n;
      }
    }
    const double mean = sum / n;
    EXPECT_NEAR(info.mean[static_cast<std::size_t>(c)], mean, 1e-6);
    EXPECT_NEAR(info.std[static_cast<std::size_t>(c)], std::sqrt(sum_sq / n - mean * mean), 1e-5);
  }
}

TEST(H5DatasetTest, StoresUint8NHWCInChunks) {
  TempDir tmp;
  const SmallFile small;
  small.write(tmp / "toy.h5");
  const h5::File f = h5::File::open(tmp / "toy.h5", h5::FileMode::kReadOnly);
  EXPECT_EQ(f.get_string("format"), "dtnn-dataset");
  const h5::Dataset images = f.open_group("train").open_dataset("images");
  EXPECT_EQ(images.dtype(), h5::DType::kUInt8);
  EXPECT_EQ(images.shape(), (std::vector<std::int64_t>{23, 5, 4, 3}));
  EXPECT_EQ(images.chunk(), (std::vector<std::int64_t>{4, 5, 4, 3}));
  EXPECT_EQ(images.filter_count(), 2);  // deflate, Fletcher-32
  std::vector<std::uint8_t> bytes(23 * 60);
  images.read(std::span<std::uint8_t>(bytes));
  // Sample 6, row 2, column 3, channel 1 (NHWC) is element (1, 2, 3) of sample 6 in NCHW.
  EXPECT_EQ(bytes[6 * 60 + (2 * 4 + 3) * 3 + 1],
            static_cast<std::uint8_t>(std::lrint(small.train.images[6 * 60 + 1 * 20 + 2 * 4 + 3] * 255.0f)));
  EXPECT_EQ(f.open_group("train").open_dataset("labels").dtype(), h5::DType::kInt32);
}

TEST(H5DatasetTest, KnownDatasetsGetTheirClassNames) {
  TempDir tmp;
  const Dataset train = byte_dataset("fashion-mnist/train", 5, 1, 4, 4, 10, 3);
  const Dataset test = byte_dataset("fashion-mnist/test", 3, 1, 4, 4, 10, 4);
  write_h5_dataset(tmp / "f.h5", TrainTest{train, test});
  const H5DatasetInfo info = read_h5_dataset_info(tmp / "f.h5");
  EXPECT_EQ(info.name, "fashion-mnist");
  ASSERT_EQ(info.class_names.size(), 10u);
  EXPECT_EQ(info.class_names[9], "Ankle boot");
  EXPECT_EQ(known_class_names("cifar10", 10)[0], "airplane");
  EXPECT_EQ(known_class_names("other", 3), (std::vector<std::string>{"0", "1", "2"}));
  expect_same(read_h5_dataset(tmp / "f.h5", "test"), test);
}

TEST(H5DatasetTest, WriteRejectsBadInput) {
  TempDir tmp;
  const SmallFile small;
  Dataset odd = small.test;
  odd.width = 5;
  EXPECT_THROW(write_h5_dataset(tmp / "x.h5", TrainTest{small.train, odd}), InvalidArgument);
  Dataset bad_label = small.test;
  bad_label.labels[2] = 7;
  EXPECT_THROW(write_h5_dataset(tmp / "x.h5", TrainTest{small.train, bad_label}), InvalidArgument);
  Dataset empty = small.test.subset(0, 0);
  EXPECT_THROW(write_h5_dataset(tmp / "x.h5", TrainTest{small.train, empty}), InvalidArgument);
  H5DatasetOptions options;
  options.class_names = {"a", "b"};
  EXPECT_THROW(write_h5_dataset(tmp / "x.h5", TrainTest{small.train, small.test}, options), InvalidArgument);
  EXPECT_THROW(write_h5_dataset(tmp / "x.h5", {{"train", small.train}, {"train", small.test}}), InvalidArgument);
  EXPECT_FALSE(fs::exists(tmp / "x.h5"));
}

// ---- the shard reader ----

// Every sample of the split, read through the shards of a world of the given size in batches of batch.
TEST(H5DatasetReaderTest, ShardsCoverTheSplitOnceInOrder) {
  TempDir tmp;
  const SmallFile small;
  small.write(tmp / "toy.h5");
  const std::int64_t sample = 60;
  for (const int world : {1, 2, 3, 4, 5, 7, 23, 30}) {
    std::vector<float> images;
    std::vector<std::int32_t> labels;
    std::int64_t previous_size = 23;
    std::int64_t expected_begin = 0;
    for (int rank = 0; rank < world; ++rank) {
      SCOPED_TRACE(fmt::format("rank {} of {}", rank, world));
      H5DatasetReader reader(tmp / "toy.h5", rank, world);
      EXPECT_EQ(reader.split_size(), 23);
      EXPECT_EQ(reader.shard_begin(), expected_begin);
      EXPECT_LE(reader.size(), previous_size);  // larger shards first
      EXPECT_GE(reader.size(), 23 / world);
      EXPECT_LE(reader.size(), 23 / world + 1);
      previous_size = reader.size();
      expected_begin += reader.size();
      for (std::int64_t first = 0; first < reader.size(); first += 3) {
        const std::int64_t count = std::min<std::int64_t>(3, reader.size() - first);
        std::vector<float> batch(static_cast<std::size_t>(count * sample));
        std::vector<std::int32_t> batch_labels(static_cast<std::size_t>(count));
        reader.read(first, count, batch, batch_labels);
        images.insert(images.end(), batch.begin(), batch.end());
        labels.insert(labels.end(), batch_labels.begin(), batch_labels.end());
      }
    }
    EXPECT_EQ(expected_begin, 23);
    EXPECT_EQ(images, small.train.images) << "world " << world;
    EXPECT_EQ(labels, small.train.labels) << "world " << world;
  }
}

TEST(H5DatasetReaderTest, ReadsSamplesInAnyOrder) {
  TempDir tmp;
  const SmallFile small;
  small.write(tmp / "toy.h5");
  H5DatasetReader reader(tmp / "toy.h5", H5ReaderOptions{.split = "test", .rank = 1, .world = 2,
                                                          .samples_per_read = 2});
  ASSERT_EQ(reader.size(), 4);  // samples 5..8 of 9
  ASSERT_EQ(reader.shard_begin(), 5);
  const std::vector<std::int64_t> indices{3, 0, 1, 3, 2};
  std::vector<float> images(indices.size() * 60);
  std::vector<std::int32_t> labels(indices.size());
  reader.read_samples(indices, images, labels);
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const auto global = static_cast<std::size_t>(5 + indices[i]);
    EXPECT_EQ(labels[i], small.test.labels[global]);
    EXPECT_TRUE(std::equal(images.begin() + static_cast<std::ptrdiff_t>(i * 60),
                           images.begin() + static_cast<std::ptrdiff_t>((i + 1) * 60),
                           small.test.images.begin() + static_cast<std::ptrdiff_t>(global * 60)))
        << "sample " << i;
  }
}

TEST(H5DatasetReaderTest, RejectsBadArguments) {
  TempDir tmp;
  const SmallFile small;
  small.write(tmp / "toy.h5");
  EXPECT_THROW(H5DatasetReader(tmp / "toy.h5", 2, 2), InvalidArgument);
  EXPECT_THROW(H5DatasetReader(tmp / "toy.h5", 0, 0), InvalidArgument);
  H5DatasetReader reader(tmp / "toy.h5", 0, 2);
  std::vector<float> images(60);
  std::vector<std::int32_t> labels(1);
  EXPECT_THROW(reader.read(12, 1, images, labels), InvalidArgument);  // the shard holds 12
  EXPECT_THROW(reader.read(-1, 1, images, labels), InvalidArgument);
  EXPECT_THROW(reader.read(0, 2, images, labels), InvalidArgument);   // buffers for one sample
  const std::vector<std::int64_t> outside{12};
  EXPECT_THROW(reader.read_samples(outside, images, labels), InvalidArgument);
  expect_data_error([&] { H5DatasetReader(tmp / "toy.h5", H5ReaderOptions{.split = "val"}); },
                    {"toy.h5: missing split val, expected one of: train, test"});
}

// ---- ImageNet-like layout ----

TEST(H5DatasetTest, GeneratedImageNetLikeFileIsReadable) {
  TempDir tmp;
  write_synthetic_h5_dataset(tmp / "imagenet.h5");
  const H5DatasetInfo info = read_h5_dataset_info(tmp / "imagenet.h5");
  EXPECT_EQ(info.name, "imagenet-like");
  EXPECT_EQ(info.classes, 1000);
  EXPECT_EQ(info.class_names.size(), 1000u);
  EXPECT_EQ(info.channels, 3);
  EXPECT_EQ(info.height, 224);
  EXPECT_EQ(info.width, 224);
  EXPECT_NEAR(info.mean[0], 0.5, 0.01);  // uniform random bytes

  const h5::File f = h5::File::open(tmp / "imagenet.h5", h5::FileMode::kReadOnly);
  EXPECT_EQ(f.open_group("train").open_dataset("images").chunk(), (std::vector<std::int64_t>{1, 224, 224, 3}));

  const Dataset test = read_h5_dataset(tmp / "imagenet.h5", "test");
  ASSERT_EQ(test.size(), 8);
  EXPECT_EQ(test.sample_elements(), 3 * 224 * 224);
  for (const std::int32_t label : test.labels) {
    EXPECT_GE(label, 0);
    EXPECT_LT(label, 1000);
  }
  EXPECT_TRUE(std::all_of(test.images.begin(), test.images.end(), [](float x) { return x >= 0.0f && x <= 1.0f; }));

  H5DatasetReader reader(tmp / "imagenet.h5", H5ReaderOptions{.split = "test", .rank = 1, .world = 3,
                                                               .samples_per_read = 2});
  ASSERT_EQ(reader.size(), 3);  // 3, 3, 2
  std::vector<float> images(2 * 3 * 224 * 224);
  std::vector<std::int32_t> labels(2);
  reader.read(1, 2, images, labels);
  EXPECT_TRUE(std::equal(images.begin(), images.end(), test.images.begin() + 4 * 3 * 224 * 224));
  EXPECT_EQ(labels[1], test.labels[5]);

  // The same seed gives the same file content.
  write_synthetic_h5_dataset(tmp / "again.h5");
  expect_same(read_h5_dataset(tmp / "again.h5", "test"), test);
}

// ---- damaged and foreign files ----

TEST(H5DatasetTest, FilesThatAreNotDatasetsGiveClearErrors) {
  TempDir tmp;
  write_bytes(tmp / "empty.h5", {});
  expect_data_error([&] { read_h5_dataset(tmp / "empty.h5", "train"); }, {"empty.h5: not an HDF5 file"});
  const std::string text = "label,pixels\n1,0 0 0\n";
  write_bytes(tmp / "text.h5", Bytes(text.begin(), text.end()));
  expect_data_error([&] { H5DatasetReader(tmp / "text.h5", 0, 1); }, {"text.h5: not an HDF5 file"});
  expect_data_error([&] { read_h5_dataset(tmp / "none.h5", "train"); }, {"none.h5: cannot open, no such file"});
}

TEST(H5DatasetTest, MissingOrMalformedPartsAreNamed) {
  TempDir tmp;
  const SmallFile small;
  small.write(tmp / "a.h5");
  h5::File::open(tmp / "a.h5", h5::FileMode::kReadWrite).open_group("train").remove("labels");
  expect_data_error([&] { read_h5_dataset(tmp / "a.h5", "train"); }, {"a.h5: /train: missing dataset /train/labels"});

  small.write(tmp / "b.h5");
  {
    const h5::File f = h5::File::open(tmp / "b.h5", h5::FileMode::kReadWrite);
    const h5::Group g = f.open_group("test");
    g.remove("images");
    const std::vector<std::int64_t> shape{9, 5, 4, 3};
    const h5::Dataset d = g.create_dataset("images", h5::DType::kFloat32, shape);
    d.write(std::span<const float>(std::vector<float>(9 * 60, 0.5f)));
  }
  expect_data_error([&] { read_h5_dataset(tmp / "b.h5", "test"); },
                    {"b.h5: /test/images: dtype expected uint8, got float32"});

  small.write(tmp / "c.h5");
  {
    const h5::File f = h5::File::open(tmp / "c.h5", h5::FileMode::kReadWrite);
    const h5::Group g = f.open_group("test");
    g.remove("labels");
    const std::vector<std::int64_t> shape{9};
    const h5::Dataset d = g.create_dataset("labels", h5::DType::kInt32, shape);
    d.write(std::span<const std::int32_t>(std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 1}));
  }
  expect_data_error([&] { read_h5_dataset(tmp / "c.h5", "test"); },
                    {"c.h5: /test/labels: label at index 7 expected 0..6, got 7"});
  expect_data_error([&] {
    H5DatasetReader reader(tmp / "c.h5", H5ReaderOptions{.split = "test"});
    std::vector<float> images(9 * 60);
    std::vector<std::int32_t> labels(9);
    reader.read(0, 9, images, labels);
  }, {"label at index 7 expected 0..6, got 7"});

  small.write(tmp / "d.h5");
  {
    const h5::File f = h5::File::open(tmp / "d.h5", h5::FileMode::kReadWrite);
    const h5::Group g = f.open_group("test");
    g.remove("labels");
    const std::vector<std::int64_t> shape{8};
    const h5::Dataset d = g.create_dataset("labels", h5::DType::kInt32, shape);
    d.write(std::span<const std::int32_t>(std::vector<std::int32_t>(8, 0)));
  }
  expect_data_error([&] { read_h5_dataset(tmp / "d.h5", "test"); },
                    {"d.h5: /test/labels: shape expected [9] (one label per image), got [8]"});
}

TEST(H5DatasetTest, ForeignLayoutWithGrayImagesAndByteLabelsReads) {
  TempDir tmp;
  const std::vector<std::uint8_t> pixels{0, 255, 17, 34, 51, 68, 85, 102};  // 2 images of 2x2
  {
    h5::File f = h5::File::create(tmp / "foreign.h5");
    const std::vector<std::string> names{"no", "yes"};
    f.set_strings("class_names", names);
    const h5::Group g = f.create_group("train");
    const std::vector<std::int64_t> shape{2, 2, 2};
    g.create_dataset("images", h5::DType::kUInt8, shape).write(std::span<const std::uint8_t>(pixels));
    const std::vector<std::int64_t> label_shape{2};
    const std::vector<std::int32_t> labels{1, 0};
    g.create_dataset("labels", h5::DType::kUInt8, label_shape).write(std::span<const std::int32_t>(labels));
    f.close();
  }
  const Dataset d = read_h5_dataset(tmp / "foreign.h5", "train");
  EXPECT_EQ(d.name, "foreign/train");
  EXPECT_EQ(d.channels, 1);
  EXPECT_EQ(d.classes, 2);
  EXPECT_EQ(d.labels, (std::vector<std::int32_t>{1, 0}));
  EXPECT_EQ(d.images[1], 1.0f);
  EXPECT_EQ(d.images[7], 102.0f / 255.0f);
}

// Every damaged file gives a DataError or, where the damage missed everything read, the original data.
void expect_error_or_intact(const fs::path& file, const SmallFile& small, int& errors) {
  try {
    expect_same(read_h5_dataset(file, "train"), small.train);
    H5DatasetReader reader(file, H5ReaderOptions{.split = "test", .rank = 0, .world = 1});
    std::vector<float> images(9 * 60);
    std::vector<std::int32_t> labels(9);
    reader.read(0, 9, images, labels);
    EXPECT_EQ(images, small.test.images);
    EXPECT_EQ(labels, small.test.labels);
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    ++errors;
  }
}

TEST(H5DatasetTest, TruncatedFilesGiveErrors) {
  TempDir tmp;
  const SmallFile small;
  small.write(tmp / "good.h5");
  const Bytes good = read_bytes(tmp / "good.h5");
  const auto size = static_cast<std::int64_t>(good.size());
  int errors = 0;
  int cases = 0;
  for (const std::int64_t cut : {std::int64_t{3}, std::int64_t{8}, std::int64_t{47}, std::int64_t{300}, size / 5,
                                 size / 2, 4 * size / 5, size - 100, size - 1}) {
    SCOPED_TRACE(fmt::format("cut at {} of {}", cut, size));
    write_bytes(tmp / "cut.h5", Bytes(good.begin(), good.begin() + cut));
    testing::internal::CaptureStderr();
    expect_error_or_intact(tmp / "cut.h5", small, errors);
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    ++cases;
  }
  EXPECT_EQ(errors, cases);
}

TEST(H5DatasetTest, FlippedBytesGiveErrors) {
  TempDir tmp;
  const SmallFile small;
  small.write(tmp / "good.h5");
  const Bytes good = read_bytes(tmp / "good.h5");
  std::mt19937_64 rng(11);
  int errors = 0;
  int cases = 0;
  for (int i = 0; i < 60; ++i) {
    const std::size_t offset = i < 4 ? static_cast<std::size_t>(i * 11) : static_cast<std::size_t>(rng() % good.size());
    SCOPED_TRACE(fmt::format("byte {} of {} flipped", offset, good.size()));
    Bytes bad = good;
    bad[offset] = static_cast<std::uint8_t>(bad[offset] ^ 0x21);
    write_bytes(tmp / "bad.h5", bad);
    testing::internal::CaptureStderr();
    expect_error_or_intact(tmp / "bad.h5", small, errors);
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    ++cases;
  }
  EXPECT_GE(errors, cases * 3 / 4) << errors << " of " << cases;
}

}  // namespace
}  // namespace dtnn::io
