// SPDX-License-Identifier: Apache-2.0
// What dtnn calibrate and dtnn simulate share: steps of a zoo model on synthetic data that nobody reads
// (models/step_runner.hpp), on an engine pointed at a machine folder, and how their times are printed and reported.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "models/buckets.hpp"
#include "models/recipe.hpp"
#include "models/step_runner.hpp"
#include "runtime/codelet.hpp"
#include "runtime/engine.hpp"
#include "runtime/machine.hpp"
#include "runtime/mpi.hpp"
#include "runtime/simulated_network.hpp"

namespace dtnn::app {

// A folder of this run's own (a derived machine, another rank's models), removed when it ends, also on failure.
struct ScratchFolder {
  std::filesystem::path dir;  // empty: none
  ScratchFolder() = default;
  ~ScratchFolder() {
    std::error_code ignored;
    if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
  }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
};

struct StepOptions {
  ZooModelOptions model;
  // --conv: unset, calibrate takes the model's default (ZooModelOptions::conv) and simulate the algorithm the
  // machine folder was calibrated with (simulated_conv in app/simulate.cpp).
  std::optional<ConvVariant> conv;
  StepRunOptions run;  // steps, warm-up, batch; its step options: tiles, seed
  runtime::EngineOptions engine = runtime::EngineOptions().profiling(true);
  runtime::Priorities priorities = runtime::task_priorities();
  std::string device = "cpu";  // where the tasks run: cpu, cuda or all
  int gpus = -1;               // CUDA workers with --device cuda|all (-1: every GPU, simulated or real)
  std::string folder;          // calibrate --out, simulate --machine
  std::string trace;
  std::string report;
  // simulate: the other ranks' allreduces on a simulated network, and the target machine.
  runtime::NetworkModel network;
  BucketOptions buckets;
  runtime::TargetMachine target;
  std::vector<double> worker_speeds;       // each simulated CPU worker's speed (empty: all 1)
  bool scatter = false;                    // task durations drawn around their models' means
  std::optional<double> task_overhead_us;  // a CPU worker's time between two tasks (unset: the calibration's)
};

// --model --batch-size --tiles --workers --scheduler --priorities --conv --fusion --steps --warmup --seed --trace
// --report.
void add_step_options(CLI::App* app, StepOptions& o);

struct StepOutcome {
  StepRunResult result;
  std::string engine;
  int cuda_workers = 0;
  double network_busy_s = 0.0;  // simulated ranks: seconds of all the allreduces
  std::int64_t allreduces = 0;
  std::vector<double> cpu_worker_speeds;  // with measure_speeds
  double cpu_task_overhead_us = 0.0;      // with measure_speeds
};

// Runs the steps of o.model (its conv the one to run) on an engine already pointed at the machine folder. mpi: a
// calibration under mpirun, whose ranks sum their gradients for real (null, or a world of one: this process
// alone); without it, o.network.ranks > 1 simulates the other ranks' sums. measure_speeds: each CPU worker's speed
// and its time between two tasks, from a trace of the timed steps.
StepOutcome run_step_options(const StepOptions& o, const runtime::Mpi* mpi, bool measure_speeds);

// The report's row of a run (calibrate's machine.json and --report, simulate's --report).
nlohmann::json step_result_json(const StepOptions& o, const StepRunResult& r);

// Step time, images/s of `batch` (over every rank), tasks, and each worker's busy time.
void print_step_result(const StepRunResult& r, std::int64_t batch);

}  // namespace dtnn::app
