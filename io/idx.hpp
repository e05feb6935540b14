// SPDX-License-Identifier: Apache-2.0
// Readers for the IDX format of MNIST and Fashion-MNIST (unsigned-byte images and labels), gzip-compressed
// or raw. Every failure is a dtnn::DataError naming the file, the value expected and the value found.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace dtnn::io {

// Magic numbers: two zero bytes, the element type (0x08 = unsigned byte), the number of dimensions.
inline constexpr std::uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr std::uint32_t kIdxLabelsMagic = 0x00000801;

// Larger images are taken as a corrupt header rather than honoured with a huge allocation.
inline constexpr std::int64_t kIdxMaxImagePixels = std::int64_t{1} << 24;

struct IdxImages {
  std::int64_t count = 0;
  int rows = 0;
  int cols = 0;
  std::vector<std::uint8_t> pixels;  // count * rows * cols, row-major, image after image
};

// The file must hold exactly the data its header announces: trailing bytes mean the header and the content
// disagree, so they are rejected like a truncation.
IdxImages read_idx_images(const std::filesystem::path& file);
std::vector<std::uint8_t> read_idx_labels(const std::filesystem::path& file);

}  // namespace dtnn::io
