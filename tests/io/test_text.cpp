// SPDX-License-Identifier: Apache-2.0
// Byte-level text corpora: records, the split by record, the token windows and every bad file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "io/h5dataset.hpp"
#include "io/h5tokens.hpp"
#include "io/hdf5.hpp"
#include "io/io_test_util.hpp"
#include "io/text.hpp"
#include "support/environment.hpp"

namespace dtnn::io {
namespace {

using test_support::throws_with;
using test_util::TempDir;

void write_text(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << file;
}

// count fortunes "<prefix> k ...\n" in the fortune format (each followed by a line "%").
std::string fortunes(const std::string& prefix, int first, int count) {
  std::string text;
  for (int k = first; k < first + count; ++k) text += fmt::format("{} {} says hello\nand bye\n%\n", prefix, k);
  return text;
}

TEST(TextRecordsTest, FortunesAreSeparatedByPercentLines) {
  const TextRecords r = text_records("one\nline\n%\n\n%\ntwo\n%%\n%\r\nthree");
  EXPECT_TRUE(r.fortunes);
  // The whitespace-only record is dropped, "%%" is text, "%\r" separates, a last line gets its newline.
  EXPECT_EQ(r.records, (std::vector<std::string>{"one\nline\n", "two\n%%\n", "three\n"}));
}

TEST(TextRecordsTest, ParagraphsWithoutPercentLines) {
  const TextRecords r = text_records("\n\nfirst para\ngoes on\n\n  \t\nsecond\n\n\n");
  EXPECT_FALSE(r.fortunes);
  EXPECT_EQ(r.records, (std::vector<std::string>{"first para\ngoes on\n", "second\n"}));
}

TEST(TextSplitTest, EveryTenthFortuneOverTheFilesInNameOrderGoesToTest) {
  TempDir dir;
  // b before a on disk does not matter: files are read in name order, records counted over all of them.
  write_text(dir / "b", fortunes("b", 0, 13));
  write_text(dir / "a", fortunes("a", 0, 12));
  const TextSplits s = read_text_corpus(dir.path());
  ASSERT_EQ(s.files.size(), 2u);
  EXPECT_EQ(s.files[0].filename(), "a");
  EXPECT_EQ(s.train_records, 23);
  EXPECT_EQ(s.test_records, 2);
  // Records 9 (a 9) and 19 (b 7), each with its separator.
  EXPECT_EQ(s.test, "a 9 says hello\nand bye\n%\nb 7 says hello\nand bye\n%\n");
  EXPECT_EQ(s.train.find("a 9 says"), std::string::npos);
  EXPECT_EQ(s.train.find("b 7 says"), std::string::npos);
  EXPECT_NE(s.train.find("a 10 says hello\nand bye\n%\na 11 says hello\nand bye\n%\nb 0 says"), std::string::npos);
  EXPECT_EQ(s.train.size() + s.test.size(), fortunes("a", 0, 12).size() + fortunes("b", 0, 13).size());
  EXPECT_EQ(s.name, dir.path().filename().string());
}

TEST(TextSplitTest, AFileOfParagraphsSplitsTheSameWay) {
  TempDir dir;
  std::string text;
  for (int k = 0; k < 20; ++k) text += fmt::format("paragraph {}\nline two\n\n", k);
  write_text(dir / "book.txt", text);
  const TextSplits s = read_text_corpus(dir / "book.txt");
  EXPECT_EQ(s.name, "book");
  EXPECT_EQ(s.test, "paragraph 9\nline two\n\nparagraph 19\nline two\n\n");
  EXPECT_EQ(s.train_records, 18);
}

TEST(TextSplitTest, FolderSkipsIndexesLinksHiddenFilesAndSubfolders) {
  TempDir dir;
  write_text(dir / "cookie", fortunes("c", 0, 10));
  write_text(dir / "cookie.dat", std::string("\0\0\0\2binary", 10));
  std::filesystem::create_symlink("cookie", dir / "cookie.u8");
  std::filesystem::create_symlink("cookie", dir / "alias");
  write_text(dir / ".hidden", "x\n");
  std::filesystem::create_directories(dir / "off");
  write_text(dir / "off" / "rot13", fortunes("off", 0, 10));
  const std::vector<std::filesystem::path> files = text_files_in(dir.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].filename(), "cookie");
}

TEST(TextDatasetTest, WindowsAtStrideSequenceAndTargetsShiftedByOne) {
  TempDir dir;
  write_text(dir / "f", fortunes("f", 0, 30));
  const TextSplits s = read_text_corpus(dir.path());
  const TrainTest d = load_text_dataset(dir.path(), 16);
  EXPECT_EQ(d.train.name, dir.path().filename().string() + "/train");
  EXPECT_EQ(d.train.classes, kByteVocabulary);
  EXPECT_EQ(d.train.sequence, 16);
  EXPECT_EQ(d.train.sample_elements(), 16);
  EXPECT_EQ(d.train.size(), static_cast<std::int64_t>((s.train.size() - 1) / 16));
  EXPECT_EQ(d.test.size(), static_cast<std::int64_t>((s.test.size() - 1) / 16));
  ASSERT_EQ(d.train.tokens->size(), s.train.size());
  for (std::int64_t i = 0; i < d.train.size(); ++i) {
    const std::int64_t w = d.train.windows[static_cast<std::size_t>(i)];
    ASSERT_EQ(w, i * 16);
    // The model reads tokens[w, w + 16) and is taught tokens[w + 1, w + 17): each byte's successor.
    ASSERT_LE(w + 17, static_cast<std::int64_t>(d.train.tokens->size()));
    for (int j = 0; j <= 16; ++j) {
      ASSERT_EQ((*d.train.tokens)[static_cast<std::size_t>(w + j)],
                static_cast<unsigned char>(s.train[static_cast<std::size_t>(w + j)]));
    }
  }
  EXPECT_EQ(byte_tokens("\xff\x01"), (std::vector<std::int32_t>{255, 1}));
}

TEST(TextDatasetTest, SubsetsShareTheTokensAndSelectWindows) {
  const Dataset d = synthetic_token_dataset(20, 4, 7, 3);
  EXPECT_EQ(d.size(), 20);
  EXPECT_EQ(d.tokens->size(), 81u);
  for (const std::int32_t t : *d.tokens) ASSERT_TRUE(t >= 0 && t < 7);
  const Dataset part = d.subset(5, 3);
  EXPECT_EQ(part.tokens, d.tokens);
  EXPECT_EQ(part.windows, (std::vector<std::int64_t>{20, 24, 28}));
  const Dataset drawn = d.stratified_subset(6, 11);
  EXPECT_EQ(drawn.size(), 6);
  EXPECT_TRUE(std::is_sorted(drawn.windows.begin(), drawn.windows.end()));
  EXPECT_EQ(std::set<std::int64_t>(drawn.windows.begin(), drawn.windows.end()).size(), 6u);
  EXPECT_EQ(drawn.windows, d.stratified_subset(6, 11).windows);
  EXPECT_NE(drawn.windows, d.stratified_subset(6, 12).windows);
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { (void)d.subset(18, 3); }, {"out of range"}));
}

TEST(TextDatasetTest, TokensOutsideTheVocabularyAreRefused) {
  auto tokens = std::make_shared<const std::vector<std::int32_t>>(std::vector<std::int32_t>{1, 2, 9, 3});
  EXPECT_TRUE(throws_with<DataError>([&] { (void)token_windows(tokens, 2, 8, "t", "stream.bin"); },
                                     {"stream.bin", "token 9 at position 2", "< 8"}));
  EXPECT_TRUE(throws_with<DataError>([&] { (void)token_windows(tokens, 4, 16, "t", "stream.bin"); },
                                     {"stream.bin", "4 tokens", "at least 5"}));
}

TEST(TextDatasetTest, BadFilesNameTheFileTheValueAndTheExpectation) {
  TempDir dir;
  write_text(dir / "empty", "");
  EXPECT_TRUE(throws_with<DataError>([&] { (void)read_text_corpus(dir / "empty"); },
                                     {(dir / "empty").string(), "empty", "0 bytes"}));
  write_text(dir / "index.dat", std::string("ab\0cd", 5));
  EXPECT_TRUE(throws_with<DataError>([&] { (void)read_text_corpus(dir / "index.dat"); },
                                     {(dir / "index.dat").string(), "NUL byte at offset 2", "expected text"}));
  write_text(dir / "blank", "%\n  \n%\n\n");
  EXPECT_TRUE(throws_with<DataError>([&] { (void)read_text_corpus(dir / "blank"); },
                                     {(dir / "blank").string(), "no text", "8 bytes"}));
  EXPECT_TRUE(throws_with<DataError>([&] { (void)read_text_corpus(dir / "missing"); },
                                     {(dir / "missing").string(), "no such file"}));
  write_text(dir / "few", fortunes("f", 0, 9));
  EXPECT_TRUE(throws_with<DataError>([&] { (void)read_text_corpus(dir / "few"); },
                                     {(dir / "few").string(), "9 fortunes or paragraphs", "at least 10"}));
  write_text(dir / "short", fortunes("s", 0, 10));
  // 10 fortunes of 25 bytes: the test split holds one.
  EXPECT_TRUE(throws_with<DataError>([&] { (void)load_text_dataset(dir / "short", 64); },
                                     {(dir / "short").string(), "test split holds 25 bytes", "at least 65"}));

  TempDir folder;
  std::filesystem::create_directories(folder / "off");
  write_text(folder / "x.dat", "index");
  EXPECT_TRUE(throws_with<DataError>([&] { (void)read_text_corpus(folder.path()); },
                                     {folder.path().string(), "no text file", "skipped 2"}));
  write_text(folder / "good", fortunes("g", 0, 10));
  write_text(folder / "hollow", "");
  EXPECT_TRUE(throws_with<DataError>([&] { (void)read_text_corpus(folder.path()); },
                                     {(folder / "hollow").string(), "empty"}));
  EXPECT_TRUE(throws_with<DataError>([&] { (void)text_files_in(folder / "good"); },
                                     {(folder / "good").string(), "expected a folder", "got a file"}));
}

// The default corpus, as Debian's fortunes package installs it (scripts/setup.sh installs the package).
TEST(TextDatasetTest, DebianFortunesSplitByFortune) {
  const std::filesystem::path dir = default_text_dir();
  if (!std::filesystem::is_directory(dir)) {
    DTNN_SKIP_UNLESS_STRICT(dir << " is missing (apt-get install fortunes)");
  }
  const TextSplits s = read_text_corpus(dir);
  const std::int64_t records = s.train_records + s.test_records;
  EXPECT_GT(records, 14000);
  EXPECT_EQ(s.test_records, records / kTestEvery);
  EXPECT_GT(s.train.size() + s.test.size(), 2'000'000u);
  const TrainTest d = load_text_dataset(dir, 256);
  EXPECT_EQ(d.train.size(), static_cast<std::int64_t>((s.train.size() - 1) / 256));
  EXPECT_EQ(d.test.size(), static_cast<std::int64_t>((s.test.size() - 1) / 256));
}

// dtnn convert's token file: each split's stream back as it went in, windows cut on opening, read by window.
TEST(H5TokensTest, SplitsRoundTripAndStreamByWindow) {
  TempDir dir;
  write_text(dir / "f", fortunes("f", 0, 30));
  const TextSplits s = read_text_corpus(dir / "f");
  const std::vector<std::int32_t> train = byte_tokens(s.train), test = byte_tokens(s.test);
  write_h5_tokens(dir / "t.h5", "f", kByteVocabulary, {{"train", train, s.train_records}, {"test", test, 3}});
  EXPECT_TRUE(is_h5_tokens(dir / "t.h5"));
  const H5TokensInfo info = read_h5_tokens_info(dir / "t.h5");
  EXPECT_EQ(info.name, "f");
  EXPECT_EQ(info.vocabulary, 256);
  EXPECT_EQ(info.splits, (std::vector<std::string>{"train", "test"}));
  EXPECT_EQ(read_h5_tokens(dir / "t.h5", "train"), train);
  EXPECT_EQ(read_h5_tokens(dir / "t.h5", "test"), test);
  const Dataset streamed = open_h5_tokens(dir / "t.h5", "train", 16);
  const Dataset in_memory = load_text_dataset(dir / "f", 16).train;
  EXPECT_EQ(streamed.name, "f/train");
  EXPECT_EQ(streamed.windows, in_memory.windows);
  EXPECT_EQ(streamed.tokens, nullptr);
  ASSERT_NE(streamed.token_reader, nullptr);
  std::vector<std::int32_t> window(17);
  streamed.token_reader->read(streamed.windows[3], 17, window.data());
  EXPECT_EQ(window, std::vector<std::int32_t>(train.begin() + 48, train.begin() + 65));
  const Dataset part = streamed.subset(2, 2);
  EXPECT_EQ(part.token_reader, streamed.token_reader);
  EXPECT_EQ(part.windows, (std::vector<std::int64_t>{32, 48}));

  // A vocabulary above 256 is stored as int32.
  const std::vector<std::int32_t> wide{0, 299, 7, 256};
  write_h5_tokens(dir / "w.h5", "w", 300, {{"train", wide, 0}});
  EXPECT_EQ(read_h5_tokens(dir / "w.h5", "train"), wide);
}

TEST(H5TokensTest, BadFilesAndTokensAreRefused) {
  TempDir dir;
  const std::vector<std::int32_t> ids{1, 2, 3};
  EXPECT_TRUE(throws_with<DataError>([&] { write_h5_tokens(dir / "x.h5", "x", 3, {{"train", ids, 0}}); },
                                     {"x.h5", "split train", "token 3 at position 2", "< 3"}));
  EXPECT_FALSE(std::filesystem::exists(dir / "x.h5"));
  write_h5_tokens(dir / "ok.h5", "ok", 4, {{"train", ids, 0}});
  EXPECT_TRUE(throws_with<DataError>([&] { (void)open_h5_tokens(dir / "ok.h5", "test", 2); },
                                     {"ok.h5", "no split 'test'", "[train]"}));
  EXPECT_TRUE(throws_with<DataError>([&] { (void)open_h5_tokens(dir / "ok.h5", "train", 3); },
                                     {"ok.h5", "3 tokens", "at least 4"}));
  // An image dataset is not a token file.
  write_h5_dataset(dir / "images.h5",
                   TrainTest{synthetic_dataset(4, 1, 2, 2, 3, 1), synthetic_dataset(2, 1, 2, 2, 3, 2)});
  EXPECT_FALSE(is_h5_tokens(dir / "images.h5"));
  EXPECT_TRUE(throws_with<DataError>([&] { (void)read_h5_tokens_info(dir / "images.h5"); },
                                     {"images.h5", "expected format \"dtnn-tokens\"", "got \"dtnn-dataset\""}));
  // A file whose ids leave its vocabulary (written by another tool): the read that meets one fails, naming it.
  h5::write_atomically(dir / "bad.h5", [&](h5::File& f) {
    f.set_string("format", "dtnn-tokens");
    f.set_int("format_version", 1);
    f.set_int("vocabulary", 5);
    const std::vector<std::int64_t> shape{6};
    const h5::Dataset t = f.create_group("train").create_dataset("tokens", h5::DType::kInt32, shape);
    const std::vector<std::int32_t> values{1, 2, 3, 4, 9, 0};
    t.write(std::span<const std::int32_t>(values));
  });
  const Dataset bad = open_h5_tokens(dir / "bad.h5", "train", 2);
  std::vector<std::int32_t> window(3);
  bad.token_reader->read(0, 3, window.data());
  EXPECT_TRUE(throws_with<DataError>([&] { bad.token_reader->read(2, 3, window.data()); },
                                     {"bad.h5", "train/tokens", "token 9 at position 4", "< 5"}));
}

}  // namespace
}  // namespace dtnn::io
