// SPDX-License-Identifier: Apache-2.0
// dtnn: the command-line program. `dtnn train` trains a model of the zoo on a dataset, each step a StarPU
// task graph; `dtnn models` lists the zoo; `dtnn summary` prints a model's layers.
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>

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
#include "models/distributed.hpp"
#include "models/training.hpp"
#include "models/zoo.hpp"
#include "runtime/engine.hpp"
#include "runtime/allreduce.hpp"
#include "runtime/errors.hpp"
#include "runtime/mpi.hpp"
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
  std::string allreduce = "overlapped";
  double bucket_mb = 25.0;
  int mpi_timeout = 300;
  bool drop_last = false;
  // Fault injection for the failure tests: this rank kills itself (or hangs) before the given global step.
  int fail_rank = -1;
  std::int64_t fail_step = -1;
  std::string fail_mode = "kill";
};

// The fault-injection option's effect, as a callback so that it happens at a step boundary.
class FailAtStep : public dtnn::Callback {
 public:
  FailAtStep(std::int64_t step, std::string mode) : step_(step), mode_(std::move(mode)) {}
  void on_batch_begin(dtnn::TrainState& state) override {
    if (state.step != step_) return;
    std::fprintf(stderr, "dtnn: fault injection: %s at step %lld\n", mode_.c_str(), static_cast<long long>(step_));
    std::fflush(stderr);
    if (mode_ == "kill") {
      std::raise(SIGKILL);
    }
    while (true) pause();
  }

 private:
  std::int64_t step_;
  std::string mode_;
};

// trace.json -> trace.rank1.json on rank 1 of a multi-rank run.
std::string per_rank(const std::string& file, const dtnn::runtime::Mpi& mpi) {
  if (!mpi.active()) return file;
  const std::filesystem::path p(file);
  return (p.parent_path() / (p.stem().string() + fmt::format(".rank{}", mpi.rank()) + p.extension().string())).string();
}

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
  dtnn::runtime::Mpi mpi(a.mpi_timeout);
  const bool root = mpi.rank() == 0;
  const bool talk = root && !a.quiet;
  dtnn::runtime::Engine engine(
      dtnn::runtime::EngineOptions().scheduler(a.scheduler).workers(a.workers).profiling(a.trace.empty() ? 0 : 1));
  if (talk) {
    fmt::print("dtnn: {}{}\n", engine.describe(),
               mpi.active() ? fmt::format("; {} MPI ranks, allreduce {}", mpi.size(), a.allreduce) : "");
  }
  dtnn::io::TrainTest data = load_data(a, info);
  dtnn::Sequential model = info.make();
  model.build(info.input, a.seed);
  if (talk) {
    fmt::print("Model {} ({}), trained on {} ({} samples), tested on {} samples\n{}", info.name, info.description,
               data.train.name, data.train.size(), data.test.size(), model.summary());
  }
  std::unique_ptr<dtnn::runtime::GradientReducer> reducer;
  if (mpi.active()) {
    // Everything that must agree for the ranks to train one model together.
    const std::string options = fmt::format(
        "model={} dataset={} train={} test={} batch={} epochs={} steps={} lr={} momentum={} wd={} nesterov={} "
        "seed={} drop_last={} allreduce={}",
        a.model, data.train.name, data.train.size(), data.test.size(), a.batch_size, a.epochs, a.steps_per_epoch,
        a.lr, a.momentum, a.weight_decay, a.nesterov, a.seed, a.drop_last, a.allreduce);
    dtnn::check_same_on_all_ranks(mpi, dtnn::structure_hash(model, options));
    dtnn::broadcast_weights(model, mpi);
    reducer = std::make_unique<dtnn::runtime::GradientReducer>(
        mpi, dtnn::runtime::ReducerOptions()
                 .mode(a.allreduce == "blocking" ? dtnn::runtime::AllreduceMode::kBlocking
                                                 : dtnn::runtime::AllreduceMode::kOverlapped)
                 .bucket_bytes(static_cast<std::size_t>(a.bucket_mb * 1024 * 1024)));
  }
  dtnn::Sgd optimizer(
      dtnn::SgdOptions(a.lr).momentum(a.momentum).weight_decay(a.weight_decay).nesterov(a.nesterov ? 1 : 0));
  auto fit_options = dtnn::FitOptions()
                         .epochs(a.epochs)
                         .batch_size(a.batch_size)
                         .tiles(a.tiles)
                         .seed(a.seed)
                         .steps_per_epoch(a.steps_per_epoch)
                         .verbose(a.quiet ? 0 : 1)
                         .data_parallel({&mpi, reducer.get(), a.drop_last ? 1 : 0});
  if (a.fail_step >= 0 && a.fail_rank == mpi.rank()) {
    fit_options.callback(std::make_shared<FailAtStep>(a.fail_step, a.fail_mode));
  }
  if (!a.trace.empty()) {
    dtnn::runtime::Tracer::start();
  }
  const dtnn::History history = dtnn::fit(model, optimizer, data.train, fit_options);
  if (reducer) {
    reducer->wait_idle();
  }
  if (!a.trace.empty()) {
    dtnn::runtime::Tracer::stop();
    dtnn::runtime::Tracer::write_chrome_trace(per_rank(a.trace, mpi));
  }
  std::optional<dtnn::EvalResult> test;
  if (!a.no_test) {
    test = dtnn::evaluate(model, data.test, dtnn::EvalOptions().batch_size(256).tiles(a.tiles).mpi(&mpi));
  }
  const std::vector<std::uint64_t> checksums = mpi.all_gather(model.weights_checksum(), "weights checksums");
  if (!root) {
    return 0;
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
    fmt::print("Trace: {} ({} events)\n", per_rank(a.trace, mpi), dtnn::runtime::Tracer::events().size());
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
        {"weights_checksum", fmt::format("{:016x}", checksums[0])},
        {"weights_checksums", [&] {
           nlohmann::json all = nlohmann::json::array();
           for (std::uint64_t c : checksums) all.push_back(fmt::format("{:016x}", c));
           return all;
         }()},
        {"ranks", mpi.size()},
        {"allreduce", mpi.active() ? a.allreduce : "none"},
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
  train->add_option("--allreduce", t.allreduce,
                    "MPI gradient reduction: overlapped (each bucket as soon as its gradients are final) or "
                    "blocking (after the whole backward pass)")
      ->check(CLI::IsMember({"overlapped", "blocking"}))
      ->capture_default_str();
  train->add_option("--bucket-mb", t.bucket_mb, "size of a gradient bucket for the allreduce, MiB")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  train->add_option("--mpi-timeout", t.mpi_timeout,
                    "seconds a rank waits for the others before aborting the job (a rank died or hangs)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  train->add_flag("--drop-last", t.drop_last, "drop a last global batch smaller than the others (default: split "
                                              "it evenly over the ranks)");
  train->add_option("--fail-rank", t.fail_rank, "fault injection (tests): the rank that fails")->group("");
  train->add_option("--fail-step", t.fail_step, "fault injection (tests): before this global step")->group("");
  train->add_option("--fail-mode", t.fail_mode, "fault injection (tests): kill or hang")
      ->check(CLI::IsMember({"kill", "hang"}))
      ->group("");

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
