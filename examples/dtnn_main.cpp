// SPDX-License-Identifier: Apache-2.0
// dtnn: the command-line program. `dtnn train` trains a model of the zoo on a dataset, each step a StarPU
// task graph; `dtnn models` lists the zoo; `dtnn summary` prints a model's layers.
#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/dataset.hpp"
#include "models/training.hpp"
#include "models/zoo.hpp"
#include "runtime/engine.hpp"
#include "runtime/errors.hpp"
#include "runtime/trace.hpp"

namespace {

using dtnn::InvalidArgument;

struct TrainArgs {
  std::string model = "simplecnn";
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  std::int64_t train_samples = 0;
  std::int64_t test_samples = 0;
  std::int64_t synthetic_samples = 6400;
  int epochs = 1;
  std::int64_t batch_size = 64;
  std::int64_t steps_per_epoch = 0;
  float lr = 0.05f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  bool nesterov = false;
  int tiles = 2;
  int workers = 0;
  std::string scheduler = dtnn::runtime::kDefaultScheduler;
  std::uint64_t seed = 0;
  std::string trace;
  std::string report;
  bool quiet = false;
  bool no_test = false;
};

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Writes beside the target and renames, so that an earlier report is never replaced by a partial one.
void write_json(const std::filesystem::path& file, const nlohmann::json& doc) {
  const std::filesystem::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) {
      throw dtnn::DataError(fmt::format("{}: cannot open for writing the report", file.string()));
    }
    out << doc.dump(2) << '\n';
    if (!out.flush()) {
      throw dtnn::DataError(fmt::format("{}: write failed", file.string()));
    }
  }
  std::filesystem::rename(tmp, file);
}

dtnn::io::TrainTest load_data(const TrainArgs& a, const dtnn::models::ModelInfo& info) {
  if (a.dataset == "synthetic") {
    const auto& in = info.input;
    const auto n = static_cast<int>(a.synthetic_samples);
    return {dtnn::io::synthetic_dataset(n, static_cast<int>(in[0]), static_cast<int>(in[1]), static_cast<int>(in[2]),
                                        info.classes, a.seed),
            dtnn::io::synthetic_dataset(std::max(1, n / 6), static_cast<int>(in[0]), static_cast<int>(in[1]),
                                        static_cast<int>(in[2]), info.classes, a.seed + 1)};
  }
  std::filesystem::path dir = a.data_dir;
  if (dir.empty()) {
    if (a.dataset != "fashion-mnist") {
      throw InvalidArgument(fmt::format("--data-dir: required for --dataset {}", a.dataset));
    }
    dir = dtnn::io::default_fashion_mnist_dir();
  }
  dtnn::io::TrainTest data = dtnn::io::load_mnist_like(dir, a.dataset);
  if (a.train_samples > 0) {
    data.train = data.train.stratified_subset(std::min(a.train_samples, data.train.size()), a.seed);
  }
  if (a.test_samples > 0) {
    data.test = data.test.stratified_subset(std::min(a.test_samples, data.test.size()), a.seed + 1);
  }
  return data;
}

int run_train(const TrainArgs& a) {
  const dtnn::models::ModelInfo& info = dtnn::models::find(a.model);
  dtnn::runtime::Engine engine(
      dtnn::runtime::EngineOptions().scheduler(a.scheduler).workers(a.workers).profiling(a.trace.empty() ? 0 : 1));
  if (!a.quiet) {
    fmt::print("dtnn: {}\n", engine.describe());
  }
  dtnn::io::TrainTest data = load_data(a, info);
  dtnn::Sequential model = info.make();
  model.build(info.input, a.seed);
  if (!a.quiet) {
    fmt::print("Model {} ({}), trained on {} ({} samples), tested on {} samples\n{}", info.name, info.description,
               data.train.name, data.train.size(), data.test.size(), model.summary());
  }
  dtnn::Sgd optimizer(
      dtnn::SgdOptions(a.lr).momentum(a.momentum).weight_decay(a.weight_decay).nesterov(a.nesterov ? 1 : 0));
  const auto fit_options = dtnn::FitOptions()
                               .epochs(a.epochs)
                               .batch_size(a.batch_size)
                               .tiles(a.tiles)
                               .seed(a.seed)
                               .steps_per_epoch(a.steps_per_epoch)
                               .verbose(a.quiet ? 0 : 1);
  if (!a.trace.empty()) {
    dtnn::runtime::Tracer::start();
  }
  const dtnn::History history = dtnn::fit(model, optimizer, data.train, fit_options);
  if (!a.trace.empty()) {
    dtnn::runtime::Tracer::stop();
    dtnn::runtime::Tracer::write_chrome_trace(a.trace);
  }
  std::optional<dtnn::EvalResult> test;
  if (!a.no_test) {
    test = dtnn::evaluate(model, data.test, dtnn::EvalOptions().batch_size(256).tiles(a.tiles));
  }

  const double per_epoch = history.train_seconds() / static_cast<double>(history.epochs.size());
  const double after_first = history.images_per_second_after_first();
  fmt::print("Training time: {:.2f} s ({:.2f} s per epoch), throughput {:.1f} images/s{}\n", history.train_seconds(),
             per_epoch, history.images_per_second(),
             std::isnan(after_first) ? "" : fmt::format(" ({:.1f} images/s without the first epoch)", after_first));
  if (test) {
    fmt::print("Test accuracy: {:.2f}% (loss {:.4f}) on {} samples\n", 100.0 * test->accuracy, test->loss,
               test->samples);
  }
  fmt::print("Peak memory: {:.1f} MiB\n", peak_rss_mb());
  if (!a.trace.empty()) {
    fmt::print("Trace: {} ({} tasks)\n", a.trace, dtnn::runtime::Tracer::events().size());
  }

  if (!a.report.empty()) {
    nlohmann::json epochs = nlohmann::json::array();
    for (const auto& e : history.epochs) {
      epochs.push_back({{"epoch", e.epoch}, {"loss", e.loss}, {"accuracy", e.accuracy}, {"seconds", e.seconds},
                        {"images", e.images}, {"images_per_second", e.images_per_second()},
                        {"learning_rate", e.learning_rate}});
    }
    nlohmann::json doc = {
        {"model", info.name},
        {"dataset", data.train.name},
        {"train_samples", data.train.size()},
        {"parameters", model.parameter_count()},
        {"epochs", a.epochs},
        {"batch_size", a.batch_size},
        {"tiles", a.tiles},
        {"scheduler", engine.scheduler()},
        {"workers", engine.cpu_workers()},
        {"seed", a.seed},
        {"optimizer", optimizer.describe()},
        {"engine", engine.describe()},
        {"train_seconds", history.train_seconds()},
        {"seconds_per_epoch", per_epoch},
        {"images_per_second", history.images_per_second()},
        {"images_per_second_after_first_epoch", std::isnan(after_first) ? nlohmann::json() : nlohmann::json(after_first)},
        {"peak_rss_mb", peak_rss_mb()},
        {"weights_checksum", fmt::format("{:016x}", model.weights_checksum())},
        {"history", epochs},
    };
    if (test) {
      doc["test_accuracy"] = test->accuracy;
      doc["test_loss"] = test->loss;
      doc["test_samples"] = test->samples;
    }
    write_json(a.report, doc);
  }
  return 0;
}

int run_models() {
  for (const auto& m : dtnn::models::registry()) {
    fmt::print("{:<14} input {:<14} {} classes  {}\n", m.name, dtnn::to_string(m.input), m.classes, m.description);
  }
  return 0;
}

int run_summary(const std::string& name) {
  const dtnn::models::ModelInfo& info = dtnn::models::find(name);
  dtnn::runtime::Engine engine(dtnn::runtime::EngineOptions().workers(1));
  dtnn::Sequential model = info.make();
  model.build(info.input, 0);
  fmt::print("{}", model.summary());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dtnn: train neural networks whose every step is a StarPU task graph"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");

  TrainArgs t;
  CLI::App* train = app.add_subcommand("train", "train a model of the zoo and report test accuracy");
  train->add_option("--model", t.model, "model name (see `dtnn models`)")->capture_default_str();
  train->add_option("--dataset", t.dataset, "fashion-mnist, mnist or synthetic")
      ->check(CLI::IsMember({"fashion-mnist", "mnist", "synthetic"}))
      ->capture_default_str();
  train->add_option("--data-dir", t.data_dir, "folder of the IDX files (default for fashion-mnist: "
                                              "/usr/share/datasets/fashion-mnist)");
  train->add_option("--train-samples", t.train_samples, "use a seeded random subset of this many training samples")
      ->check(CLI::NonNegativeNumber);
  train->add_option("--test-samples", t.test_samples, "use a seeded random subset of this many test samples")
      ->check(CLI::NonNegativeNumber);
  train->add_option("--synthetic-samples", t.synthetic_samples, "training samples of --dataset synthetic")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  train->add_option("--epochs", t.epochs, "epochs")->check(CLI::PositiveNumber)->capture_default_str();
  train->add_option("--batch-size", t.batch_size, "samples per step")->check(CLI::PositiveNumber)->capture_default_str();
  train->add_option("--steps-per-epoch", t.steps_per_epoch, "steps per epoch (0: the whole training set)")
      ->check(CLI::NonNegativeNumber);
  train->add_option("--lr", t.lr, "learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  train->add_option("--momentum", t.momentum, "SGD momentum")->check(CLI::Range(0.0f, 0.999999f))->capture_default_str();
  train->add_option("--weight-decay", t.weight_decay, "L2 weight decay")->check(CLI::NonNegativeNumber);
  train->add_flag("--nesterov", t.nesterov, "Nesterov momentum");
  train->add_option("--tiles", t.tiles, "batch tiles: tasks per layer and pass")->check(CLI::Range(1, 1024))->capture_default_str();
  train->add_option("--workers", t.workers, "CPU workers (0: one per core)")->check(CLI::NonNegativeNumber);
  train->add_option("--scheduler", t.scheduler, "StarPU scheduler (lws, dmdas, prio, ...)")->capture_default_str();
  train->add_option("--seed", t.seed, "seed of initialisation, shuffling and subsets")->capture_default_str();
  train->add_option("--trace", t.trace, "write a Chrome trace-event JSON of every task (opens in Perfetto)");
  train->add_option("--report", t.report, "write a JSON summary of the run");
  train->add_flag("--quiet", t.quiet, "no summary table and no progress lines");
  train->add_flag("--no-test", t.no_test, "skip the evaluation on the test set");

  CLI::App* models = app.add_subcommand("models", "list the model zoo");
  std::string summary_model = "simplecnn";
  CLI::App* summary = app.add_subcommand("summary", "print a model's layers, output shapes and parameters");
  summary->add_option("model", summary_model, "model name")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    if (*train) return run_train(t);
    if (*models) return run_models();
    if (*summary) return run_summary(summary_model);
  } catch (const InvalidArgument& e) {
    fmt::print(stderr, "dtnn: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "dtnn: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
