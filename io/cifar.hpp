// SPDX-License-Identifier: Apache-2.0
// Readers for the "binary version" of CIFAR-10 and CIFAR-100. Each record holds its label byte(s) and a
// 3x32x32 image already in channel-major order (1024 R, 1024 G, 1024 B bytes, each plane row-major), so the
// pixels map straight onto one NCHW sample. Every failure is a dtnn::DataError naming the file, the value
// found and the value expected.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "io/dataset.hpp"

namespace dtnn::io {

inline constexpr int kCifarChannels = 3;
inline constexpr int kCifarHeight = 32;
inline constexpr int kCifarWidth = 32;
inline constexpr std::int64_t kCifarPixelBytes = std::int64_t{kCifarChannels} * kCifarHeight * kCifarWidth;
inline constexpr std::int64_t kCifar10RecordBytes = 1 + kCifarPixelBytes;   // label, pixels
inline constexpr std::int64_t kCifar100RecordBytes = 2 + kCifarPixelBytes;  // coarse label, fine label, pixels
inline constexpr int kCifar10Classes = 10;
inline constexpr int kCifar100FineClasses = 100;
inline constexpr int kCifar100CoarseClasses = 20;

// Which of the two CIFAR-100 labels becomes Dataset::labels: the 100 classes or the 20 superclasses.
enum class CifarLabels { kFine, kCoarse };

// One batch file (data_batch_N.bin or test_batch.bin). Any whole number of records is accepted, not only
// the official 10000, so that small files work in tests and in subsets prepared by hand.
Dataset read_cifar10_file(const std::filesystem::path& file, std::string name);

// train.bin or test.bin. Both labels of every record are checked, whichever one is kept: a coarse label out
// of range means the file is corrupt even when the fine labels are used.
Dataset read_cifar100_file(const std::filesystem::path& file, CifarLabels labels, std::string name);

// data_batch_1.bin .. data_batch_5.bin (concatenated in that order) and test_batch.bin from dir, named
// "cifar10/train" and "cifar10/test". All files are located before any is read.
TrainTest load_cifar10(const std::filesystem::path& dir);

// train.bin and test.bin from dir, named "cifar100/train" and "cifar100/test" with the fine labels, or
// "cifar100-coarse/train" and "cifar100-coarse/test" with the coarse ones, so that logs and checkpoints
// never confuse the 100-class and the 20-class task.
TrainTest load_cifar100(const std::filesystem::path& dir, CifarLabels labels = CifarLabels::kFine);

}  // namespace dtnn::io
