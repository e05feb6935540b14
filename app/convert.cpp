// SPDX-License-Identifier: Apache-2.0
// dtnn convert: a dataset (IDX, CIFAR binary) into an HDF5 file that --dataset h5 streams.
#include <memory>
#include <string>

#include <fmt/format.h>

#include "app/commands.hpp"
#include "io/h5dataset.hpp"
#include "models/recipe.hpp"

namespace dtnn::app {
namespace {

struct ConvertOptions {
  DataOptions data;
  std::string output;
};

int run_convert(const ConvertOptions& o) {
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
  CLI::App* app = program.add_subcommand("convert", "write a dataset as an HDF5 file (uint8 NHWC, chunked)");
  app->add_option("--dataset", o->data.dataset, "fashion-mnist, mnist, cifar10 or cifar100")
      ->check(CLI::IsMember({"fashion-mnist", "mnist", "cifar10", "cifar100"}))
      ->capture_default_str();
  app->add_option("--data-dir", o->data.dir, "folder of the IDX or CIFAR files (required but for fashion-mnist)");
  app->add_option("--output", o->output, "the HDF5 file to write")->required();
  return {app, [o] { return run_convert(*o); }};
}

}  // namespace dtnn::app
