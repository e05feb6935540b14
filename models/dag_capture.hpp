// SPDX-License-Identifier: Apache-2.0
// One training step's task graph as data (dtnn train --dag FILE): a callback that records the tasks of one step
// with runtime::DagRecorder and writes them, their dependencies and the step's lower bounds as JSON when
// training ends (runtime/dag.hpp describes the format).
#pragma once

#include <cstdint>
#include <filesystem>

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

}  // namespace dtnn
