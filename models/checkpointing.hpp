// SPDX-License-Identifier: Apache-2.0
// A model, its optimizer and the training position to and from an HDF5 checkpoint (io/checkpoint.hpp), under
// PyTorch's names and shapes, so that a run resumes exactly and weights move to PyTorch (tools/).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "io/checkpoint.hpp"
#include "models/optimizer.hpp"
#include "models/sequential.hpp"
#include "models/training.hpp"

namespace dtnn {

struct CheckpointMeta {
  std::string model_name;
  std::string model_options = "{}";  // JSON text: what rebuilds the model (classes, conv variant, ...)
  int world_size = 1;
  std::int64_t epoch = 0;            // epochs completed
  std::int64_t step = 0;             // global steps completed: where a resumed run starts
  std::int64_t samples_seen = 0;
};

// Copies the model's parameters and buffers and the optimizer's state (waits for the tasks that write them).
// optimizer may be null (inference checkpoints).
io::Checkpoint capture_checkpoint(Sequential& model, Optimizer* optimizer, const CheckpointMeta& meta);

// Loads into the model (and optimizer, when given): every missing, unexpected or mis-shaped entry is reported in
// one DataError naming the file. The optimizer must be of the kind that wrote the checkpoint.
void restore_checkpoint(const io::Checkpoint& checkpoint, Sequential& model, Optimizer* optimizer,
                        const std::filesystem::path& file);

// What a training-time checkpoint does when it cannot be written (a full disk, a read-only folder): the error
// ends training (kStop), or is printed and training goes on (kWarn). Either way the checkpoints already written stay
// as they were (each is a new file, written atomically).
enum class CheckpointErrors { kStop, kWarn };

struct CheckpointOptions {
  // Also every N steps (0: never).
  CheckpointOptions& every_steps(std::int64_t n) { every_steps_ = n; return *this; }
  // true (default): at the end of every epoch; false: only where training stops early (FitOptions::stop_when).
  CheckpointOptions& each_epoch(bool on) { each_epoch_ = on; return *this; }
  // The metric best.h5 follows: "val_loss", "val_accuracy", "loss" or "accuracy".
  CheckpointOptions& monitor(std::string metric) { monitor_ = std::move(metric); return *this; }
  // The rank that writes (the weights are the same on every rank; every rank takes part in the copy).
  CheckpointOptions& rank(int r) { rank_ = r; return *this; }
  CheckpointOptions& on_error(CheckpointErrors e) { on_error_ = e; return *this; }

  std::int64_t every_steps_ = 0;
  bool each_epoch_ = true;
  std::string monitor_ = "loss";
  int rank_ = 0;
  CheckpointErrors on_error_ = CheckpointErrors::kStop;
};

// Saves checkpoints into a directory: every options.every_steps steps, at the end of every epoch, and where training
// stops early (FitOptions::stop_when: a preemption signal), each a resume point that --resume continues bitwise.
// best.h5 follows the monitored metric when it is known. A checkpoint whose parameters, buffers or optimizer state
// hold a non-finite value is never written (NonFiniteState): a diverged run keeps its last good checkpoint.
class CheckpointCallback : public Callback {
 public:
  CheckpointCallback(std::shared_ptr<io::CheckpointDirectory> dir, CheckpointMeta meta, CheckpointOptions options);
  // The directory is created at the first checkpoint (none may be: a callback for preemption only).
  CheckpointCallback(std::filesystem::path dir, int keep_last, CheckpointMeta meta, CheckpointOptions options);
  void on_batch_begin(TrainState& state) override;
  void on_epoch_end(TrainState& state) override;
  void on_train_end(TrainState& state) override;
  [[nodiscard]] const std::filesystem::path& last_saved() const { return last_; }

 private:
  void save(TrainState& state, std::int64_t steps_done, std::int64_t epochs_done, const EpochRecord* record);
  io::CheckpointDirectory& directory();

  std::filesystem::path dir_path_;
  int keep_last_ = io::CheckpointDirectory::kDefaultKeepLast;
  std::shared_ptr<io::CheckpointDirectory> dir_;
  CheckpointMeta meta_;
  CheckpointOptions options_;
  std::int64_t start_step_ = -1;
  std::filesystem::path last_;
};

// A checkpoint refused because an array holds a value that is not finite.
class NonFiniteState : public Error {
 public:
  using Error::Error;
};

// Throws NonFiniteState naming `dir` (where it would have been written), the checkpoint's step and the first array
// (parameter, buffer or optimizer state) that holds a NaN or an infinity.
void check_finite(const io::Checkpoint& checkpoint, const std::filesystem::path& dir);

}  // namespace dtnn
