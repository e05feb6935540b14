// SPDX-License-Identifier: Apache-2.0
// dtnn convert: a dataset (IDX, CIFAR binary, or byte-level text) into an HDF5 file that --dataset h5 streams.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "app/commands.hpp"
#include "core/errors.hpp"
#include "io/h5dataset.hpp"
#include "io/h5tokens.hpp"
#include "io/text.hpp"
#include "models/recipe.hpp"

namespace dtnn::app {
namespace {

struct ConvertOptions {
  DataOptions data;
  std::string output;
};

// The corpus's splits as byte tokens (io/h5tokens.hpp); windows are cut when a model of token ids opens the file.
int convert_text(const ConvertOptions& o) {
  if (!o.data.dir.empty() && !o.data.file.empty()) {
    throw InvalidArgument(fmt::format("--dataset text: --data-dir {} and --data-file {}, expected one of them",
                                      o.data.dir.string(), o.data.file.string()));
  }
  const std::filesystem::path corpus = !o.data.file.empty() ? o.data.file
                                       : !o.data.dir.empty()  ? o.data.dir
                                                              : io::default_text_dir();
  const io::TextSplits s = io::read_text_corpus(corpus);
  const std::vector<std::int32_t> train = io::byte_tokens(s.train);
  const std::vector<std::int32_t> test = io::byte_tokens(s.test);
  io::write_h5_tokens(o.output, s.name, io::kByteVocabulary,
                      {{"train", train, s.train_records}, {"test", test, s.test_records}});
  fmt::print("{}: {} training and {} test tokens ({} and {} fortunes or paragraphs of {} files), vocabulary {}\n",
             o.output, train.size(), test.size(), s.train_records, s.test_records, s.files.size(),
             io::kByteVocabulary);
  return 0;
}

int run_convert(const ConvertOptions& o) {
  if (o.data.dataset == "text") return convert_text(o);
  const io::TrainTest data = open_dataset(o.data, 0);
  io::H5DatasetOptions options;
  options.name = o.data.dataset;
  io::write_h5_dataset(o.output, data, options);
  fmt::print("{}: {} training and {} test samples of {}x{}x{}, {} classes\n", o.output, data.train.size(),
             data.test.size(), data.train.channels, data.train.height, data.train.width, data.train.classes);
  return 0;
}

}  // namespace

Command add_convert(CLI::App& program) {
  auto o = std::make_shared<ConvertOptions>();
  CLI::App* app = program.add_subcommand("convert", "write a dataset as an HDF5 file (uint8 NHWC, chunked; text: its "
                                                    "splits' bytes)");
  app->add_option("--dataset", o->data.dataset,
                  "fashion-mnist, mnist, cifar10, cifar100 or text (a byte-level corpus: its splits as token streams)")
      ->check(CLI::IsMember({"fashion-mnist", "mnist", "cifar10", "cifar100", "text"}))
      ->capture_default_str();
  app->add_option("--data-dir", o->data.dir,
                  fmt::format("folder of the IDX or CIFAR files (required but for fashion-mnist), or of the text files "
                              "(default for text: {})",
                              io::default_text_dir().string()));
  app->add_option("--data-file", o->data.file, "text: one text file instead of a folder");
  app->add_option("--output", o->output, "the HDF5 file to write")->required();
  return {app, [o] { return run_convert(*o); }};
}

}  // namespace dtnn::app
