// SPDX-License-Identifier: Apache-2.0
// IDX images and labels (io/idx.cpp), raw or gzip-compressed: zlib tells them apart by their first bytes, so one
// input is read both ways. The seeds (fuzz/corpus/idx) hold both kinds of file, raw and compressed.
#include <cstddef>
#include <cstdint>

#include "core/errors.hpp"
#include "fuzz/fuzz_input.hpp"
#include "io/idx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dtnn;
  const auto file = fuzz::write_input("input", data, size);
  try {
    const io::IdxImages images = io::read_idx_images(file);
    fuzz::require(images.count > 0 && images.rows > 0 && images.cols > 0, "IDX images: a positive shape");
    fuzz::require(static_cast<std::int64_t>(images.pixels.size()) == images.count * images.rows * images.cols,
                  "IDX images: count x rows x cols pixels");
  } catch (const DataError&) {
  }
  try {
    const std::vector<std::uint8_t> labels = io::read_idx_labels(file);
    fuzz::require(!labels.empty(), "IDX labels: at least one");
  } catch (const DataError&) {
  }
  return 0;
}
