// SPDX-License-Identifier: Apache-2.0
// Token datasets in HDF5 (io/h5tokens.cpp): the description, every split whole, and a split streamed window by
// window as the batch-loading tasks read it (the first windows, then the last). The seeds (fuzz/corpus/h5tokens) are
// files of write_h5_tokens, byte-level (uint8) and with a larger vocabulary (int32), in HDF5's newest format, whose
// metadata HDF5 checksums (fuzz_h5dataset.cpp says why not the oldest).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "fuzz/fuzz_hdf5.hpp"
#include "fuzz/fuzz_input.hpp"
#include "io/h5tokens.hpp"

namespace {

using dtnn::fuzz::require;

void check_ids(const std::int32_t* ids, std::size_t n, int vocabulary) {
  for (std::size_t i = 0; i < n; ++i) require(ids[i] >= 0 && ids[i] < vocabulary, "h5 tokens: ids in [0, vocabulary)");
}

// The windows of a split, streamed: the reader's contract is that a window it returns holds ids of the vocabulary
// (or it throws).
void stream(const std::filesystem::path& file, const std::string& split, int vocabulary) {
  constexpr int kSequence = 4;
  const dtnn::io::Dataset d = dtnn::io::open_h5_tokens(file, split, kSequence);
  require(d.has_tokens() && d.sequence == kSequence, "h5 tokens: windows of the sequence asked");
  require(d.token_reader != nullptr, "h5 tokens: a streamed split has a reader");
  require(d.size() >= 1 && static_cast<std::int64_t>(d.windows.size()) == d.size(), "h5 tokens: one start a window");
  std::vector<std::int32_t> window(kSequence + 1);
  for (const std::int64_t i : {std::int64_t{0}, d.size() / 2, d.size() - 1}) {
    d.token_reader->read(d.windows[static_cast<std::size_t>(i)], kSequence + 1, window.data());
    check_ids(window.data(), window.size(), vocabulary);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dtnn;
  const auto file = fuzz::write_input("input.h5", data, size);
  io::H5TokensInfo info;
  try {
    info = io::read_h5_tokens_info(file);
    require(info.vocabulary > 0, "h5 tokens: a vocabulary of at least one id");
  } catch (const DataError&) {
  }
  for (const std::string& split : info.splits) {
    try {
      const std::vector<std::int32_t> all = io::read_h5_tokens(file, split);
      check_ids(all.data(), all.size(), info.vocabulary);
    } catch (const DataError&) {
    }
    try {
      stream(file, split, info.vocabulary);
    } catch (const DataError&) {
    }
  }
  fuzz::require_hdf5_closed();
  return 0;
}
