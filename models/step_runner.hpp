// SPDX-License-Identifier: Apache-2.0
// Training steps that nobody reads: the driver of `dtnn calibrate` (real steps, StarPU calibrating its models)
// and of `dtnn simulate` (the same steps under SimGrid, where codelets do not run and buffers hold nothing). It
// submits exactly fit's graph (TrainStep) with fit's window of two steps in flight, but waits for a step's loss
// tasks without reading what they wrote, so no loss, metric, checkpoint or evaluation exists. Step times are
// starpu_timing_now() intervals between the submissions of consecutive steps, as StepTimer measures fit's: wall
// time in a real run, SimGrid's clock in a simulation.
#pragma once

#include <cstdint>
#include <vector>

#include "io/dataset.hpp"
#include "models/optimizer.hpp"
#include "models/sequential.hpp"
#include "models/train_step.hpp"

namespace dtnn {

struct StepRunOptions {
  StepRunOptions& steps(std::int64_t n) { steps_ = n; return *this; }
  // The first steps, left out of the times and of the workers' utilisation (first touches, calibration).
  StepRunOptions& warmup(std::int64_t n) { warmup_ = n; return *this; }
  StepRunOptions& batch_size(std::int64_t n) { batch_size_ = n; return *this; }
  StepRunOptions& step(TrainStepOptions o) { step_ = std::move(o); return *this; }

  std::int64_t steps_ = 10;
  std::int64_t warmup_ = 2;
  std::int64_t batch_size_ = 64;
  TrainStepOptions step_{};
};

struct WorkerUse {
  int worker = 0;
  std::string name;      // StarPU's ("CPU 0")
  double busy_us = 0.0;  // executing tasks during the timed steps
  double utilisation = 0.0;  // busy_us over the timed span
};

struct StepRunResult {
  std::vector<double> step_us;  // the timed steps (after the warm-up), in order
  double span_us = 0.0;         // from the first timed step's submission to the end of the last step's tasks
  std::vector<WorkerUse> workers;
  std::int64_t tasks = 0;       // tasks that ran during the timed steps

  [[nodiscard]] double median_step_us() const;
};

// Runs options.steps_ steps of batch_size rows of data (cycling through it) and waits for all of them. Throws
// InvalidArgument for steps <= warmup, a batch larger than the data, or what TrainStep refuses.
StepRunResult run_steps(Sequential& model, Optimizer& optimizer, const io::Dataset& data,
                        const StepRunOptions& options);

}  // namespace dtnn
