// SPDX-License-Identifier: Apache-2.0
// Byte-level text corpora: records, the split by record, the token windows and every bad file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

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

}  // namespace
}  // namespace dtnn::io
