// SPDX-License-Identifier: Apache-2.0
// dtnn train's options, and what its run (app/train.cpp) and the replays of a diverged run (app/replay.cpp) share.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/options.hpp"
#include "io/dataset.hpp"
#include "models/checkpointing.hpp"
#include "models/distributed.hpp"
#include "models/recipe.hpp"
#include "models/zoo.hpp"
#include "runtime/mpi.hpp"

namespace dtnn::app {

// What a step whose loss is not finite (NaN, infinite) does: ends the run, naming the first layer whose output or
// gradient is not finite, or is skipped (the weights as before it) and training goes on.
enum class OnNonFinite { kStop, kSkipStep };

struct TrainOptions {
  RunOptions run;
  FitOptions fit;
  OptimizerConfig optimizer = [] {
    OptimizerConfig c;
    c.learning_rate = kDefaultLearningRate;
    return c;
  }();
  ScheduleOptions schedule;
  // Weight-decay groups left undecayed (models/optimizers.hpp weight_decay_groups: bias, norm, embedding).
  std::vector<std::string> no_weight_decay;
  DataParallelOptions parallel;
  runtime::Priorities priorities = runtime::task_priorities();
  double validation_split = 0.0;
  bool test_as_validation = false;
  bool scale_lr = false;
  bool no_test = false;
  std::string trace;    // Chrome trace of every task
  std::string history;  // per-epoch metrics
  std::string dag;      // one step's task graph
  std::optional<std::int64_t> dag_step;
  std::string checkpoint_dir;
  int keep = io::CheckpointDirectory::kDefaultKeepLast;
  CheckpointOptions checkpoint;  // every_steps, on_error (monitor and rank: the run's)
  std::string resume;
  OnNonFinite on_nan = OnNonFinite::kStop;
  int mpi_timeout = runtime::kDefaultMpiTimeoutS;
  // Fault injection of the tests: the rank and step at which a process is killed or hangs.
  int fail_rank = -1;
  std::int64_t fail_step = -1;
  std::string fail_mode = "kill";
};

// Where a run saves the checkpoint of a preemption when no --checkpoint-dir is given.
inline constexpr const char* kPreemptionDir = "dtnn-checkpoints";

// A model in training: its optimizer, its data-parallel set-up (every rank, in step: collective) and the step at
// which its training goes on.
struct Trainee {
  Sequential model;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<DataParallelRun> data_parallel;
  std::int64_t initial_step = 0;
  std::string restored_from;  // the checkpoint it was restored from; empty: built from the seed
  std::int64_t restored_epoch = 0;
  float base_learning_rate = 0.0f;  // the optimizer's, before any schedule (rewind_learning_rate)
};

// The model of the options with its optimizer (the learning rate already scaled for the ranks where asked), restored
// from `checkpoint` where it is not empty (a file or a directory, as --resume takes it), and set up over the ranks
// (RankMismatch when they disagree).
Trainee start_trainee(const TrainOptions& o, const models::ModelInfo& info, const io::TrainTest& data,
                      const runtime::Mpi& mpi, const std::string& checkpoint);

// The run replayed to the state before global step `step`: from the newest checkpoint of --checkpoint-dir at or
// before it (else --resume's, else the seed), trained to it with the run's own options, the updates of the
// `skipped` steps (sorted) left out as the run left them out. Runs are bitwise reproducible, so this is the state the
// run had there. Collective under MPI.
Trainee replay_to(const TrainOptions& o, const models::ModelInfo& info, const io::TrainTest& data,
                  const io::Dataset* validation, const runtime::Mpi& mpi, std::int64_t step,
                  const std::vector<std::int64_t>& skipped);

// Prints (on every rank that finds one) the first layer whose output or gradient is not finite in step `step`,
// on a replay of the run to just before it; or why it could not look (a replay longer than max_replay_steps).
void report_nonfinite(const TrainOptions& o, const models::ModelInfo& info, const io::TrainTest& data,
                      const io::Dataset* validation, const runtime::Mpi& mpi, std::int64_t step,
                      const std::vector<std::int64_t>& skipped, std::int64_t max_replay_steps);

}  // namespace dtnn::app
