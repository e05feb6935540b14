// SPDX-License-Identifier: Apache-2.0
#include "app/step_runs.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <starpu.h>

#include "app/options.hpp"
#include "core/errors.hpp"
#include "models/distributed.hpp"
#include "runtime/trace.hpp"

namespace dtnn::app {
namespace {

// cuda: every task with a CUDA body on the GPUs (loading stays on the CPUs); all: the scheduler places each task
// on a CPU or a GPU, so both kinds of models calibrate.
runtime::Device step_device(const std::string& device) {
  return device == "cuda" ? runtime::Device::kCuda : device == "all" ? runtime::Device::kAny : runtime::Device::kCpu;
}

// The engine the steps run on, as asked: InvalidArgument when it did not start that many CPU workers or no GPU.
void check_engine(const StepOptions& o, const runtime::Engine& engine) {
  if (engine.cpu_workers() != o.engine.workers_) {
    throw InvalidArgument(fmt::format("--workers {}: StarPU started {} CPU workers (the machine's CPUs), expected {}",
                                      o.engine.workers_, engine.cpu_workers(), o.engine.workers_));
  }
  if (o.device != "cpu" && engine.cuda_workers() == 0) {
    throw InvalidArgument(fmt::format("--device {}: no GPU found (no CUDA worker started), expected at least one",
                                      o.device));
  }
}

// The other ranks of a simulation: this rank's graph with each bucket's allreduce timed by the network model. With
// GPUs the sums acquire the gradients on the first GPU's memory, as NCCL reduces device buffers.
std::unique_ptr<runtime::SimulatedNetwork> simulated_network(const StepOptions& o) {
  runtime::NetworkModel net = o.network;
  const int first_gpu = o.device != "cpu" ? starpu_worker_get_by_type(STARPU_CUDA_WORKER, 0) : -1;
  if (first_gpu >= 0) net.node = static_cast<int>(starpu_worker_get_memory_node(static_cast<unsigned>(first_gpu)));
  return std::make_unique<runtime::SimulatedNetwork>(net);
}

// The tasks after the warm-up's share of the span (the first touches of the warm-up steps are no measure).
void measure_workers(const StepOptions& o, StepOutcome& out) {
  const std::vector<runtime::TraceEvent> events = runtime::Tracer::events();
  double first = std::numeric_limits<double>::infinity();
  double last = 0.0;
  for (const auto& e : events) {
    first = std::min(first, e.start_us);
    last = std::max(last, e.end_us);
  }
  const double from = events.empty() ? 0.0
                                     : first + (last - first) * static_cast<double>(o.run.warmup_) /
                                                   static_cast<double>(o.run.steps_);
  out.cpu_worker_speeds = runtime::cpu_worker_speeds(events, from);
  out.cpu_task_overhead_us = runtime::cpu_task_overhead_us(events, from);
}

}  // namespace

void add_step_options(CLI::App* app, StepOptions& o) {
  app->add_option("--model", o.model.name, "model name (see `dtnn models`)")->capture_default_str();
  app->add_option("--batch-size", o.run.batch_size_, "samples per step")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--tiles", o.run.step_.tiles_, "batch tiles: tasks per layer and pass")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app->add_option("--workers", o.engine.workers_, "CPU workers")->check(CLI::PositiveNumber)->capture_default_str();
  app->add_option("--scheduler", o.engine.scheduler_, "StarPU scheduler (lws, dmdas, ...)")->capture_default_str();
  add_named(app, "--priorities", o.priorities, priority_names(), "on: dtnn's task priorities; off: every task at 0");
  app->add_option_function<std::string>(
         "--conv", [&o](const std::string& name) { o.conv = parse_conv_variant(name, "--conv"); },
         fmt::format("convolution algorithm: convgemm, im2col, winograd or onednn (bf16 and bf16-amx only) (calibrate: "
                     "default {}; simulate: default "
                     "the one the machine folder was calibrated with for this model, batch, tiles and fusion, {} where "
                     "it has several)",
                     to_string(o.model.conv), to_string(o.model.conv)))
      ->check(CLI::IsMember({"convgemm", "im2col", "winograd", "onednn"}));
  add_named(app, "--fusion", o.model.fusion, {{"on", true}, {"off", false}}, "on or off (see dtnn train --help)");
  add_named(app, "--precision", o.model.precision, precision_names(),
            "fp32, bf16, bf16-emulated, bf16-amx or tf32 (see dtnn train --help; simulate: the one the machine folder "
            "was calibrated with)");
  app->add_option("--steps", o.run.steps_, "training steps, warm-up included")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--warmup", o.run.warmup_, "first steps left out of the times")->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--seed", o.run.step_.seed_, "seed of the weights and the synthetic samples")->capture_default_str();
  app->add_option("--trace", o.trace, "Chrome trace-event JSON of every task (opens in Perfetto)");
  app->add_option("--report", o.report, "write the times and the workers' utilisation as JSON");
}

StepOutcome run_step_options(const StepOptions& o, const runtime::Mpi* mpi, bool measure_speeds) {
  const models::ModelInfo info = zoo_model_info(o.model);
  const bool gpu = o.device != "cpu";
  if (gpu && !runtime::built_with_cuda()) {
    throw InvalidArgument(fmt::format("--device {}: this build has no CUDA codelets, expected cpu (calibrate GPUs with "
                                      "the CUDA build: build-cuda/bin/dtnn)",
                                      o.device));
  }
  runtime::Engine engine(runtime::EngineOptions(o.engine).cuda(gpu ? o.gpus : 0));
  check_engine(o, engine);
  runtime::set_task_device(step_device(o.device));
  runtime::set_task_priorities(o.priorities);
  const std::uint64_t seed = o.run.step_.seed_;
  Sequential model = build_zoo_model(o.model, seed);
  // Two batches of samples: the load tasks read them in a real run, nothing reads them in a simulation.
  const io::Dataset data = synthetic_data(info, static_cast<int>(2 * o.run.batch_size_), seed);
  std::unique_ptr<Optimizer> optimizer = make_default_optimizer(OptimizerConfig{});
  StepRunOptions run = o.run;
  std::unique_ptr<runtime::SimulatedNetwork> network;
  if (o.network.ranks > 1 && mpi == nullptr) {
    network = simulated_network(o);
    run.step_.data_parallel(DataParallel{nullptr, network.get(), false, false, o.buckets});
  }
  // The ranks of a calibration under mpirun: each bucket's gradients summed over them as `dtnn train` sums them,
  // so that the tasks' durations are those of a rank sharing its node and cores with the others, its driver and
  // its communication thread.
  std::optional<DataParallelRun> ranks;
  if (mpi != nullptr && mpi->active()) {
    auto parallel = DataParallelOptions().buckets(o.buckets);
    const bool fp32 = o.model.precision == codelets::Precision::kFp32;
    parallel.agreement(fmt::format("model={} conv={} fusion={} batch={} tiles={} steps={} warmup={} seed={}{}",
                                   o.model.name, to_string(o.model.conv), o.model.fusion ? "on" : "off",
                                   o.run.batch_size_, o.run.step_.tiles_, o.run.steps_, o.run.warmup_, seed,
                                   fp32 ? "" : fmt::format(" precision={}", codelets::to_string(o.model.precision))));
    ranks.emplace(*mpi, model, parallel);
    run.step_.data_parallel(ranks->data_parallel());
  }
  const bool tracing = !o.trace.empty() || measure_speeds;
  if (tracing) runtime::Tracer::start();
  StepOutcome out;
  out.result = run_steps(model, *optimizer, data, run);
  if (network) {
    network->wait_idle();
    out.network_busy_s = network->busy_seconds();
    out.allreduces = network->sums();
  }
  if (ranks) ranks->wait_idle();
  if (tracing) {
    runtime::Tracer::stop();
    if (!o.trace.empty()) runtime::Tracer::write_chrome_trace(o.trace);
  }
  if (measure_speeds) measure_workers(o, out);
  out.engine = engine.describe();
  out.cuda_workers = engine.cuda_workers();
  return out;
}

nlohmann::json step_result_json(const StepOptions& o, const StepRunResult& r) {
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerUse& w : r.workers) {
    workers.push_back({{"worker", w.worker}, {"name", w.name}, {"busy_ms", w.busy_us / 1e3},
                       {"utilisation", w.utilisation}});
  }
  std::vector<double> step_ms;
  for (double us : r.step_us) step_ms.push_back(us / 1e3);
  const double step_s = r.median_step_us() / 1e6;
  return {{"model", o.model.name},
          {"device", o.device},
          {"ranks", o.network.ranks},
          {"batch_size", o.run.batch_size_},
          {"tiles", o.run.step_.tiles_},
          {"workers", o.engine.workers_},
          {"scheduler", o.engine.scheduler_},
          {"priorities", o.priorities == runtime::Priorities::kOn ? "on" : "off"},
          {"conv", to_string(o.model.conv)},
          {"precision", codelets::to_string(o.model.precision)},
          {"fusion", o.model.fusion ? "on" : "off"},
          {"steps", o.run.steps_},
          {"warmup", o.run.warmup_},
          {"step_ms", step_s * 1e3},
          {"images_per_second", o.run.batch_size_ * o.network.ranks / step_s},
          {"step_ms_each", step_ms},
          {"span_ms", r.span_us / 1e3},
          {"tasks", r.tasks},
          {"worker_use", workers}};
}

void print_step_result(const StepRunResult& r, std::int64_t batch) {
  const double step_s = r.median_step_us() / 1e6;
  fmt::print("step time {:.2f} ms (median of {} steps), {:.1f} images/s; {} tasks in {:.1f} ms\n", step_s * 1e3,
             r.step_us.size(), static_cast<double>(batch) / step_s, r.tasks, r.span_us / 1e3);
  for (const WorkerUse& w : r.workers) {
    fmt::print("  {:<10} busy {:8.1f} ms  {:5.1f}%\n", w.name, w.busy_us / 1e3, 100.0 * w.utilisation);
  }
}

}  // namespace dtnn::app
