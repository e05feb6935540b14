// SPDX-License-Identifier: Apache-2.0
// CIFAR-10 and CIFAR-100 binary batch files (io/cifar.cpp): one input read as each.
#include <cstddef>
#include <cstdint>

#include "core/errors.hpp"
#include "fuzz/fuzz_input.hpp"
#include "io/cifar.hpp"

namespace {

void check(const dtnn::io::Dataset& d) {
  using dtnn::fuzz::require;
  require(d.channels == 3 && d.height == 32 && d.width == 32, "CIFAR: 3x32x32 samples");
  require(d.size() > 0 && static_cast<std::int64_t>(d.images.size()) == d.size() * d.sample_elements(),
          "CIFAR: sample_elements() values a sample");
  for (const std::int32_t label : d.labels) require(label >= 0 && label < d.classes, "CIFAR: labels in [0, classes)");
  for (const float v : d.images) require(v >= 0.0f && v <= 1.0f, "CIFAR: pixels in [0, 1]");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dtnn;
  const auto file = fuzz::write_input("input.bin", data, size);
  try {
    check(io::read_cifar10_file(file, "fuzz"));
  } catch (const DataError&) {
  }
  for (const io::CifarLabels labels : {io::CifarLabels::kFine, io::CifarLabels::kCoarse}) {
    try {
      check(io::read_cifar100_file(file, labels, "fuzz"));
    } catch (const DataError&) {
    }
  }
  return 0;
}
