// SPDX-License-Identifier: Apache-2.0
// Byte-level text corpora (io/text.cpp): a file of fortunes or paragraphs, split by record and cut into windows of
// 4 tokens. The seeds (fuzz/corpus/text) hold a fortune file (with a "%%" line, CRLF and non-ASCII bytes) and a file
// of paragraphs.
#include <cstddef>
#include <cstdint>

#include "core/errors.hpp"
#include "fuzz/fuzz_input.hpp"
#include "io/text.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dtnn;
  const auto file = fuzz::write_input("input", data, size);
  try {
    const io::TextSplits s = io::read_text_corpus(file);
    const std::int64_t records = s.train_records + s.test_records;
    fuzz::require(records >= io::kTestEvery, "text: at least kTestEvery records");
    fuzz::require(s.test_records == records / io::kTestEvery, "text: every tenth record in the test split");
    fuzz::require(s.train.size() + s.test.size() >= static_cast<std::size_t>(2 * records),
                  "text: each record keeps a character and its separator");
    constexpr int kSequence = 4;
    const io::TrainTest d = io::load_text_dataset(file, kSequence);
    for (const io::Dataset* split : {&d.train, &d.test}) {
      fuzz::require(split->size() == static_cast<std::int64_t>((split->tokens->size() - 1) / kSequence),
                    "text: (tokens - 1) / sequence windows");
      for (const std::int32_t t : *split->tokens) fuzz::require(t >= 0 && t < io::kByteVocabulary, "text: bytes");
    }
  } catch (const DataError&) {
  }
  return 0;
}
