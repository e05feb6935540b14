// SPDX-License-Identifier: Apache-2.0
// dtnn train: a model of the zoo trained on a dataset, then tested (also under mpirun: data parallel).
// dtnn benchmark: the same on synthetic data by default, for its throughput.
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "app/report.hpp"
#include "app/train.hpp"
#include "io/checkpoint.hpp"
#include "models/checkpointing.hpp"
#include "models/distributed.hpp"
#include "models/schedules.hpp"
#include "models/preemption.hpp"
#include "models/step_probes.hpp"
#include "runtime/trace.hpp"

namespace dtnn::app {
namespace {

namespace fs = std::filesystem;

// --optimizer, --lr and the optimizers' hyper-parameters (OptimizerConfig).
void add_optimizer_options(CLI::App* app, OptimizerConfig& o) {
  app->add_option("--optimizer", o.name, "sgd, rmsprop, adam, adamw or nadam")
      ->check(CLI::IsMember(optimizer_names(), CLI::ignore_case))
      ->capture_default_str();
  app->add_option("--lr", o.learning_rate, "learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app->add_option("--momentum", o.momentum, "momentum of sgd (default 0.9) and rmsprop (default 0)")
      ->check(CLI::Range(0.0f, 0.999999f));
  app->add_option("--nesterov", o.nesterov, "1: Nesterov momentum (sgd)")
      ->type_name("INT")
      ->check(CLI::Range(0, 1));
  app->add_option("--weight-decay", o.weight_decay, "L2 weight decay (decoupled for adamw)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--beta1", o.beta1, "adam, adamw, nadam")->check(CLI::Range(0.0f, 0.999999f));
  app->add_option("--beta2", o.beta2, "adam, adamw, nadam")->check(CLI::Range(0.0f, 0.999999f));
  app->add_option("--eps", o.eps, "rmsprop, adam, adamw, nadam")->check(CLI::PositiveNumber);
  app->add_option("--alpha", o.alpha, "rmsprop's smoothing constant (PyDTNN's rho)")
      ->check(CLI::Range(0.0f, 0.999999f));
}

// The augmentation, the validation set and the learning-rate schedules (FitOptions, ScheduleOptions).
void add_schedule_options(CLI::App* app, TrainOptions& o) {
  app->add_option("--label-smoothing", o.fit.label_smoothing_, "targets (1 - s) one-hot + s / classes")
      ->check(CLI::Range(0.0f, 0.999f));
  app->add_flag("--flip", o.fit.augment_.flip, "augmentation: random horizontal flips");
  app->add_option("--crop-padding", o.fit.augment_.crop_padding,
                  "augmentation: random crops of the image padded by this much")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--validation-split", o.validation_split, "fraction of the training set kept for validation")
      ->check(CLI::Range(0.0, 0.99));
  app->add_flag("--test-as-validation", o.test_as_validation, "validate on the test set after every epoch");
  app->add_option("--no-weight-decay", o.no_weight_decay,
                  "parameter groups without weight decay, comma-separated: bias, norm, embedding (a transformer's "
                  "recipe: bias,norm,embedding)")
      ->delimiter(',')
      ->check(CLI::IsMember(weight_decay_groups()));
  app->add_option("--clip-grad-norm", o.fit.clip_grad_norm_,
                  "clip the gradients to this global 2-norm before each update (PyTorch's clip_grad_norm_)")
      ->check(CLI::PositiveNumber);
  app->add_option("--warmup-epochs", o.schedule.warmup_epochs_, "linear learning-rate warm-up over this many epochs")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--warmup-steps", o.schedule.warmup_steps_,
                  "linear learning-rate warm-up over this many steps; the cosine decay then starts from the peak")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--warmup-start", o.schedule.warmup_start_, "warm-up's first learning rate, as a fraction of --lr")
      ->check(CLI::Range(1e-6f, 1.0f))
      ->capture_default_str();
  app->add_option("--lr-step-epochs", o.schedule.lr_step_epochs_,
                  "multiply the learning rate by --lr-decay every N epochs")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--lr-decay", o.schedule.lr_decay_, "factor of --lr-step-epochs and --plateau-patience")
      ->check(CLI::Range(1e-6f, 1.0f))
      ->capture_default_str();
  app->add_option("--plateau-patience", o.schedule.plateau_patience_,
                  "multiply the learning rate by --lr-decay after this many epochs without improvement of --monitor")
      ->check(CLI::NonNegativeNumber);
  add_named(app, "--lr-schedule", o.schedule.cosine_, {{"cosine", true}, {"constant", false}},
            "cosine (decay per step over all the epochs, to --min-lr) or constant; the other schedules apply on top");
  app->add_option("--min-lr", o.schedule.min_lr_, "floor of the learning-rate schedules")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--early-stopping", o.schedule.early_stopping_,
                  "stop after this many epochs without improvement of --monitor, restoring the best weights")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--monitor", o.schedule.monitor_,
                  "metric of the schedules and checkpoints: val_loss, val_accuracy, loss, accuracy")
      ->check(CLI::IsMember({"val_loss", "val_accuracy", "loss", "accuracy"}))
      ->capture_default_str();
  app->add_option("--stop-at-loss", o.schedule.stop_at_loss_, "stop once the (validation) loss is at or below this");
  app->add_flag("--scale-lr", o.scale_lr, "multiply the learning rate by the number of ranks (linear scaling rule)");
}

// What a run writes besides its report: history, traces, the step's graph, checkpoints; and --resume, --no-test.
void add_output_options(CLI::App* app, TrainOptions& o) {
  app->add_option("--history", o.history, "per-epoch metrics, CSV or JSON by the file's extension");
  app->add_option("--trace", o.trace, "Chrome trace-event JSON of every task (opens in Perfetto)");
  app->add_option("--dag", o.dag, "one training step's task graph as JSON: tasks, dependencies, times, bounds");
  add_named(app, "--priorities", o.priorities, priority_names(),
            "on: dtnn's task priorities (default); off: every task at 0");
  app->add_option("--dag-step", o.dag_step, "the step --dag records (-1: the third step of the run)")
      ->check(CLI::Range(std::int64_t{-1}, std::numeric_limits<std::int64_t>::max()));
  app->add_option("--fxt", o.run.engine.fxt_dir_, "record StarPU's FxT trace into this folder (for starpu_fxt_tool; "
                                                  "docs/building.md)");
  app->add_option("--checkpoint-dir", o.checkpoint_dir, "save HDF5 checkpoints there after every epoch");
  app->add_option("--keep", o.keep, "checkpoints kept besides the best")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--checkpoint-steps", o.checkpoint.every_steps_, "also save every N steps")
      ->check(CLI::NonNegativeNumber);
  add_named(app, "--on-checkpoint-error", o.checkpoint.on_error_,
            {{"stop", CheckpointErrors::kStop}, {"warn", CheckpointErrors::kWarn}},
            "a checkpoint that cannot be written (full disk, read-only folder): stop training with the error, or warn "
            "and go on; the checkpoints already written are kept either way");
  add_named(app, "--on-nan", o.on_nan, {{"stop", OnNonFinite::kStop}, {"skip-step", OnNonFinite::kSkipStep}},
            "a step whose loss is NaN or infinite: stop, naming the first layer whose output or gradient is not finite "
            "(found on a replay of the step), or skip that step's update and go on (the run replayed to before it "
            "from its newest checkpoint; at most 8 steps a run)");
  app->add_option("--resume", o.resume, "continue from a checkpoint file, or from the newest in a directory");
  app->add_flag("--no-test", o.no_test, "skip the evaluation on the test set");
}

// Data parallelism under mpirun (DataParallelOptions), and the fault injection of the tests.
void add_parallel_options(CLI::App* app, TrainOptions& o) {
  add_named(app, "--allreduce", o.parallel.mode_,
            {{"overlapped", runtime::AllreduceMode::kOverlapped}, {"blocking", runtime::AllreduceMode::kBlocking}},
            "MPI gradient reduction: overlapped (each bucket as soon as its gradients are final) or blocking (after "
            "the whole backward pass)");
  app->add_option_function<std::string>(
         "--allreduce-backend",
         [&o](const std::string& name) {
           if (name == "auto") {
             o.parallel.backend_.reset();
           } else {
             o.parallel.backend_ = name == "nccl" ? runtime::AllreduceBackend::kNccl : runtime::AllreduceBackend::kMpi;
           }
         },
         "mpi (host buffers), nccl (GPU buffers) or auto (nccl when training on GPUs)")
      ->check(CLI::IsMember({"auto", "mpi", "nccl"}))
      ->default_str("auto");
  add_named(app, "--rank-sum", o.parallel.rank_sum_,
            {{"allreduce", RankSum::kAllreduce}, {"ordered", RankSum::kOrdered}},
            "allreduce: each rank sums its samples' gradients, then an allreduce adds the ranks' sums (the bits "
            "depend on the rank count); ordered: each gradient is one chain of additions through the ranks in rank "
            "order, the bits of one rank training on the whole batch (BatchNorm needs --sync-bn)");
  add_scaled(app, "--bucket-mb", o.parallel.buckets_.bytes_, kMiB, "size of a gradient bucket for the allreduce, MiB")
      ->check(CLI::PositiveNumber);
  app->add_option("--tail-buckets", o.parallel.buckets_.tail_buckets_,
                  "1: a bucket also closes at a layer boundary once it holds as much as the gradients still to come, "
                  "so the step's last reduction is small; 0: buckets close on size only (as DDP)")
      ->type_name("INT")
      ->check(CLI::IsMember({0, 1}))
      ->default_str(o.parallel.buckets_.tail_buckets_ ? "1" : "0");
  app->add_option("--mpi-timeout", o.mpi_timeout,
                  "seconds a rank waits for the others before aborting the job (a rank died, hangs or is unreachable)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_flag("--drop-last", o.parallel.drop_last_,
                "drop a last global batch smaller than the others (default: split it evenly over the ranks)");
  app->add_flag("--sync-bn", o.parallel.sync_batchnorm_,
                "BatchNorm statistics over every rank's rows of the global batch (default: each rank's own)");
  app->add_option("--fail-rank", o.fail_rank, "fault injection (tests): the rank that fails")->group("");
  app->add_option("--fail-step", o.fail_step, "fault injection (tests): before this global step")->group("");
  app->add_option("--fail-mode", o.fail_mode, "fault injection (tests): kill, hang, sigterm, sigterm-twice or nan")
      ->check(CLI::IsMember({"kill", "hang", "sigterm", "sigterm-twice", "nan"}))
      ->group("");
}

void add_train_options(CLI::App* app, TrainOptions& o) {
  add_run_options(app, o.run, {o.fit.batch_size_, o.fit.tiles_, o.fit.loss_, o.fit.seed_});
  app->add_option("--epochs", o.fit.epochs_, "epochs")->check(CLI::PositiveNumber)->capture_default_str();
  app->add_option("--steps-per-epoch", o.fit.steps_per_epoch_, "steps per epoch (0: the whole training set)")
      ->check(CLI::NonNegativeNumber);
  add_optimizer_options(app, o.optimizer);
  add_schedule_options(app, o);
  add_output_options(app, o);
  add_parallel_options(app, o);
}

// trace.json -> trace.rank1.json on rank 1 of a multi-rank run.
std::string per_rank(const std::string& file, const runtime::Mpi& mpi) {
  if (!mpi.active()) return file;
  const fs::path p(file);
  return (p.parent_path() / (p.stem().string() + fmt::format(".rank{}", mpi.rank()) + p.extension().string()))
      .string();
}

// What rebuilds the model from a checkpoint (CheckpointMeta::model_options).
std::string model_options_json(const ZooModelOptions& model, const models::ModelInfo& info) {
  return nlohmann::json{{"classes", info.classes}, {"conv", to_string(model.conv)}, {"input", info.input}}.dump();
}

// The fault-injection option's effect, as a callback so that it happens at a step boundary.
// kill: the process dies (SIGKILL); hang: it waits forever; sigterm: it receives SIGTERM (a preemption), and
// sigterm-twice two of them; nan: the step's update uses a learning rate of NaN (a step that poisons the weights,
// whose next step's loss is then NaN).
class FailAtStep : public Callback {
 public:
  FailAtStep(std::int64_t step, std::string mode) : step_(step), mode_(std::move(mode)) {}
  void on_batch_begin(TrainState& state) override {
    // The next step: the rate back, unless a schedule has set that step's own.
    if (state.step == step_ + 1 && mode_ == "nan" && std::isnan(state.optimizer.learning_rate())) {
      state.optimizer.set_learning_rate(learning_rate_);
    }
    if (state.step != step_) return;
    std::fprintf(stderr, "dtnn: fault injection: %s at step %lld\n", mode_.c_str(), static_cast<long long>(step_));
    std::fflush(stderr);
    if (mode_ == "kill") std::raise(SIGKILL);
    if (mode_ == "sigterm" || mode_ == "sigterm-twice") {
      std::raise(SIGTERM);
      if (mode_ == "sigterm-twice") std::raise(SIGTERM);
      return;
    }
    if (mode_ == "nan") {
      learning_rate_ = state.optimizer.learning_rate();
      state.optimizer.set_learning_rate(std::nanf(""));
      return;
    }
    while (true) pause();
  }

 private:
  std::int64_t step_;
  std::string mode_;
  float learning_rate_ = 0.0f;
};

// The callbacks of the program's own options: checkpoints (they need the zoo's name and options; without
// --checkpoint-dir, only a preemption's, into kPreemptionDir, created then), the step's graph and the fault injection
// of the tests. Returns the checkpoint callback.
std::shared_ptr<CheckpointCallback> add_program_callbacks(FitOptions& fit, const TrainOptions& o,
                                                          const models::ModelInfo& info, const runtime::Mpi& mpi,
                                                          bool has_validation) {
  CheckpointOptions options = o.checkpoint;
  options.monitor(has_validation ? o.schedule.monitor_ : "loss").rank(mpi.rank());
  const CheckpointMeta meta{info.name, model_options_json(o.run.model, info), mpi.size()};
  // A --checkpoint-dir that cannot be made fails here, before any training.
  auto checkpoints = o.checkpoint_dir.empty()
                         ? std::make_shared<CheckpointCallback>(kPreemptionDir, o.keep, meta,
                                                                options.every_steps(0).each_epoch(false))
                         : std::make_shared<CheckpointCallback>(
                               std::make_shared<io::CheckpointDirectory>(o.checkpoint_dir, o.keep), meta, options);
  fit.callback(checkpoints);
  if (o.fail_step >= 0 && o.fail_rank == mpi.rank()) {
    fit.callback(std::make_shared<FailAtStep>(o.fail_step, o.fail_mode));
  }
  if (!o.dag.empty()) {
    const std::string file = per_rank(o.dag, mpi);
    fit.callback(o.dag_step ? std::make_shared<DagCapture>(file, *o.dag_step) : std::make_shared<DagCapture>(file));
  }
  return checkpoints;
}

// What ran, as the report states it.
nlohmann::json run_facts(const TrainOptions& o, const models::ModelInfo& info, const io::TrainTest& data,
                         const Sequential& model, const runtime::Engine& engine, const Optimizer& optimizer,
                         const runtime::Mpi& mpi) {
  return {
      {"model", info.name},
      {"dataset", data.train.name},
      {"train_samples", data.train.size()},
      {"parameters", model.parameter_count()},
      {"epochs", o.fit.epochs_},
      {"batch_size", o.fit.batch_size_},
      {"tiles", o.fit.tiles_},
      {"conv", to_string(o.run.model.conv)},
      {"precision", codelets::to_string(o.run.model.precision)},
      {"fusion", o.run.model.fusion ? "on" : "off"},
      {"host_allocator", runtime::to_string(engine.host_allocator())},
      {"scheduler", engine.scheduler()},
      {"workers", engine.cpu_workers()},
      {"cuda_workers", engine.cuda_workers()},
      {"device", runtime::to_string(runtime::task_device())},
      {"seed", o.fit.seed_},
      {"optimizer", optimizer.describe()},
      {"engine", engine.describe()},
      {"ranks", mpi.size()},
      {"allreduce",
       !mpi.active() ? "none" : o.parallel.mode_ == runtime::AllreduceMode::kBlocking ? "blocking" : "overlapped"},
      {"rank_sum", !mpi.active() ? "none" : o.parallel.rank_sum_ == RankSum::kOrdered ? "ordered" : "allreduce"},
      {"priorities", o.priorities == runtime::Priorities::kOn ? "on" : "off"},
  };
}

// The validation set of --validation-split (taken off the training set) or --test-as-validation.
std::optional<io::Dataset> validation_set(const TrainOptions& o, io::TrainTest& data) {
  if (o.validation_split > 0.0) return split_validation(data.train, o.validation_split);
  if (o.test_as_validation) return data.test;
  return std::nullopt;
}

// Each convolution layer's algorithm as it ran (under --conv auto: what it measured, pass by pass), by layer name.
void add_conv_algorithms(Layer& layer, nlohmann::json& out) {
  if (const auto* conv = dynamic_cast<const Conv2d*>(&layer)) out[layer.name()] = conv->algorithm();
  for (Layer* child : layer.children()) add_conv_algorithms(*child, out);
}

// After training: the test set's metrics, every rank's weights checksum, and (on rank 0) the summary, the history
// and the report.
void finish(const TrainOptions& o, bool benchmark, const models::ModelInfo& info, const io::TrainTest& data,
            Sequential& model, Optimizer& optimizer, const runtime::Engine& engine, const runtime::Mpi& mpi,
            const History& history, const StepTimer& steps) {
  std::optional<EvalResult> test;
  if (!o.no_test && !benchmark) {
    test = evaluate(model, data.test, EvalOptions().batch_size(256).tiles(o.fit.tiles_).mpi(&mpi).loss(o.fit.loss_));
  }
  const std::vector<std::uint64_t> checksums = mpi.all_gather(model.weights_checksum(), "weights checksums");
  if (mpi.rank() != 0) return;
  const MemoryBreakdown memory = memory_breakdown(model, optimizer);
  print_train_summary(history, test, memory);
  if (!o.trace.empty()) {
    fmt::print("Trace: {} ({} events)\n", per_rank(o.trace, mpi), runtime::Tracer::events().size());
  }
  if (!o.history.empty()) write_history(o.history, history);
  if (!o.run.report.empty()) {
    nlohmann::json run = run_facts(o, info, data, model, engine, optimizer, mpi);
    run["step_seconds"] = steps.seconds();
    nlohmann::json algorithms = nlohmann::json::object();
    for (std::size_t i = 0; i < model.size(); ++i) add_conv_algorithms(model.layer(i), algorithms);
    run["conv_algorithms"] = std::move(algorithms);
    write_train_report(o.run.report, std::move(run), history, test, checksums, memory);
  }
}

// The most steps a run replays to name the layer of a non-finite loss, and the most steps --on-nan skip-step skips.
constexpr std::int64_t kMaxDiagnosisReplay = 2000;
constexpr int kMaxSkippedSteps = 8;

// A run stopped by a signal at a step boundary: where its checkpoint is, on rank 0. The exit status is 128 + signal.
void report_preemption(const History& history, const CheckpointCallback& checkpoints, const TrainOptions& o,
                       const runtime::Mpi& mpi) {
  if (mpi.rank() != 0) return;
  const std::string signal = signal_name(history.stop_reason);
  if (checkpoints.last_saved().empty()) {
    fmt::print(stderr, "dtnn: {} at step {}: training stopped; no checkpoint was written (see the warning above)\n",
               signal, history.stopped_at_step);
    return;
  }
  const std::string dir = o.checkpoint_dir.empty() ? std::string(kPreemptionDir) : o.checkpoint_dir;
  fmt::print(stderr, "dtnn: {} at step {}: training stopped, checkpoint {}; continue with --resume {}\n", signal,
             history.stopped_at_step, checkpoints.last_saved().string(), dir);
}

int run_train(TrainOptions o, bool benchmark) {
  require_real_build(benchmark ? "benchmark" : "train");
  const models::ModelInfo info = zoo_model_info(o.run.model);
  runtime::Mpi mpi(o.mpi_timeout);
  const bool talk = mpi.rank() == 0 && !o.run.quiet;
  // Preemption: SIGTERM, SIGINT or SIGUSR1 stop training at the next step boundary with a checkpoint.
  const SignalStop signals;
  runtime::Engine engine(engine_options(o.run, &mpi).profiling(!o.trace.empty()));
  select_device(o.run, engine);
  runtime::set_task_priorities(o.priorities);
  if (talk) {
    std::string ranks;
    if (mpi.active() && o.parallel.rank_sum_ == RankSum::kOrdered) {
      ranks = fmt::format("; {} MPI ranks, ordered sums", mpi.size());
    } else if (mpi.active()) {
      ranks = fmt::format("; {} MPI ranks, allreduce {}", mpi.size(),
                          o.parallel.mode_ == runtime::AllreduceMode::kBlocking ? "blocking" : "overlapped");
    }
    fmt::print("dtnn: {}{}\n", engine.describe(), ranks);
  }
  io::TrainTest data = load_data(o.run.data, info, o.fit.batch_size_, o.fit.seed_);
  const std::optional<io::Dataset> validation = validation_set(o, data);
  const io::Dataset* validating = validation ? &*validation : nullptr;
  o.fit.verbose(!o.run.quiet);
  Trainee t;
  try {
    t = start_trainee(o, info, data, mpi, o.resume);
  } catch (const RankMismatch& e) {
    // Every rank found the mismatch: each reports it before any exits (mpirun ends the job at the first
    // non-zero exit, which could cut the others short).
    fmt::print(stderr, "dtnn: error: {}\n", e.what());
    std::fflush(stderr);
    mpi.barrier("error report");
    return 2;
  }
  if (talk) {
    fmt::print("Model {} ({}), trained on {} ({} samples), tested on {} samples\n{}", info.name, info.description,
               data.train.name, data.train.size(), data.test.size(), t.model.summary());
    if (o.run.model.precision == codelets::Precision::kTf32) {
      fmt::print("Precision: tf32 for the convolutions and dense layers on GPU workers (cuDNN's and cuBLAS's TF32 "
                 "tensor-core math); CPU workers compute in fp32 (CPUs have no TF32), and every other pass too\n");
    } else if (o.run.model.precision != codelets::Precision::kFp32) {
      fmt::print("Precision: {} for the convolutions on CPU workers (every pass of convgemm, im2col and onednn layers, "
                 "the weight gradients of Winograd's); dense layers and every other pass in fp32; the tensors "
                 "between a convolution and a BatchNorm, either way, stored in bf16 with their gradients\n",
                 codelets::to_string(o.run.model.precision));
    }
    if (!t.restored_from.empty()) {
      fmt::print("Resumed from {} at step {} (epoch {})\n", t.restored_from, t.initial_step, t.restored_epoch);
    }
  }
  FitOptions fit = o.fit;
  for (auto& callback : schedule_callbacks(o.schedule, fit.epochs_)) fit.callback(callback);
  const std::shared_ptr<CheckpointCallback> checkpoints =
      add_program_callbacks(fit, o, info, mpi, validation.has_value());
  const auto steps = std::make_shared<StepTimer>();
  fit.callback(steps).stop_when(signals.poll());
  if (!o.trace.empty()) runtime::Tracer::start();
  History history;
  std::vector<std::int64_t> skipped;  // --on-nan skip-step: the steps whose update was left out
  for (;;) {
    try {
      history = dtnn::fit(t.model, *t.optimizer, data.train,
                          FitOptions(fit).initial_step(t.initial_step).data_parallel(t.data_parallel->data_parallel()),
                          validating);
      break;
    } catch (const NonFiniteLoss& e) {
      const bool skip = o.on_nan == OnNonFinite::kSkipStep && static_cast<int>(skipped.size()) < kMaxSkippedSteps;
      if (mpi.rank() == 0) fmt::print(stderr, "dtnn: {}: {}\n", skip ? "warning" : "error", e.what());
      if (!skip) {
        if (o.on_nan == OnNonFinite::kSkipStep && mpi.rank() == 0) {
          fmt::print(stderr, "dtnn: {} steps skipped already (--on-nan skip-step): the run stops\n", skipped.size());
        }
        report_nonfinite(o, info, data, validating, mpi, e.step(), skipped, kMaxDiagnosisReplay);
        return 1;
      }
      t = replay_to(o, info, data, validating, mpi, e.step(), skipped);
      skipped.push_back(e.step());
      t.initial_step = e.step() + 1;
      if (mpi.rank() == 0) {
        fmt::print(stderr, "dtnn: step {} skipped (--on-nan skip-step): its update undone by a replay from {}\n",
                   e.step(), t.restored_from.empty() ? "the seed's weights" : t.restored_from);
      }
    }
  }
  t.data_parallel->wait_idle();
  if (!o.trace.empty()) {
    runtime::Tracer::stop();
    runtime::Tracer::write_chrome_trace(per_rank(o.trace, mpi));
  }
  if (history.stopped_at_step >= 0) {
    report_preemption(history, *checkpoints, o, mpi);
    return 128 + history.stop_reason;
  }
  finish(o, benchmark, info, data, t.model, *t.optimizer, engine, mpi, history, *steps);
  return 0;
}

Command add_training_command(CLI::App& program, const std::string& name, const std::string& help,
                             std::shared_ptr<TrainOptions> options, bool benchmark) {
  CLI::App* app = program.add_subcommand(name, help);
  add_train_options(app, *options);
  return {app, [options, benchmark] { return run_train(*options, benchmark); }};
}

}  // namespace

Command add_train(CLI::App& program) {
  return add_training_command(program, "train", "train a model of the zoo and report test accuracy",
                              std::make_shared<TrainOptions>(), false);
}

Command add_benchmark(CLI::App& program) {
  auto options = std::make_shared<TrainOptions>();
  options->run.data.dataset = "synthetic";
  options->fit.epochs(2).steps_per_epoch(20);
  return add_training_command(program, "benchmark",
                              "training throughput (images/s after a warm-up epoch), by default on synthetic data of "
                              "the model's input shape",
                              options, true);
}

}  // namespace dtnn::app
