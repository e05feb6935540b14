// SPDX-License-Identifier: Apache-2.0
// Probes of the training steps for scheduling research: DagCapture records one step's task graph (dtnn train
// --dag FILE) with runtime::DagRecorder and writes its tasks, dependencies and lower bounds as JSON when training
// ends (runtime/dag.hpp describes the format); StepTimer measures the wall time of every step.
#pragma once

#include <cstdint>
#include <chrono>
#include <filesystem>
#include <vector>

#include "models/training.hpp"
#include "runtime/dag.hpp"

namespace dtnn {

class DagCapture : public Callback {
 public:
  // The step to record (global index); the default, the third step of the run, comes after two warm-up steps
  // (first-touch allocations, performance-model calibration). A run with fewer steps records its last one.
  explicit DagCapture(std::filesystem::path file, std::int64_t step = -1);

  void on_train_begin(TrainState& state) override;
  void on_batch_begin(TrainState& state) override;
  void on_epoch_end(TrainState& state) override;
  // Waits for every task (the recorded ones' times), then writes the file.
  void on_train_end(TrainState& state) override;

  [[nodiscard]] const runtime::Dag& graph() const { return graph_; }
  [[nodiscard]] std::int64_t recorded_step() const { return recorded_step_; }

 private:
  std::filesystem::path file_;
  std::int64_t step_;
  std::int64_t first_step_ = 0;
  std::int64_t recorded_step_ = -1;
  runtime::DagRecorder recorder_;
  runtime::Dag graph_;
};

// The driver's pace: step k's time is from the moment its submission begins to the moment step k + 1's does
// (the last one's ends when every task has run). With two steps in flight the driver is held back by the step
// before, so after the first steps these intervals are the steady-state time per step.
class StepTimer : public Callback {
 public:
  void on_batch_begin(TrainState& state) override;
  void on_epoch_end(TrainState& state) override;
  void on_train_end(TrainState& state) override;
  // Seconds per step in step order; a step whose interval spans an epoch's end (evaluation) is left out.
  [[nodiscard]] const std::vector<double>& seconds() const { return seconds_; }

 private:
  std::chrono::steady_clock::time_point last_{};
  bool timing_ = false;
  std::vector<double> seconds_;
};

}  // namespace dtnn
