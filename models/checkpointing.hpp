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

// Saves a checkpoint into a directory every `every_steps` steps (0: never) and at the end of every epoch, on
// rank 0 of a data-parallel run (the weights are the same on every rank); best.h5 follows the monitored metric
// ("val_loss", "val_accuracy", "loss" or "accuracy") when it is known.
class CheckpointCallback : public Callback {
 public:
  CheckpointCallback(std::shared_ptr<io::CheckpointDirectory> dir, CheckpointMeta meta, std::int64_t every_steps,
                     std::string monitor, int rank);
  void on_batch_begin(TrainState& state) override;
  void on_epoch_end(TrainState& state) override;
  [[nodiscard]] const std::filesystem::path& last_saved() const { return last_; }

 private:
  void save(TrainState& state, std::int64_t steps_done, std::int64_t epochs_done, const EpochRecord* record);

  std::shared_ptr<io::CheckpointDirectory> dir_;
  CheckpointMeta meta_;
  std::int64_t every_steps_;
  std::string monitor_;
  int rank_;
  std::int64_t start_step_ = -1;
  std::filesystem::path last_;
};

}  // namespace dtnn
