// SPDX-License-Identifier: Apache-2.0
// dtnn: the command-line program. Every training step it runs is a StarPU task graph.
//   dtnn train      train a model of the zoo on a dataset, report test accuracy (also under mpirun)
//   dtnn evaluate   test accuracy of a checkpoint
//   dtnn benchmark  training throughput on synthetic data of the model's input shape
//   dtnn models     the model zoo
//   dtnn summary    a model's layers, output shapes and parameters
//   dtnn convert    a dataset (IDX, CIFAR binary) into an HDF5 file
//   dtnn calibrate  StarPU's performance models of a model's steps into a machine folder (docs/simulation.md)
//   dtnn simulate   predicted step time of a model on a machine folder (the DTNN_SIMGRID build only)
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "examples/report.hpp"
#include "io/normalize.hpp"
#include "io/checkpoint.hpp"
#include "io/cifar.hpp"
#include "io/dataset.hpp"
#include "io/h5dataset.hpp"
#include "layers/conv2d.hpp"
#include "models/checkpointing.hpp"
#include "models/step_probes.hpp"
#include "models/step_runner.hpp"
#include "models/distributed.hpp"
#include "models/optimizers.hpp"
#include "models/recipe.hpp"
#include "models/schedules.hpp"
#include "models/training.hpp"
#include "models/zoo.hpp"
#include "runtime/engine.hpp"
#include "core/errors.hpp"
#include "runtime/machine.hpp"
#include "runtime/mpi.hpp"
#include "runtime/text_file.hpp"
#include "runtime/sched.hpp"
#include "runtime/simulated_network.hpp"
#include "runtime/trace.hpp"

namespace {

using dtnn::InvalidArgument;
namespace fs = std::filesystem;

// The convolution algorithm of train, benchmark, evaluate and calibrate when --conv is not given: Winograd for the
// 3x3 stride-1 layers where it pays, convgemm for the others (docs/design.md, Convolution).
constexpr const char* kDefaultConv = "winograd";

// What every subcommand that runs a model shares: the model, the data and the engine.
struct RunArgs {
  std::string model = "simplecnn";
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  std::string data_file;
  std::int64_t train_samples = 0;
  std::int64_t test_samples = 0;
  std::int64_t synthetic_samples = 6400;
  int normalize = 0;
  std::string conv = kDefaultConv;
  std::string fusion = "on";  // --fusion off: every layer's passes as separate tasks (the unfused reference)
  int tiles = 2;
  int workers = 0;
  std::string scheduler = "auto";
  std::string host_allocator = dtnn::runtime::to_string(dtnn::runtime::kDefaultHostAllocator);
  std::string device = "auto";
  int gpus = -1;
  std::uint64_t seed = 0;
  std::int64_t batch_size = 64;
  std::string loss = "cce";
  std::string trace;
  std::string fxt;
  std::string report;
  int quiet = 0;
};

struct TrainArgs : RunArgs {
  int epochs = 1;
  std::string dag;             // --dag: one step's task graph as JSON
  std::string priorities = "on";  // --priorities off: every task at priority 0 (scheduler laboratory)
  std::int64_t dag_step = -1;  // --dag-step: which step (-1: the third of the run)
  std::int64_t steps_per_epoch = 0;
  dtnn::OptimizerConfig optimizer = [] {
    dtnn::OptimizerConfig c;
    c.learning_rate = 0.05f;  // dtnn's default for SGD with momentum 0.9 and the cosine schedule
    return c;
  }();
  float label_smoothing = 0.0f;
  int flip = 0;
  int crop_padding = 0;
  double validation_split = 0.0;
  int test_as_validation = 0;
  double warmup_epochs = 0.0;
  float warmup_start = 0.1f;
  int lr_step_epochs = 0;
  float lr_decay = 0.1f;
  int plateau_patience = 0;
  std::string lr_schedule = "cosine";
  float min_lr = 0.0f;
  int early_stopping = 0;
  std::string monitor = "val_loss";
  float stop_at_loss = -1.0f;
  int scale_lr = 0;
  std::string history;
  std::string checkpoint_dir;
  int keep = 3;
  std::int64_t checkpoint_steps = 0;
  std::string resume;
  int no_test = 0;
  std::string allreduce = "overlapped";
  std::string allreduce_backend = "auto";
  double bucket_mb = 25.0;
  int tail_buckets = 1;
  int mpi_timeout = 300;
  int drop_last = 0;
  int sync_bn = 0;
  int fail_rank = -1;
  std::int64_t fail_step = -1;
  std::string fail_mode = "kill";
};

// The engine for --device/--gpus/--workers/--scheduler. Under mpirun each rank takes one GPU (local rank modulo the
// GPUs of the node). Tasks of codelets with a CUDA body then go where --device says.
dtnn::runtime::EngineOptions engine_options(const RunArgs& a, int profiling, const dtnn::runtime::Mpi* mpi = nullptr) {
  auto options = dtnn::runtime::EngineOptions()
                     .scheduler(a.scheduler)
                     .workers(a.workers)
                     .profiling(profiling)
                     .fxt_dir(a.fxt)
                     .host_allocator(dtnn::runtime::parse_host_allocator(a.host_allocator, "--host-allocator"));
  const bool want_gpu = a.device == "cuda" || a.device == "all";
  if (want_gpu && !dtnn::runtime::built_with_cuda()) {
    throw InvalidArgument(fmt::format("--device {}: this build has no CUDA codelets, expected cpu (build the CUDA "
                                      "configuration with 'DTNN_CUDA=1 scripts/setup.sh build')",
                                      a.device));
  }
  if (a.device != "cpu" && dtnn::runtime::built_with_cuda() && a.gpus != 0) {
    const int devices = dtnn::runtime::cuda_device_count();
    if (mpi != nullptr && mpi->active() && devices > 0) {
      options.cuda(1).cuda_device(dtnn::runtime::local_rank() % devices);
    } else {
      options.cuda(a.gpus);
    }
  }
  return options;
}

// After the engine started: where the tasks go (auto: on the GPUs when there are any).
void select_device(const RunArgs& a, const dtnn::runtime::Engine& engine) {
  using dtnn::runtime::Device;
  const bool want_gpu = a.device == "cuda" || a.device == "all";
  if (want_gpu && engine.cuda_workers() == 0) {
    throw InvalidArgument(fmt::format("--device {}: no GPU found (no CUDA worker started), expected at least one",
                                      a.device));
  }
  dtnn::runtime::set_task_device(a.device == "all" ? Device::kAny
                                 : a.device == "cpu" || engine.cuda_workers() == 0 ? Device::kCpu
                                                                                   : Device::kCuda);
}

// trace.json -> trace.rank1.json on rank 1 of a multi-rank run.
std::string per_rank(const std::string& file, const dtnn::runtime::Mpi& mpi) {
  if (!mpi.active()) return file;
  const fs::path p(file);
  return (p.parent_path() / (p.stem().string() + fmt::format(".rank{}", mpi.rank()) + p.extension().string()))
      .string();
}

dtnn::codelets::LossKind parse_loss(const std::string& name) {
  return name == "bce" ? dtnn::codelets::LossKind::kBinaryCrossEntropy
                       : dtnn::codelets::LossKind::kCategoricalCrossEntropy;
}

dtnn::io::TrainTest load_data(const RunArgs& a, const dtnn::models::ModelInfo& info, std::int64_t batch_hint) {
  if (a.dataset == "synthetic") {
    const auto& in = info.input;
    const auto n = static_cast<int>(a.synthetic_samples);
    return {dtnn::io::synthetic_dataset(n, static_cast<int>(in[0]), static_cast<int>(in[1]), static_cast<int>(in[2]),
                                        info.classes, a.seed),
            dtnn::io::synthetic_dataset(std::max(1, n / 6), static_cast<int>(in[0]), static_cast<int>(in[1]),
                                        static_cast<int>(in[2]), info.classes, a.seed + 1)};
  }
  dtnn::io::TrainTest data;
  if (a.dataset == "h5") {
    if (a.data_file.empty()) throw InvalidArgument("--data-file: required for --dataset h5");
    data = {dtnn::io::open_h5_dataset(a.data_file, "train", batch_hint),
            dtnn::io::open_h5_dataset(a.data_file, "test", batch_hint)};
  } else {
    fs::path dir = a.data_dir;
    if (dir.empty()) {
      if (a.dataset != "fashion-mnist") {
        throw InvalidArgument(fmt::format("--data-dir: required for --dataset {}", a.dataset));
      }
      dir = dtnn::io::default_fashion_mnist_dir();
    }
    if (a.dataset == "cifar10") {
      data = dtnn::io::load_cifar10(dir);
    } else if (a.dataset == "cifar100") {
      data = dtnn::io::load_cifar100(dir);
    } else {
      data = dtnn::io::load_mnist_like(dir, a.dataset);
    }
  }
  if (a.train_samples > 0) {
    data.train = data.train.stratified_subset(std::min(a.train_samples, data.train.size()), a.seed);
  }
  if (a.test_samples > 0) {
    data.test = data.test.stratified_subset(std::min(a.test_samples, data.test.size()), a.seed + 1);
  }
  if (a.normalize) {
    // The training set's statistics for both, as PyDTNN does.
    const dtnn::io::ChannelStats stats = dtnn::io::channel_stats(data.train);
    dtnn::io::normalize(data.train, stats);
    dtnn::io::normalize(data.test, stats);
  }
  return data;
}

void set_conv_variant(dtnn::Layer& layer, dtnn::ConvVariant v) {
  if (auto* conv = dynamic_cast<dtnn::Conv2d*>(&layer)) conv->set_variant(v);
  for (dtnn::Layer* child : layer.children()) set_conv_variant(*child, v);
}

dtnn::Sequential build_model(const RunArgs& a, const dtnn::models::ModelInfo& info) {
  dtnn::Sequential model = info.make();
  const dtnn::ConvVariant variant = dtnn::parse_conv_variant(a.conv, "--conv");
  for (std::size_t i = 0; i < model.size(); ++i) set_conv_variant(model.layer(i), variant);
  model.fusion(a.fusion == "on" ? 1 : 0);
  model.build(info.input, a.seed);
  return model;
}

std::string model_options_json(const RunArgs& a, const dtnn::models::ModelInfo& info) {
  return nlohmann::json{{"classes", info.classes}, {"conv", a.conv}, {"input", info.input}}.dump();
}

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

dtnn::ScheduleOptions schedule_options(const TrainArgs& a) {
  return dtnn::ScheduleOptions()
      .warmup(a.warmup_epochs, a.warmup_start)
      .cosine(a.lr_schedule == "cosine" ? 1 : 0)
      .step_decay(a.lr_step_epochs)
      .plateau_patience(a.plateau_patience)
      .decay(a.lr_decay)
      .min_lr(a.min_lr)
      .early_stopping(a.early_stopping)
      .monitor(a.monitor)
      .stop_at_loss(a.stop_at_loss);
}

dtnn::DataParallelOptions data_parallel_options(const TrainArgs& a) {
  using dtnn::runtime::AllreduceBackend;
  using dtnn::runtime::AllreduceMode;
  auto o = dtnn::DataParallelOptions()
               .mode(a.allreduce == "blocking" ? AllreduceMode::kBlocking : AllreduceMode::kOverlapped)
               .buckets(dtnn::BucketOptions()
                            .bytes(static_cast<std::size_t>(a.bucket_mb * 1024 * 1024))
                            .tail_buckets(a.tail_buckets))
               .sync_batchnorm(a.sync_bn)
               .drop_last(a.drop_last);
  if (a.allreduce_backend != "auto") {
    o.backend(a.allreduce_backend == "nccl" ? AllreduceBackend::kNccl : AllreduceBackend::kMpi);
  }
  return o;
}

dtnn::FitOptions train_fit_options(const TrainArgs& a, std::int64_t initial_step) {
  return dtnn::FitOptions()
      .epochs(a.epochs)
      .batch_size(a.batch_size)
      .tiles(a.tiles)
      .seed(a.seed)
      .steps_per_epoch(a.steps_per_epoch)
      .verbose(a.quiet ? 0 : 1)
      .loss(parse_loss(a.loss))
      .label_smoothing(a.label_smoothing)
      .augment(dtnn::AugmentOptions{a.flip, a.crop_padding})
      .initial_step(initial_step);
}

// The callbacks of the program's own options: checkpoints (they need the zoo's name and options) and the fault
// injection of the tests.
void add_program_callbacks(dtnn::FitOptions& fit_options, const TrainArgs& a, const dtnn::models::ModelInfo& info,
                           const dtnn::runtime::Mpi& mpi, int has_validation) {
  if (!a.checkpoint_dir.empty()) {
    fit_options.callback(std::make_shared<dtnn::CheckpointCallback>(
        std::make_shared<dtnn::io::CheckpointDirectory>(a.checkpoint_dir, a.keep),
        dtnn::CheckpointMeta{info.name, model_options_json(a, info), mpi.size()}, a.checkpoint_steps,
        has_validation ? a.monitor : "loss", mpi.rank()));
  }
  if (a.fail_step >= 0 && a.fail_rank == mpi.rank()) {
    fit_options.callback(std::make_shared<FailAtStep>(a.fail_step, a.fail_mode));
  }
  if (!a.dag.empty()) {
    fit_options.callback(std::make_shared<dtnn::DagCapture>(per_rank(a.dag, mpi), a.dag_step));
  }
}

// What ran, as the report states it.
nlohmann::json run_facts(const TrainArgs& a, const dtnn::models::ModelInfo& info, const dtnn::io::TrainTest& data,
                         const dtnn::Sequential& model, const dtnn::runtime::Engine& engine,
                         const dtnn::Optimizer& optimizer, const dtnn::runtime::Mpi& mpi) {
  return {
      {"model", info.name},
      {"dataset", data.train.name},
      {"train_samples", data.train.size()},
      {"parameters", model.parameter_count()},
      {"epochs", a.epochs},
      {"batch_size", a.batch_size},
      {"tiles", a.tiles},
      {"conv", a.conv},
      {"fusion", a.fusion},
      {"host_allocator", dtnn::runtime::to_string(engine.host_allocator())},
      {"scheduler", engine.scheduler()},
      {"workers", engine.cpu_workers()},
      {"cuda_workers", engine.cuda_workers()},
      {"device", dtnn::runtime::to_string(dtnn::runtime::task_device())},
      {"seed", a.seed},
      {"optimizer", optimizer.describe()},
      {"engine", engine.describe()},
      {"ranks", mpi.size()},
      {"allreduce", mpi.active() ? a.allreduce : "none"},
      {"priorities", a.priorities},
  };
}

// The simulation build runs no codelet: whatever reads a tensor (training, evaluation) would read nothing.
void require_real_build(const char* command) {
  if (dtnn::runtime::simulated()) {
    throw InvalidArgument(fmt::format("{}: this is the simulation build (DTNN_SIMGRID), whose codelets never run, "
                                      "expected `dtnn simulate`, or the normal build (build/bin/dtnn {})",
                                      command, command));
  }
}

int run_train(TrainArgs a, int benchmark) {
  require_real_build(benchmark ? "benchmark" : "train");
  const dtnn::models::ModelInfo& info = dtnn::models::find(a.model);
  dtnn::runtime::Mpi mpi(a.mpi_timeout);
  const bool root = mpi.rank() == 0;
  const bool talk = root && !a.quiet;
  dtnn::runtime::Engine engine(engine_options(a, a.trace.empty() ? 0 : 1, &mpi));
  select_device(a, engine);
  dtnn::runtime::set_task_priorities(a.priorities == "on" ? dtnn::runtime::Priorities::kOn
                                                          : dtnn::runtime::Priorities::kOff);
  if (talk) {
    fmt::print("dtnn: {}{}\n", engine.describe(),
               mpi.active() ? fmt::format("; {} MPI ranks, allreduce {}", mpi.size(), a.allreduce) : "");
  }
  dtnn::io::TrainTest data = load_data(a, info, a.batch_size);
  std::optional<dtnn::io::Dataset> validation;
  if (a.validation_split > 0.0) {
    validation = dtnn::split_validation(data.train, a.validation_split);
  } else if (a.test_as_validation) {
    validation = data.test;
  }
  dtnn::Sequential model = build_model(a, info);
  if (talk) {
    fmt::print("Model {} ({}), trained on {} ({} samples), tested on {} samples\n{}", info.name, info.description,
               data.train.name, data.train.size(), data.test.size(), model.summary());
  }
  if (a.scale_lr) {
    a.optimizer.learning_rate = dtnn::scale_lr_for_ranks(a.optimizer.learning_rate, mpi.size());
  }
  std::unique_ptr<dtnn::Optimizer> optimizer = dtnn::make_default_optimizer(a.optimizer);
  const dtnn::ScheduleOptions schedule = schedule_options(a);
  std::int64_t initial_step = 0;
  if (!a.resume.empty()) {
    const dtnn::ResumePoint at = dtnn::resume_training(a.resume, info.name, model, *optimizer, schedule);
    initial_step = at.step;
    if (talk) fmt::print("Resumed from {} at step {} (epoch {})\n", at.file.string(), at.step, at.epoch);
  }

  dtnn::FitOptions fit_options = train_fit_options(a, initial_step);
  dtnn::DataParallelOptions parallel = data_parallel_options(a);
  parallel.agreement(fmt::format("model={} conv={} ", a.model, a.conv) +
                     dtnn::agreement_text(fit_options, *optimizer, data.train, &data.test, parallel));
  std::optional<dtnn::DataParallelRun> data_parallel;
  try {
    data_parallel.emplace(mpi, model, parallel);
  } catch (const dtnn::RankMismatch& e) {
    // Every rank found the mismatch: each reports it before any exits (mpirun ends the job at the first
    // non-zero exit, which could cut the others short).
    fmt::print(stderr, "dtnn: error: {}\n", e.what());
    std::fflush(stderr);
    mpi.barrier("error report");
    return 2;
  }
  fit_options.data_parallel(data_parallel->data_parallel());
  for (auto& callback : dtnn::schedule_callbacks(schedule, a.epochs)) fit_options.callback(callback);
  add_program_callbacks(fit_options, a, info, mpi, validation ? 1 : 0);
  const auto step_timer = std::make_shared<dtnn::StepTimer>();
  fit_options.callback(step_timer);
  if (!a.trace.empty()) {
    dtnn::runtime::Tracer::start();
  }
  const dtnn::History history =
      dtnn::fit(model, *optimizer, data.train, fit_options, validation ? &*validation : nullptr);
  data_parallel->wait_idle();
  if (!a.trace.empty()) {
    dtnn::runtime::Tracer::stop();
    dtnn::runtime::Tracer::write_chrome_trace(per_rank(a.trace, mpi));
  }
  std::optional<dtnn::EvalResult> test;
  if (!a.no_test && !benchmark) {
    test = dtnn::evaluate(model, data.test,
                          dtnn::EvalOptions().batch_size(256).tiles(a.tiles).mpi(&mpi).loss(parse_loss(a.loss)));
  }
  const std::vector<std::uint64_t> checksums = mpi.all_gather(model.weights_checksum(), "weights checksums");
  if (!root) {
    return 0;
  }
  const dtnn::cli::MemoryBreakdown memory = dtnn::cli::memory_breakdown(model, *optimizer);
  dtnn::cli::print_train_summary(history, test, memory);
  if (!a.trace.empty()) {
    fmt::print("Trace: {} ({} events)\n", per_rank(a.trace, mpi), dtnn::runtime::Tracer::events().size());
  }
  if (!a.history.empty()) {
    dtnn::cli::write_history(a.history, history);
  }
  if (!a.report.empty()) {
    nlohmann::json run = run_facts(a, info, data, model, engine, *optimizer, mpi);
    run["step_seconds"] = step_timer->seconds();
    dtnn::cli::write_train_report(a.report, std::move(run), history, test, checksums, memory);
  }
  return 0;
}

int run_evaluate(const RunArgs& a, const std::string& checkpoint) {
  require_real_build("evaluate");
  const dtnn::models::ModelInfo& info = dtnn::models::find(a.model);
  dtnn::runtime::Engine engine(engine_options(a, 0));
  select_device(a, engine);
  dtnn::io::TrainTest data = load_data(a, info, a.batch_size);
  dtnn::Sequential model = build_model(a, info);
  const fs::path file = dtnn::io::resolve_checkpoint(checkpoint);
  const dtnn::io::Checkpoint c = dtnn::io::load_checkpoint(file);
  dtnn::restore_checkpoint(c, model, nullptr, file);
  const dtnn::EvalResult r = dtnn::evaluate(
      model, data.test, dtnn::EvalOptions().batch_size(a.batch_size).tiles(a.tiles).loss(parse_loss(a.loss)));
  fmt::print("{} of {} (step {}) on {}: accuracy {:.2f}%, top-5 {:.2f}%, loss {:.4f}, MSE {:.5f}, MAE {:.5f}, {} "
             "samples in {:.2f} s\n",
             info.name, file.string(), c.step, data.test.name, 100.0 * r.accuracy, 100.0 * r.top5_accuracy, r.loss,
             r.mse, r.mae, r.samples, r.seconds);
  if (!a.report.empty()) {
    dtnn::runtime::write_text_file(a.report,
               nlohmann::json{{"model", info.name}, {"checkpoint", file.string()}, {"test_accuracy", r.accuracy},
                              {"test_top5_accuracy", r.top5_accuracy}, {"test_loss", r.loss}, {"mse", r.mse},
                              {"mae", r.mae}, {"test_samples", r.samples}}
                       .dump(2) + "\n",
               "report");
  }
  return 0;
}

int run_schedulers() {
  fmt::print("StarPU {}.{}.{}'s policies:\n  {}\n", STARPU_MAJOR_VERSION, STARPU_MINOR_VERSION, STARPU_RELEASE_VERSION,
             fmt::join(dtnn::runtime::starpu_policy_names(), " "));
  fmt::print("dtnn's own policies (runtime/sched.hpp):\n");
  for (const auto& [name, description] : dtnn::runtime::registered_policies()) {
    fmt::print("  {:<14} {}\n", name, description);
  }
  fmt::print("auto: lws without GPUs, dmdas with them\n");
  return 0;
}

int run_models() {
  for (const auto& m : dtnn::models::registry()) {
    fmt::print("{:<22} input {:<16} {:>4} classes  {}\n", m.name, dtnn::to_string(m.input), m.classes, m.description);
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

int run_convert(const std::string& dataset, const std::string& dir, const std::string& output) {
  dtnn::io::TrainTest data;
  if (dataset == "cifar10") {
    data = dtnn::io::load_cifar10(dir);
  } else if (dataset == "cifar100") {
    data = dtnn::io::load_cifar100(dir);
  } else {
    data = dtnn::io::load_mnist_like(dir.empty() ? dtnn::io::default_fashion_mnist_dir() : fs::path(dir), dataset);
  }
  dtnn::io::H5DatasetOptions options;
  options.name = dataset;
  dtnn::io::write_h5_dataset(output, data, options);
  fmt::print("{}: {} training and {} test samples of {}x{}x{}, {} classes\n", output, data.train.size(),
             data.test.size(), data.train.channels, data.train.height, data.train.width, data.train.classes);
  return 0;
}

// dtnn calibrate and dtnn simulate: steps of a model on synthetic data that nobody reads.
struct StepArgs {
  std::string model = "simplecnn";
  std::int64_t batch_size = 64;
  int tiles = 2;
  int workers = 1;
  std::string scheduler = "lws";
  std::string priorities = "on";
  std::string conv;  // empty: calibrate kDefaultConv, simulate the machine folder's calibration's (simulated_conv)
  std::string fusion = "on";
  std::int64_t steps = 12;
  std::int64_t warmup = 2;
  std::uint64_t seed = 0;
  std::string folder;  // calibrate --out, simulate --machine
  int ranks = 1;       // simulate: data-parallel ranks on a simulated network
  double link_gbps = 100.0;
  double link_latency_us = 2.0;
  bool sums_on_cores = false;  // simulate: each gradient sum occupies a CPU worker for its time
  double bucket_mb = 25.0;
  int tail_buckets = 1;
  int cpus = 0;            // simulate: CPU cores of the target (0: the calibrated machine's)
  double cpu_speed = 1.0;  // simulate: the target's cores against the calibrated ones
  double gpu_speed = 1.0;  // simulate: the target's GPUs against the calibrated one
  double bus_gbps = 0.0;         // simulate: each GPU's link to the host, Gb/s (0: the calibrated one's)
  double bus_latency_us = -1.0;  // simulate: its latency (negative: the calibrated one's)
  std::string device = "cpu";  // where the tasks run (cpu, cuda, all)
  int gpus = -1;               // CUDA workers with --device cuda|all (-1: every GPU, simulated or real)
  bool scatter = false;        // simulate: task durations drawn around their models' means
  std::vector<double> worker_speeds;  // simulate: each simulated CPU worker's speed (empty: all 1)
  bool measure_speeds = false;        // calibrate: each CPU worker's speed against the others (cpu_worker_speeds)
  double task_overhead_us = -1.0;     // simulate: a CPU worker's time between two tasks (-1: the calibration's)
  std::string trace;
  std::string report;
};

struct StepOutcome {
  dtnn::StepRunResult result;
  std::string engine;
  int cuda_workers = 0;
  double network_busy_s = 0.0;  // simulated ranks: seconds of all the allreduces
  std::int64_t allreduces = 0;
  std::vector<double> cpu_worker_speeds;  // with StepArgs::measure_speeds
  double cpu_task_overhead_us = 0.0;      // with StepArgs::measure_speeds
};

// Runs the steps on an engine already pointed at the machine folder. mpi: a calibration under mpirun, whose ranks
// sum their gradients for real (null, or a world of one: this process alone).
StepOutcome run_step_args(const StepArgs& a, const dtnn::runtime::Mpi* mpi = nullptr) {
  const dtnn::models::ModelInfo& info = dtnn::models::find(a.model);
  const bool gpu = a.device != "cpu";
  if (gpu && !dtnn::runtime::built_with_cuda()) {
    throw InvalidArgument(fmt::format("--device {}: this build has no CUDA codelets, expected cpu (calibrate GPUs with "
                                      "the CUDA build: build-cuda/bin/dtnn)",
                                      a.device));
  }
  dtnn::runtime::Engine engine(dtnn::runtime::EngineOptions()
                                   .scheduler(a.scheduler)
                                   .workers(a.workers)
                                   .cuda(gpu ? a.gpus : 0)
                                   .profiling(1));
  if (engine.cpu_workers() != a.workers) {
    throw InvalidArgument(fmt::format("--workers {}: StarPU started {} CPU workers (the machine's CPUs), expected {}",
                                      a.workers, engine.cpu_workers(), a.workers));
  }
  if (gpu && engine.cuda_workers() == 0) {
    throw InvalidArgument(fmt::format("--device {}: no GPU found (no CUDA worker started), expected at least one",
                                      a.device));
  }
  // cuda: every task with a CUDA body on the GPUs (loading stays on the CPUs); all: the scheduler places each
  // task on a CPU or a GPU, so both kinds of models calibrate.
  dtnn::runtime::set_task_device(a.device == "cuda"  ? dtnn::runtime::Device::kCuda
                                 : a.device == "all" ? dtnn::runtime::Device::kAny
                                                     : dtnn::runtime::Device::kCpu);
  dtnn::runtime::set_task_priorities(a.priorities == "on" ? dtnn::runtime::Priorities::kOn
                                                          : dtnn::runtime::Priorities::kOff);
  RunArgs run;
  run.conv = a.conv;
  run.fusion = a.fusion;
  run.seed = a.seed;
  dtnn::Sequential model = build_model(run, info);
  const auto& in = info.input;
  // Two batches of samples: the load tasks read them in a real run, nothing reads them in a simulation.
  const dtnn::io::Dataset data =
      dtnn::io::synthetic_dataset(static_cast<int>(2 * a.batch_size), static_cast<int>(in[0]), static_cast<int>(in[1]),
                                  static_cast<int>(in[2]), info.classes, a.seed);
  // The ranks of a calibration under mpirun: each bucket's gradients summed over them as `dtnn train` sums them,
  // so that the tasks' durations are those of a rank sharing its node and cores with the others, its driver and
  // its communication thread.
  std::optional<dtnn::DataParallelRun> ranks;
  std::unique_ptr<dtnn::Optimizer> optimizer = dtnn::make_default_optimizer(dtnn::OptimizerConfig{});
  auto step_options = dtnn::TrainStepOptions().tiles(a.tiles).seed(a.seed);
  // The other ranks of a simulation: this rank's graph with each bucket's allreduce timed by the network model.
  std::unique_ptr<dtnn::runtime::SimulatedNetwork> network;
  if (a.ranks > 1 && mpi == nullptr) {
    dtnn::runtime::NetworkModel net;
    net.ranks = a.ranks;
    // With GPUs the sums acquire the gradients on the first GPU's memory, as NCCL reduces device buffers.
    const int first_gpu = gpu ? starpu_worker_get_by_type(STARPU_CUDA_WORKER, 0) : -1;
    if (first_gpu >= 0) net.node = static_cast<int>(starpu_worker_get_memory_node(static_cast<unsigned>(first_gpu)));
    net.bandwidth_bytes_per_s = a.link_gbps * 1e9 / 8.0;
    net.latency_s = a.link_latency_us * 1e-6;
    net.on_cores = a.sums_on_cores ? 1 : 0;
    network = std::make_unique<dtnn::runtime::SimulatedNetwork>(net);
    dtnn::DataParallel dp;
    dp.communicator = network.get();
    dp.buckets = dtnn::BucketOptions().bytes(static_cast<std::size_t>(a.bucket_mb * 1024 * 1024)).tail_buckets(
        a.tail_buckets);
    step_options.data_parallel(dp);
  }
  if (mpi != nullptr && mpi->active()) {
    auto parallel = dtnn::DataParallelOptions().buckets(
        dtnn::BucketOptions().bytes(static_cast<std::size_t>(a.bucket_mb * 1024 * 1024)).tail_buckets(a.tail_buckets));
    parallel.agreement(fmt::format("model={} conv={} fusion={} batch={} tiles={} steps={} warmup={} seed={}", a.model,
                                   a.conv, a.fusion, a.batch_size, a.tiles, a.steps, a.warmup, a.seed));
    ranks.emplace(*mpi, model, parallel);
    step_options.data_parallel(ranks->data_parallel());
  }
  const bool tracing = !a.trace.empty() || a.measure_speeds;
  if (tracing) dtnn::runtime::Tracer::start();
  StepOutcome out;
  out.result = dtnn::run_steps(model, *optimizer, data,
                               dtnn::StepRunOptions().steps(a.steps).warmup(a.warmup).batch_size(a.batch_size).step(
                                   step_options));
  if (network) {
    network->wait_idle();
    out.network_busy_s = network->busy_seconds();
    out.allreduces = network->sums();
  }
  if (ranks) ranks->wait_idle();
  if (tracing) {
    dtnn::runtime::Tracer::stop();
    if (!a.trace.empty()) dtnn::runtime::Tracer::write_chrome_trace(a.trace);
  }
  if (a.measure_speeds) {
    // The tasks after the warm-up's share of the span (the first touches of the warm-up steps are no measure).
    const std::vector<dtnn::runtime::TraceEvent> events = dtnn::runtime::Tracer::events();
    double first = std::numeric_limits<double>::infinity();
    double last = 0.0;
    for (const auto& e : events) {
      first = std::min(first, e.start_us);
      last = std::max(last, e.end_us);
    }
    const double from =
        events.empty() ? 0.0 : first + (last - first) * static_cast<double>(a.warmup) / static_cast<double>(a.steps);
    out.cpu_worker_speeds = dtnn::runtime::cpu_worker_speeds(events, from);
    out.cpu_task_overhead_us = dtnn::runtime::cpu_task_overhead_us(events, from);
  }
  out.engine = engine.describe();
  out.cuda_workers = engine.cuda_workers();
  return out;
}

nlohmann::json step_result_json(const StepArgs& a, const dtnn::StepRunResult& r) {
  nlohmann::json workers = nlohmann::json::array();
  for (const dtnn::WorkerUse& w : r.workers) {
    workers.push_back({{"worker", w.worker}, {"name", w.name}, {"busy_ms", w.busy_us / 1e3},
                       {"utilisation", w.utilisation}});
  }
  const double step_s = r.median_step_us() / 1e6;
  return {{"model", a.model},         {"device", a.device},
          {"ranks", a.ranks},         {"batch_size", a.batch_size},   {"tiles", a.tiles},
          {"workers", a.workers},     {"scheduler", a.scheduler},     {"priorities", a.priorities},
          {"conv", a.conv},           {"fusion", a.fusion},           {"steps", a.steps},
          {"warmup", a.warmup},       {"step_ms", step_s * 1e3},      {"images_per_second", a.batch_size * a.ranks / step_s},
          {"step_ms_each", [&] {
             std::vector<double> v;
             for (double us : r.step_us) v.push_back(us / 1e3);
             return v;
           }()},
          {"span_ms", r.span_us / 1e3}, {"tasks", r.tasks},           {"worker_use", workers}};
}

void print_step_result(const dtnn::StepRunResult& r, std::int64_t batch) {
  const double step_s = r.median_step_us() / 1e6;  // batch: over every rank
  fmt::print("step time {:.2f} ms (median of {} steps), {:.1f} images/s; {} tasks in {:.1f} ms\n", step_s * 1e3,
             r.step_us.size(), static_cast<double>(batch) / step_s, r.tasks, r.span_us / 1e3);
  for (const dtnn::WorkerUse& w : r.workers) {
    fmt::print("  {:<10} busy {:8.1f} ms  {:5.1f}%\n", w.name, w.busy_us / 1e3, 100.0 * w.utilisation);
  }
}

int run_calibrate(const StepArgs& a) {
  if (dtnn::runtime::simulated()) {
    throw InvalidArgument("calibrate: this is the simulation build (DTNN_SIMGRID), whose codelets never run; "
                          "calibrate with the normal build (build/bin/dtnn calibrate)");
  }
  // Under mpirun every rank runs the steps and sums its gradients with the others, as `dtnn train` does: rank 0
  // calibrates into the folder, the others' models (the same tasks on their own cores) go to a folder of their own
  // that is removed at the end.
  const dtnn::runtime::Mpi mpi;
  struct Scratch {
    fs::path dir;
    ~Scratch() {
      std::error_code ignored;
      if (!dir.empty()) fs::remove_all(dir, ignored);
    }
  } scratch;
  if (mpi.rank() > 0) {
    scratch.dir = fs::temp_directory_path() / fmt::format("dtnn-calibrate-{}-rank{}", ::getpid(), mpi.rank());
  }
  // --out a folder, or an archive: extracted (where it exists) into a private folder, packed back at the end.
  const dtnn::runtime::MachineFolder machine =
      dtnn::runtime::MachineFolder::create(scratch.dir.empty() ? fs::path(a.folder) : scratch.dir);
  const fs::path dir = machine.dir();
  dtnn::runtime::use_machine_folder(dir, 1);
  // Every task's duration goes into its model's history (without it, lws never measures).
  setenv("STARPU_CALIBRATE", "1", 1);
  nlohmann::json doc = dtnn::runtime::read_machine_file(dir);
  StepArgs measured = a;
  measured.measure_speeds = true;
  measured.ranks = mpi.size();
  const StepOutcome out = run_step_args(measured, &mpi);
  if (mpi.rank() > 0) return 0;
  const dtnn::StepRunResult& r = out.result;
  fmt::print("dtnn calibrate: {} on {} ({}{}) into {}\n", a.model, dtnn::runtime::cpu_model_name(), out.engine,
             mpi.active() ? fmt::format("; rank 0 of {} MPI ranks, gradients summed over them", mpi.size()) : "",
             machine.path().string());
  print_step_result(r, a.batch_size);
  fmt::print("CPU workers' speeds against the mean of the same tasks: {:.3f} (dtnn simulate --worker-speeds)\n",
             fmt::join(out.cpu_worker_speeds, ", "));
  fmt::print("CPU workers' time between two tasks (median, the next one ready): {:.1f} us (dtnn simulate charges it "
             "before each task)\n",
             out.cpu_task_overhead_us);
  doc["host"] = dtnn::runtime::kMachineHost;
  doc["cpu"] = dtnn::runtime::cpu_model_name();
  doc["cores"] = static_cast<int>(std::thread::hardware_concurrency());
  nlohmann::json row = step_result_json(measured, r);
  row["cuda_workers"] = out.cuda_workers;
  row["cpu_worker_speeds"] = out.cpu_worker_speeds;
  row["cpu_task_overhead_us"] = out.cpu_task_overhead_us;
  doc["calibrations"].push_back(row);
  dtnn::runtime::write_machine_file(dir, doc);
  machine.save();
  if (!a.report.empty()) {
    dtnn::runtime::write_text_file(a.report, row.dump(2) + "\n", "report");
  }
  return 0;
}

// Set in the simulation's second process (see prepare_simulation), whose machine folder is STARPU_HOME's.
constexpr const char* kSimulationProcess = "DTNN_SIMULATION_PROCESS";
// The machine folder of --machine for that second process: the first one's (an archive's extraction lives as long
// as the first process, which waits for the second).
constexpr const char* kSimulationMachine = "DTNN_SIMULATION_MACHINE";
// This program's arguments, for that second process.
std::vector<char*> g_arguments;

// Runs this program again with the same arguments and kSimulationProcess set; its exit status.
int run_simulation_process() {
  setenv(kSimulationProcess, "1", 1);
  std::vector<char*> args = g_arguments;
  // SimGrid takes its own options out of the arguments before dtnn's main sees them: its INFO lines (platform
  // version, configuration changes) are left out, warnings stay.
  static char quiet[] = "--log=root.thres:warning";
  args.push_back(quiet);
  args.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) throw dtnn::RuntimeError(fmt::format("simulate: fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    execv("/proc/self/exe", args.data());
    std::fprintf(stderr, "dtnn simulate: cannot run /proc/self/exe again: %s\n", std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw dtnn::RuntimeError(fmt::format("simulate: waitpid failed: {}", std::strerror(errno)));
  }
  if (WIFSIGNALED(status)) {
    throw dtnn::RuntimeError(fmt::format("simulate: the simulation process ended by signal {} ({})",
                                         WTERMSIG(status), strsignal(WTERMSIG(status))));
  }
  return WEXITSTATUS(status);
}

// The simulation's first process: checks the machine folder and the options, derives the target machine's
// folder, then runs the simulation itself in a second process of this program (kSimulationProcess set), whose main
// is StarPU's: it starts SimGrid on the platform of STARPU_HOME and runs this program's main as a SimGrid actor
// (starpu_main, at the end of this file). Started from starpu_init in this process instead, SimGrid would have to
// attach the running thread, which forces its thread contexts: every switch between simulated workers is then a
// hand-over between OS threads through the kernel (resnet50_imagenet on 32 simulated workers: 23 min for 2 steps,
// 70% of it in the kernel), where SimGrid's own contexts switch within one thread. The platform must exist before
// SimGrid starts, hence the two processes.
// simulate's --conv where none was given: the algorithm the machine folder was calibrated with for this model,
// batch, tiles and fusion (kDefaultConv among several; kDefaultConv where there is none, for the error that follows).
std::string simulated_conv(const StepArgs& a, const nlohmann::json& machine) {
  if (!a.conv.empty()) return a.conv;
  std::string found;
  for (const auto& c : machine.value("calibrations", nlohmann::json::array())) {
    if (c.value("model", "") != a.model || c.value("batch_size", 0) != a.batch_size || c.value("tiles", 0) != a.tiles ||
        c.value("fusion", "") != a.fusion) {
      continue;
    }
    const std::string conv = c.value("conv", "");
    if (conv == kDefaultConv) return conv;
    if (found.empty()) found = conv;
  }
  return found.empty() ? std::string(kDefaultConv) : found;
}

int prepare_simulation(const StepArgs& given) {
  const dtnn::runtime::MachineFolder folder = dtnn::runtime::MachineFolder::open(given.folder);
  const fs::path dir = folder.dir();
  dtnn::runtime::use_machine_folder(dir, 0);
  setenv(kSimulationMachine, fs::absolute(dir).c_str(), 1);
  const nlohmann::json machine = dtnn::runtime::read_machine_file(dir);
  StepArgs a = given;
  a.conv = simulated_conv(given, machine);
  if (a.device != "cpu" && a.device != "cuda" && a.device != "all") {
    throw InvalidArgument(fmt::format("--device {}, expected cpu, cuda or all", a.device));
  }
  const bool gpu = a.device != "cpu";
  const bool bus = a.bus_gbps > 0.0 || a.bus_latency_us >= 0.0;
  if (bus && !gpu) {
    throw InvalidArgument(fmt::format("--bus-gbps {} / --bus-latency-us {} with --device {}: the bus is the GPUs' link "
                                      "to the host, expected --device cuda or all",
                                      a.bus_gbps, a.bus_latency_us, a.device));
  }
  if (a.sums_on_cores && (a.ranks < 2 || gpu)) {
    throw InvalidArgument(fmt::format("--sums-on-cores with --ranks {} and --device {}: the gradient sums of CPU "
                                      "ranks, expected --ranks 2 or more and --device cpu",
                                      a.ranks, a.device));
  }
  const int calibrated_gpus = dtnn::runtime::machine_gpus(dir);
  if (gpu && calibrated_gpus == 0) {
    throw InvalidArgument(fmt::format("--device {}: machine folder '{}' has no GPU, expected one calibrated with "
                                      "`dtnn calibrate --device cuda` on a GPU machine (or --device cpu)",
                                      a.device, given.folder));
  }
  // Simulated tasks take their calibrated times: a shape nobody calibrated would stop StarPU in the middle.
  bool calibrated_cpu = false;
  bool calibrated_gpu = false;
  double calibrated_overhead_us = 0.0;  // the last matching CPU calibration's cpu_task_overhead_us (0: none)
  std::string have;
  for (const auto& c : machine.value("calibrations", nlohmann::json::array())) {
    have += fmt::format("{}{} batch {} tiles {} conv {} fusion {}", have.empty() ? "" : "; ", c.value("model", ""),
                        c.value("batch_size", 0), c.value("tiles", 0), c.value("conv", ""), c.value("fusion", ""));
    const std::string device = c.value("device", std::string("cpu"));
    have += fmt::format(" device {}", device);
    if (c.value("model", "") != a.model || c.value("batch_size", 0) != a.batch_size || c.value("tiles", 0) != a.tiles ||
        c.value("conv", "") != a.conv || c.value("fusion", "") != a.fusion) {
      continue;
    }
    // A calibration with --device cuda holds the CUDA models of that graph's shapes (and the CPU ones only of the
    // tasks without a CUDA body); cpu the CPU ones; all both. --device all needs both kinds.
    calibrated_cpu = calibrated_cpu || device != "cuda";
    calibrated_gpu = calibrated_gpu || device != "cpu";
    if (device != "cuda" && c.contains("cpu_task_overhead_us")) {
      calibrated_overhead_us = c.at("cpu_task_overhead_us").get<double>();
    }
  }
  const bool calibrated = a.device == "cpu" ? calibrated_cpu : a.device == "cuda" ? calibrated_gpu
                                                                                  : calibrated_cpu && calibrated_gpu;
  if (!calibrated) {
    throw InvalidArgument(fmt::format(
        "--machine {}: no calibration of {} with batch {}, {} tiles, conv {}, fusion {} for --device {} (it has: {}), "
        "expected `dtnn calibrate --model {} --batch-size {} --tiles {} --conv {} --fusion {} --device {} --out {}` "
        "first",
        given.folder, a.model, a.batch_size, a.tiles, a.conv, a.fusion, a.device, have.empty() ? "none" : have,
        a.model, a.batch_size, a.tiles, a.conv, a.fusion, a.device, given.folder));
  }
  fmt::print("dtnn simulate: SimGrid, {} (conv {}) on machine {} ({}); codelets do not run and buffers hold "
             "nothing, so there is no loss, metric, checkpoint or evaluation\n",
             a.model, a.conv, given.folder, machine.value("cpu", std::string("?")));
  // A machine we do not have: a folder derived from the calibrated one for the life of this run.
  struct Derived {
    fs::path dir;
    ~Derived() {
      std::error_code ignored;
      if (!dir.empty()) fs::remove_all(dir, ignored);
    }
  } derived;
  if (gpu && a.gpus == 0) {
    throw InvalidArgument(fmt::format("--gpus 0 with --device {}, expected -1 (the machine's GPUs) or a count", a.device));
  }
  // More GPUs than the calibrated machine had are copies of its GPU 0 (runtime::derive_machine_folder).
  const int target_gpus = gpu && a.gpus > calibrated_gpus ? a.gpus : 0;
  if (a.cpus > 0 || a.cpu_speed != 1.0 || target_gpus > 0 || (gpu && a.gpu_speed != 1.0) || bus) {
    derived.dir = fs::temp_directory_path() / fmt::format("dtnn-target-{}", ::getpid());
    dtnn::runtime::derive_machine_folder(
        dir, derived.dir,
        dtnn::runtime::TargetMachine{a.cpus, a.cpu_speed, target_gpus, gpu ? a.gpu_speed : 1.0, a.bus_gbps,
                                     a.bus_latency_us});
    dtnn::runtime::use_machine_folder(derived.dir, 0);
    fmt::print("target machine: {} CPU cores at {} times the calibrated cores' speed{}{}\n",
               a.cpus > 0 ? fmt::format("{}", a.cpus) : "the calibrated machine's", a.cpu_speed,
               gpu ? fmt::format(", {} GPUs at {} times the calibrated GPU's speed",
                                 target_gpus > 0 ? target_gpus : calibrated_gpus, a.gpu_speed)
                   : "",
               bus ? fmt::format(", each linked to the host at {} and {}",
                                 a.bus_gbps > 0.0 ? fmt::format("{} Gb/s", a.bus_gbps) : "the calibrated bandwidth",
                                 a.bus_latency_us >= 0.0 ? fmt::format("{} us", a.bus_latency_us)
                                                         : "the calibrated latency")
                   : "");
  }
  // Every simulated GPU takes the models of the calibrated GPU 0 (StarPU keys CUDA models by device otherwise).
  if (gpu) setenv("STARPU_PERF_MODEL_HOMOGENEOUS_CUDA", "1", 1);
  const int cpus = dtnn::runtime::machine_cpus(derived.dir.empty() ? dir : derived.dir);
  if (a.workers > cpus) {
    throw InvalidArgument(fmt::format("--workers {}: the machine has {} CPU cores, expected at most {} (or a target "
                                      "machine with more: --cpus N)",
                                      a.workers, cpus, cpus));
  }
  // Read by the SimGrid StarPU's patched _starpu_simgrid_submit_job (scripts/build_starpu.sh, patch_duration_scatter).
  setenv("DTNN_SIMGRID_SCATTER", a.scatter ? "1" : "0", 1);
  setenv("DTNN_SIMGRID_SEED", std::to_string(a.seed % 1000000000u + 1).c_str(), 1);
  if (a.scatter && dlsym(RTLD_DEFAULT, "_dtnn_history_based_job_deviation") == nullptr) {
    throw InvalidArgument("--scatter: this SimGrid StarPU has no duration scatter (a build before dtnn's patch), "
                          "expected one built by the current scripts/build_starpu.sh --simgrid; rebuild it");
  }
  if (a.scatter) {
    fmt::print("task durations drawn around their models' means (log-normal, their calibrated deviations, seed {})\n",
               a.seed);
  }
  // Read by the same function's second patch (patch_worker_speeds).
  if (!a.worker_speeds.empty()) {
    if (static_cast<int>(a.worker_speeds.size()) != a.workers) {
      throw InvalidArgument(fmt::format("--worker-speeds {}: {} speeds for --workers {}, expected one per CPU worker",
                                        fmt::join(a.worker_speeds, ","), a.worker_speeds.size(), a.workers));
    }
    if (dlsym(RTLD_DEFAULT, "_dtnn_worker_length") == nullptr) {
      throw InvalidArgument("--worker-speeds: this SimGrid StarPU has no per-worker speeds (a build before dtnn's "
                            "patch), expected one built by the current scripts/build_starpu.sh --simgrid; rebuild it");
    }
    setenv("DTNN_SIMGRID_WORKER_SPEEDS", fmt::format("{}", fmt::join(a.worker_speeds, ",")).c_str(), 1);
    fmt::print("CPU workers at {} times their models' means\n", fmt::join(a.worker_speeds, ", "));
  } else {
    unsetenv("DTNN_SIMGRID_WORKER_SPEEDS");
  }
  // Read by the SimGrid StarPU's patched CPU driver (patch_task_overhead): the measured time between two tasks of a
  // real worker, on cores of --cpu-speed, in place of StarPU's 1 us per buffer.
  const double overhead_us = (a.task_overhead_us >= 0.0 ? a.task_overhead_us : calibrated_overhead_us) / a.cpu_speed;
  if (overhead_us > 0.0) {
    if (dlsym(RTLD_DEFAULT, "_dtnn_task_overhead_s") == nullptr) {
      throw InvalidArgument(fmt::format(
          "--task-overhead-us {}: this SimGrid StarPU cannot charge a time between tasks (a build before dtnn's "
          "patch), expected one built by the current scripts/build_starpu.sh --simgrid; rebuild it (or "
          "--task-overhead-us 0)",
          overhead_us));
    }
    setenv("DTNN_SIMGRID_TASK_OVERHEAD_US", fmt::format("{}", overhead_us).c_str(), 1);
    setenv("STARPU_SIMGRID_FETCHING_INPUT_COST", "0", 1);
    fmt::print("CPU workers spend {:.1f} us between two tasks ({})\n", overhead_us,
               a.task_overhead_us >= 0.0 ? "--task-overhead-us" : "the calibration's");
  } else {
    unsetenv("DTNN_SIMGRID_TASK_OVERHEAD_US");
  }
  if (a.ranks > 1) {
    fmt::print("{} data-parallel ranks: this rank's graph, each gradient bucket's allreduce timed as a ring over "
               "links of {} Gb/s and {} us (no byte moves){}\n",
               a.ranks, a.link_gbps, a.link_latency_us,
               a.sums_on_cores ? ", spent on this rank's CPU workers (--sums-on-cores)" : "");
  }
  return run_simulation_process();
}

int run_simulate(const StepArgs& given) {
  if (!dtnn::runtime::simulated()) {
    throw InvalidArgument("simulate: this build runs its codelets; simulations run in the DTNN_SIMGRID build "
                          "(scripts/setup.sh test builds it in build-simgrid: build-simgrid/bin/dtnn simulate ...)");
  }
  if (std::getenv(kSimulationProcess) == nullptr) return prepare_simulation(given);
  // The second process, a SimGrid actor: STARPU_HOME is the machine folder to simulate (derived from --machine, whose
  // calibrations the first process checked).
  StepArgs a = given;
  const char* machine_dir = std::getenv(kSimulationMachine);
  const fs::path machine = machine_dir != nullptr ? fs::path(machine_dir) : fs::path(a.folder);
  a.conv = simulated_conv(given, dtnn::runtime::read_machine_file(machine));
  const fs::path dir = a.folder;
  const bool gpu = a.device != "cpu";
  const StepOutcome out = run_step_args(a);
  const dtnn::StepRunResult& r = out.result;
  fmt::print("{}\npredicted ", out.engine);
  print_step_result(r, a.batch_size * a.ranks);
  const double per_step_ms = out.network_busy_s * 1e3 / static_cast<double>(a.steps);
  if (a.ranks > 1) {
    fmt::print("  network: {} allreduces, {:.2f} ms a step (hidden or not; compare with --ranks 1 for the exposed "
               "part)\n",
               out.allreduces, per_step_ms);
  }
  if (!a.trace.empty()) fmt::print("Trace: {} (simulated times)\n", a.trace);
  if (!a.report.empty()) {
    nlohmann::json doc = step_result_json(a, r);
    doc["machine"] = fs::absolute(dir).string();
    doc["simulated"] = true;
    doc["scatter"] = a.scatter;
    doc["target"] = {{"cpus", a.cpus}, {"cpu_speed", a.cpu_speed}, {"gpus", gpu ? out.cuda_workers : 0},
                     {"gpu_speed", gpu ? a.gpu_speed : 1.0}, {"worker_speeds", a.worker_speeds},
                     {"bus_gbps", a.bus_gbps}, {"bus_latency_us", a.bus_latency_us}};
    const char* overhead = std::getenv("DTNN_SIMGRID_TASK_OVERHEAD_US");
    doc["task_overhead_us"] = overhead != nullptr ? std::stod(overhead) : 0.0;
    doc["network"] = {{"link_gbps", a.link_gbps}, {"link_latency_us", a.link_latency_us},
                      {"sums_on_cores", a.sums_on_cores},
                      {"bucket_mb", a.bucket_mb}, {"allreduces", out.allreduces},
                      {"allreduce_ms_per_step", per_step_ms}};
    dtnn::runtime::write_text_file(a.report, doc.dump(2) + "\n", "report");
  }
  return 0;
}

void add_step_options(CLI::App* app, StepArgs& a) {
  app->add_option("--model", a.model, "model name (see `dtnn models`)")->capture_default_str();
  app->add_option("--batch-size", a.batch_size, "samples per step")->check(CLI::PositiveNumber)->capture_default_str();
  app->add_option("--tiles", a.tiles, "batch tiles: tasks per layer and pass")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app->add_option("--workers", a.workers, "CPU workers")->check(CLI::PositiveNumber)->capture_default_str();
  app->add_option("--scheduler", a.scheduler, "StarPU scheduler (lws, dmdas, ...)")->capture_default_str();
  app->add_option("--priorities", a.priorities, "on: dtnn's task priorities; off: every task at 0")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app->add_option("--conv", a.conv,
                  fmt::format("convolution algorithm: convgemm, im2col or winograd (calibrate: default {}; simulate: "
                              "default the one the machine folder was calibrated with for this model, batch, tiles and "
                              "fusion, {} where it has several)",
                              kDefaultConv, kDefaultConv))
      ->check(CLI::IsMember({"convgemm", "im2col", "winograd"}));
  app->add_option("--fusion", a.fusion, "on or off (see dtnn train --help)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app->add_option("--steps", a.steps, "training steps, warm-up included")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--warmup", a.warmup, "first steps left out of the times")->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--seed", a.seed, "seed of the weights and the synthetic samples")->capture_default_str();
  app->add_option("--trace", a.trace, "Chrome trace-event JSON of every task (opens in Perfetto)");
  app->add_option("--report", a.report, "write the times and the workers' utilisation as JSON");
}

void add_run_options(CLI::App* app, RunArgs& a) {
  app->add_option("--model", a.model, "model name (see `dtnn models`)")->capture_default_str();
  app->add_option("--dataset", a.dataset, "fashion-mnist, mnist, cifar10, cifar100, h5 or synthetic")
      ->check(CLI::IsMember({"fashion-mnist", "mnist", "cifar10", "cifar100", "h5", "synthetic"}))
      ->capture_default_str();
  app->add_option("--data-dir", a.data_dir, "folder of the IDX or CIFAR files (default for fashion-mnist: "
                                            "/usr/share/datasets/fashion-mnist)");
  app->add_option("--data-file", a.data_file, "HDF5 dataset of --dataset h5 (see `dtnn convert`), streamed");
  app->add_option("--train-samples", a.train_samples, "a seeded, class-balanced subset of the training set")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--test-samples", a.test_samples, "a seeded, class-balanced subset of the test set")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--synthetic-samples", a.synthetic_samples, "training samples of --dataset synthetic")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_flag("--normalize", a.normalize, "per-channel normalisation with the training set's mean and std");
  app->add_option("--conv", a.conv,
                  "convolution algorithm: convgemm, im2col, winograd (Winograd F(2x2,3x3) for 3x3 stride-1 layers, "
                  "convgemm for the rest) or auto (times each that fits, per shape)")
      ->check(CLI::IsMember({"convgemm", "im2col", "winograd", "auto"}))
      ->capture_default_str();
  app->add_option("--fusion", a.fusion,
                  "on: a ReLU runs inside the convolution, dense layer, BatchNorm or residual Add before it, and a "
                  "residual block's BatchNorm, Add and ReLU are one pass (same results, fewer tensors and passes); "
                  "off: every layer's own tasks")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app->add_option("--batch-size", a.batch_size, "samples per step (per rank under mpirun)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--loss", a.loss, "cce (softmax + categorical cross-entropy) or bce (sigmoid + binary)")
      ->check(CLI::IsMember({"cce", "bce"}))
      ->capture_default_str();
  app->add_option("--tiles", a.tiles, "batch tiles: tasks per layer and pass")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app->add_option("--workers", a.workers,
                  "CPU workers (0: one per core, less one per GPU used; more than the cores: unbound)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--scheduler", a.scheduler,
                  "StarPU scheduler (lws, dmdas, prio, eager, ...; auto: lws on CPUs, dmdas with GPUs) or one of "
                  "dtnn's own (dtnn-uprank; see `dtnn schedulers`)")
      ->capture_default_str();
  app->add_option("--host-allocator", a.host_allocator,
                  "host memory of the activations and gradients (released at their last use): pool (best-fit, kept "
                  "for reuse), system (malloc and free) or starpu (StarPU's cache of equal sizes)")
      ->check(CLI::IsMember({"pool", "system", "starpu"}))
      ->capture_default_str();
  app->add_option("--device", a.device,
                  "where tasks run: cpu, cuda (GPUs; CPU-only tasks such as loading stay on CPUs), all (CPUs and "
                  "GPUs, placed by the scheduler's performance models) or auto (cuda when a GPU is found)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "all"}))
      ->capture_default_str();
  app->add_option("--gpus", a.gpus, "GPUs to use (-1: all; under mpirun one per rank)")
      ->check(CLI::Range(-1, 64))
      ->capture_default_str();
  app->add_option("--seed", a.seed, "seed of initialisation, shuffling, augmentation, dropout and subsets")
      ->capture_default_str();
  app->add_option("--report", a.report, "write a JSON summary of the run");
  app->add_flag("--quiet", a.quiet, "no summary table and no progress lines");
}

void add_train_options(CLI::App* app, TrainArgs& a) {
  add_run_options(app, a);
  app->add_option("--epochs", a.epochs, "epochs")->check(CLI::PositiveNumber)->capture_default_str();
  app->add_option("--steps-per-epoch", a.steps_per_epoch, "steps per epoch (0: the whole training set)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--optimizer", a.optimizer.name, "sgd, rmsprop, adam, adamw or nadam")
      ->check(CLI::IsMember(dtnn::optimizer_names(), CLI::ignore_case))
      ->capture_default_str();
  app->add_option("--lr", a.optimizer.learning_rate, "learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app->add_option("--momentum", a.optimizer.momentum, "momentum of sgd (default 0.9) and rmsprop (default 0)")
      ->check(CLI::Range(0.0f, 0.999999f));
  app->add_option("--nesterov", a.optimizer.nesterov, "1: Nesterov momentum (sgd)")->check(CLI::Range(0, 1));
  app->add_option("--weight-decay", a.optimizer.weight_decay, "L2 weight decay (decoupled for adamw)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--beta1", a.optimizer.beta1, "adam, adamw, nadam")->check(CLI::Range(0.0f, 0.999999f));
  app->add_option("--beta2", a.optimizer.beta2, "adam, adamw, nadam")->check(CLI::Range(0.0f, 0.999999f));
  app->add_option("--eps", a.optimizer.eps, "rmsprop, adam, adamw, nadam")->check(CLI::PositiveNumber);
  app->add_option("--alpha", a.optimizer.alpha, "rmsprop's smoothing constant (PyDTNN's rho)")
      ->check(CLI::Range(0.0f, 0.999999f));
  app->add_option("--label-smoothing", a.label_smoothing, "targets (1 - s) one-hot + s / classes")
      ->check(CLI::Range(0.0f, 0.999f));
  app->add_flag("--flip", a.flip, "augmentation: random horizontal flips");
  app->add_option("--crop-padding", a.crop_padding, "augmentation: random crops of the image padded by this much")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--validation-split", a.validation_split, "fraction of the training set kept for validation")
      ->check(CLI::Range(0.0, 0.99));
  app->add_flag("--test-as-validation", a.test_as_validation, "validate on the test set after every epoch");
  app->add_option("--warmup-epochs", a.warmup_epochs, "linear learning-rate warm-up over this many epochs")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--warmup-start", a.warmup_start, "warm-up's first learning rate, as a fraction of --lr")
      ->check(CLI::Range(1e-6f, 1.0f))
      ->capture_default_str();
  app->add_option("--lr-step-epochs", a.lr_step_epochs, "multiply the learning rate by --lr-decay every N epochs")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--lr-decay", a.lr_decay, "factor of --lr-step-epochs and --plateau-patience")
      ->check(CLI::Range(1e-6f, 1.0f))
      ->capture_default_str();
  app->add_option("--plateau-patience", a.plateau_patience,
                  "multiply the learning rate by --lr-decay after this many epochs without improvement of --monitor")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--lr-schedule", a.lr_schedule,
                  "cosine (decay per step over all the epochs, to --min-lr) or constant; the other schedules apply "
                  "on top")
      ->check(CLI::IsMember({"cosine", "constant"}))
      ->capture_default_str();
  app->add_option("--min-lr", a.min_lr, "floor of the learning-rate schedules")->check(CLI::NonNegativeNumber);
  app->add_option("--early-stopping", a.early_stopping,
                  "stop after this many epochs without improvement of --monitor, restoring the best weights")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--monitor", a.monitor, "metric of the schedules and checkpoints: val_loss, val_accuracy, loss, "
                                          "accuracy")
      ->check(CLI::IsMember({"val_loss", "val_accuracy", "loss", "accuracy"}))
      ->capture_default_str();
  app->add_option("--stop-at-loss", a.stop_at_loss, "stop once the (validation) loss is at or below this");
  app->add_flag("--scale-lr", a.scale_lr, "multiply the learning rate by the number of ranks (linear scaling rule)");
  app->add_option("--history", a.history, "per-epoch metrics, CSV or JSON by the file's extension");
  app->add_option("--trace", a.trace, "Chrome trace-event JSON of every task (opens in Perfetto)");
  app->add_option("--dag", a.dag, "one training step's task graph as JSON: tasks, dependencies, times, bounds");
  app->add_option("--priorities", a.priorities, "on: dtnn's task priorities (default); off: every task at 0")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app->add_option("--dag-step", a.dag_step, "the step --dag records (-1: the third step of the run)")
      ->check(CLI::Range(std::int64_t{-1}, std::numeric_limits<std::int64_t>::max()));
  app->add_option("--fxt", a.fxt, "record StarPU's FxT trace into this folder (for starpu_fxt_tool; README)");
  app->add_option("--checkpoint-dir", a.checkpoint_dir, "save HDF5 checkpoints there after every epoch");
  app->add_option("--keep", a.keep, "checkpoints kept besides the best")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--checkpoint-steps", a.checkpoint_steps, "also save every N steps")->check(CLI::NonNegativeNumber);
  app->add_option("--resume", a.resume, "continue from a checkpoint file, or from the newest in a directory");
  app->add_flag("--no-test", a.no_test, "skip the evaluation on the test set");
  app->add_option("--allreduce", a.allreduce,
                  "MPI gradient reduction: overlapped (each bucket as soon as its gradients are final) or "
                  "blocking (after the whole backward pass)")
      ->check(CLI::IsMember({"overlapped", "blocking"}))
      ->capture_default_str();
  app->add_option("--allreduce-backend", a.allreduce_backend,
                  "mpi (host buffers), nccl (GPU buffers) or auto (nccl when training on GPUs)")
      ->check(CLI::IsMember({"auto", "mpi", "nccl"}))
      ->capture_default_str();
  app->add_option("--bucket-mb", a.bucket_mb, "size of a gradient bucket for the allreduce, MiB")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--tail-buckets", a.tail_buckets,
                  "1: a bucket also closes at a layer boundary once it holds as much as the gradients still to come, "
                  "so the step's last reduction is small; 0: buckets close on size only (as DDP)")
      ->check(CLI::IsMember({0, 1}))
      ->capture_default_str();
  app->add_option("--mpi-timeout", a.mpi_timeout,
                  "seconds a rank waits for the others before aborting the job (a rank died or hangs)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_flag("--drop-last", a.drop_last,
                "drop a last global batch smaller than the others (default: split it evenly over the ranks)");
  app->add_flag("--sync-bn", a.sync_bn,
                "BatchNorm statistics over every rank's rows of the global batch (default: each rank's own)");
  app->add_option("--fail-rank", a.fail_rank, "fault injection (tests): the rank that fails")->group("");
  app->add_option("--fail-step", a.fail_step, "fault injection (tests): before this global step")->group("");
  app->add_option("--fail-mode", a.fail_mode, "fault injection (tests): kill or hang")
      ->check(CLI::IsMember({"kill", "hang"}))
      ->group("");
}

}  // namespace

#ifdef DTNN_SIMGRID
// starpu.h renames main into starpu_main in a SimGrid StarPU, whose own main would start SimGrid before this one
// runs. dtnn keeps its main, and hands over to StarPU's only in the simulation's second process (below).
#undef main
#endif

namespace {

int dtnn_main(int argc, char** argv) {
  g_arguments.assign(argv, argv + argc);
  CLI::App app{"dtnn: train neural networks whose every step is a StarPU task graph"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");

  TrainArgs t;
  CLI::App* train = app.add_subcommand("train", "train a model of the zoo and report test accuracy");
  add_train_options(train, t);

  TrainArgs b;
  b.dataset = "synthetic";
  b.epochs = 2;
  b.steps_per_epoch = 20;
  CLI::App* bench = app.add_subcommand("benchmark", "training throughput (images/s after a warm-up epoch), by "
                                                    "default on synthetic data of the model's input shape");
  add_train_options(bench, b);

  RunArgs e;
  std::string checkpoint;
  CLI::App* eval = app.add_subcommand("evaluate", "test accuracy, top-5, loss, MSE and MAE of a checkpoint");
  add_run_options(eval, e);
  eval->add_option("--checkpoint", checkpoint, "checkpoint file, or a directory (its newest)")->required();

  CLI::App* models = app.add_subcommand("models", "list the model zoo");
  CLI::App* schedulers = app.add_subcommand("schedulers", "list the scheduling policies --scheduler accepts");
  std::string summary_model = "simplecnn";
  CLI::App* summary = app.add_subcommand("summary", "print a model's layers, output shapes and parameters");
  summary->add_option("model", summary_model, "model name")->capture_default_str();

  std::string convert_dataset = "fashion-mnist", convert_dir, convert_output;
  CLI::App* convert = app.add_subcommand("convert", "write a dataset as an HDF5 file (uint8 NHWC, chunked)");
  convert->add_option("--dataset", convert_dataset, "fashion-mnist, mnist, cifar10 or cifar100")
      ->check(CLI::IsMember({"fashion-mnist", "mnist", "cifar10", "cifar100"}))
      ->capture_default_str();
  convert->add_option("--data-dir", convert_dir, "folder of the IDX or CIFAR files");
  convert->add_option("--output", convert_output, "the HDF5 file to write")->required();

  StepArgs cal;
  cal.steps = 20;
  cal.workers = 2;
  CLI::App* calibrate = app.add_subcommand(
      "calibrate", "run steps of a model (synthetic data) with StarPU's performance models calibrating into a "
                   "machine folder, for dtnn simulate");
  add_step_options(calibrate, cal);
  calibrate->add_option("--out", cal.folder, "the machine folder, or its archive NAME.tar.xz (.tar.gz, .tar) (created; "
                        "models of several runs accumulate)")
      ->required();
  calibrate->add_option("--device", cal.device,
                        "where the tasks run: cpu, cuda (the GPUs' models; CUDA build) or all (CPUs and GPUs, "
                        "placed by the scheduler, e.g. dmdas)")
      ->check(CLI::IsMember({"cpu", "cuda", "all"}))
      ->capture_default_str();
  calibrate->add_option("--gpus", cal.gpus, "GPUs with --device cuda|all (-1: all)")->capture_default_str();

  StepArgs sim;
  CLI::App* simulate = app.add_subcommand(
      "simulate", "predicted step time, images/s and worker utilisation of a model on a calibrated machine "
                  "(SimGrid; the DTNN_SIMGRID build)");
  add_step_options(simulate, sim);
  simulate->add_option("--machine", sim.folder, "a machine folder or its archive (dtnn calibrate --out)")->required();
  simulate->add_option("--cpus", sim.cpus, "CPU cores of the target machine (0: the calibrated machine's)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  simulate->add_option("--cpu-speed", sim.cpu_speed, "the target's cores against the calibrated ones (2: twice as "
                                                   "fast; every task's calibrated time is divided by it)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  simulate->add_option("--device", sim.device,
                       "cpu: every task on the CPU workers; cuda: every task with a CUDA body on the simulated GPUs; "
                       "all: the scheduler chooses (cuda needs a calibration with --device cuda or all, all one with --device "
                       "all or one of each)")
      ->check(CLI::IsMember({"cpu", "cuda", "all"}))
      ->capture_default_str();
  simulate->add_option("--gpus", sim.gpus, "simulated GPUs with --device cuda|all (-1: the calibrated machine's; "
                                           "more are copies of its GPU 0)")
      ->capture_default_str();
  simulate->add_option("--gpu-speed", sim.gpu_speed, "the target's GPUs against the calibrated one (every CUDA "
                                                     "task's calibrated time is divided by it)")
      ->capture_default_str();
  simulate->add_option("--bus-gbps", sim.bus_gbps,
                       "with --device cuda|all: each GPU's link to the host's memory, Gb/s each way (in the platform "
                       "SimGrid moves the data over and in the bus files the dm* schedulers predict with); default "
                       "the calibrated GPU's")
      ->check(CLI::PositiveNumber);
  simulate->add_option("--bus-latency-us", sim.bus_latency_us,
                       "with --device cuda|all: that link's latency, us; default the calibrated GPU's")
      ->check(CLI::NonNegativeNumber);
  simulate->add_option("--ranks", sim.ranks, "data-parallel ranks (one simulated; the others' allreduces on a "
                                             "simulated network)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  simulate->add_option("--link-gbps", sim.link_gbps, "bandwidth of each node's link, Gb/s")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  simulate->add_option("--link-latency-us", sim.link_latency_us, "latency of a message between two nodes, us")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  simulate->add_flag("--sums-on-cores", sim.sums_on_cores,
                     "each gradient sum is a task on one of the rank's CPU workers for the network model's time "
                     "(ranks through shared memory or TCP, where the cores copy and add the bytes), not a network "
                     "beside them (RDMA, NCCL)");
  simulate->add_option("--bucket-mb", sim.bucket_mb, "size of a gradient bucket for the allreduce, MiB")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  simulate->add_option("--tail-buckets", sim.tail_buckets, "as dtnn train --tail-buckets")
      ->check(CLI::IsMember({0, 1}))
      ->capture_default_str();
  simulate->add_option("--worker-speeds", sim.worker_speeds,
                       "comma-separated speed of each simulated CPU worker, one per --workers (each task on it lasts "
                       "its model's mean / the speed; the schedulers still plan with the means): cores of unequal "
                       "speed, as `dtnn calibrate` measures them (its cpu_worker_speeds); default all 1")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  simulate->add_option("--task-overhead-us", sim.task_overhead_us,
                       "a CPU worker's time between two tasks, charged before each simulated CPU task (divided by "
                       "--cpu-speed); default the calibration's own measure (its cpu_task_overhead_us, 0 in one "
                       "without it); 0: StarPU's own 1 us per buffer")
      ->check(CLI::NonNegativeNumber);
  simulate->add_flag("--scatter", sim.scatter,
                     "each task lasts a draw from a log-normal distribution of its model's mean and deviation (one "
                     "generator seeded by --seed) instead of the mean");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& err) {
    const int rc = app.exit(err);
    return rc == 0 ? 0 : 2;
  }
  try {
    if (*train) return run_train(t, 0);
    if (*bench) return run_train(b, 1);
    if (*eval) return run_evaluate(e, checkpoint);
    if (*models) return run_models();
    if (*schedulers) return run_schedulers();
    if (*summary) return run_summary(summary_model);
    if (*convert) return run_convert(convert_dataset, convert_dir, convert_output);
    if (*calibrate) {
      if (cal.conv.empty()) cal.conv = kDefaultConv;
      return run_calibrate(cal);
    }
    if (*simulate) return run_simulate(sim);
  } catch (const InvalidArgument& err) {
    fmt::print(stderr, "dtnn: error: {}\n", err.what());
    return 2;
  } catch (const std::exception& err) {
    fmt::print(stderr, "dtnn: error: {}\n", err.what());
    return 1;
  }
  return 0;
}

}  // namespace

#ifdef DTNN_SIMGRID
// StarPU's main (below) runs this one as a SimGrid actor; the linker exports it to libstarpu, which refers to it.
extern "C" int starpu_main(int argc, char** argv) { return dtnn_main(argc, argv); }

int main(int argc, char** argv) {
  if (std::getenv(kSimulationProcess) == nullptr) return dtnn_main(argc, argv);
  // The simulation's second process (prepare_simulation): StarPU's main, the weak one of libstarpu that this one
  // hides, starts SimGrid on the platform of STARPU_HOME and runs starpu_main in it.
  using Main = int (*)(int, char**);
  const auto starpu = reinterpret_cast<Main>(dlsym(RTLD_NEXT, "main"));
  if (starpu == nullptr) {
    std::fprintf(stderr, "dtnn simulate: StarPU's main not found (%s), expected a StarPU built with --enable-simgrid\n",
                 dlerror());
    return 1;
  }
  return starpu(argc, argv);
}
#else
int main(int argc, char** argv) { return dtnn_main(argc, argv); }
#endif
