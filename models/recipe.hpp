// SPDX-License-Identifier: Apache-2.0
// What the dtnn program makes of its options, as library calls, so that a program of one's own trains as the
// command line does: a zoo model with its convolution algorithm, the datasets by name, the learning-rate
// schedules and stopping rules as fit() callbacks, dtnn's optimizer defaults, the validation split, and resuming
// from a checkpoint. The program binds its options straight into these structs: their defaults are its defaults.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "io/dataset.hpp"
#include "layers/conv2d.hpp"
#include "models/optimizers.hpp"
#include "models/sequential.hpp"
#include "models/training.hpp"
#include "models/zoo.hpp"

namespace dtnn {

// A model of the zoo as the program builds it.
struct ZooModelOptions {
  std::string name = "simplecnn";  // models::registry()
  // Every Conv2d's algorithm: Winograd for the 3x3 stride-1 layers where it pays, convgemm for the others
  // (docs/design.md, Convolution).
  ConvVariant conv = ConvVariant::kWinograd;
  // Every Conv2d's arithmetic (codelets/kinds.hpp, codelets/conv2d.hpp); bf16 needs AVX512-BF16 (InvalidArgument
  // naming --precision otherwise).
  codelets::Precision precision = codelets::Precision::kFp32;
  bool fusion = true;  // Sequential::fusion
  // A language model's sequence length, at most its context (the positional table keeps its length, so the
  // parameters and a checkpoint are those of the model); 0: its context.
  std::int64_t sequence = 0;
};

// The zoo's entry for options.name with the input the options give it (options.sequence). InvalidArgument naming
// --sequence for a sequence given to a model of images, or longer than the model's context.
models::ModelInfo zoo_model_info(const ZooModelOptions& options);

// The zoo's model `options.name` with every convolution set to options.conv, built for its input shape with the
// weights of `seed`. InvalidArgument (naming --model) for an unknown name.
Sequential build_zoo_model(const ZooModelOptions& options, std::uint64_t seed);

// The data of a run, by name.
struct DataOptions {
  // fashion-mnist, mnist (IDX), cifar10, cifar100 (binary version), h5 (dtnn convert's file, streamed), text (a
  // byte-level corpus, io/text.hpp, for a model of token ids) or synthetic.
  std::string dataset = "fashion-mnist";
  // The IDX or CIFAR files; fashion-mnist's default: io::default_fashion_mnist_dir(). text: a folder of text files,
  // by default io::default_text_dir() (Debian's fortunes).
  std::filesystem::path dir;
  std::filesystem::path file;  // the HDF5 file of h5; text: one text file instead of a folder
  std::int64_t train_samples = 0;  // > 0: a seeded, class-balanced subset of the training set
  std::int64_t test_samples = 0;   // > 0: the same of the test set
  std::int64_t synthetic_samples = 6400;  // training samples of synthetic (and a sixth of it for testing)
  bool normalize = false;  // per-channel normalisation of both sets with the training set's mean and std
};

// The files of a dataset that has files (all but synthetic), whole; an h5 file is opened for batches of batch_hint
// rows. InvalidArgument (naming --data-dir, --data-file) when a required path is missing; DataError for unreadable
// files.
io::TrainTest open_dataset(const DataOptions& options, std::int64_t batch_hint);

// Random samples for `model`: images of its input shape and classes, or, for a model of token ids (its first layer's
// input_dtype() int32, input [sequence]), windows of its input length over its vocabulary (classes).
io::Dataset synthetic_data(const models::ModelInfo& model, int count, std::uint64_t seed);

// Whether the zoo's `model` takes token ids (its first layer's input_dtype() is int32).
bool takes_tokens(const models::ModelInfo& model);

// The training and test sets of `options` for `model` (synthetic data takes its input shape and classes; text is
// cut into windows of its input length), the subsets and synthetic samples drawn from `seed`; an h5 file is opened
// for batches of batch_hint rows.
// InvalidArgument (naming --data-dir, --data-file) when a required path is missing; DataError for unreadable files.
io::TrainTest load_data(const DataOptions& options, const models::ModelInfo& model, std::int64_t batch_hint,
                        std::uint64_t seed);

// The schedules that apply together (models/schedules.hpp): a warm-up, then the cosine decay (or a constant
// rate), with step decay and plateau reductions on top; early stopping and a loss threshold end training.
struct ScheduleOptions {
  // Linear warm-up over `epochs` (rounded up to whole epochs) from start_factor x lr; 0: none.
  ScheduleOptions& warmup(double epochs, float start_factor) { warmup_epochs_ = epochs; warmup_start_ = start_factor; return *this; }
  // Linear warm-up over `steps` steps from start_factor x lr, the cosine decay (if on) starting from the peak at
  // its end, as transformer recipes do; 0: none. Not together with warmup(epochs).
  ScheduleOptions& warmup_steps(std::int64_t steps, float start_factor) {
    warmup_steps_ = steps;
    warmup_start_ = start_factor;
    return *this;
  }
  // true: cosine decay per step over all the epochs, to min_lr; false: a constant rate.
  ScheduleOptions& cosine(bool on) { cosine_ = on; return *this; }
  // lr *= decay every `every_epochs` epochs; 0: never.
  ScheduleOptions& step_decay(int every_epochs) { lr_step_epochs_ = every_epochs; return *this; }
  // lr *= decay after `epochs` epochs without improvement of the monitored metric; 0: never.
  ScheduleOptions& plateau_patience(int epochs) { plateau_patience_ = epochs; return *this; }
  // The factor of step_decay and plateau_patience.
  ScheduleOptions& decay(float factor) { lr_decay_ = factor; return *this; }
  ScheduleOptions& min_lr(float lr) { min_lr_ = lr; return *this; }
  // Stop after `epochs` epochs without improvement of the monitored metric, restoring the best weights; 0: never.
  ScheduleOptions& early_stopping(int epochs) { early_stopping_ = epochs; return *this; }
  // "val_loss", "val_accuracy", "loss" or "accuracy".
  ScheduleOptions& monitor(std::string metric) { monitor_ = std::move(metric); return *this; }
  // Stop once the loss (the validation loss when the monitor is a val_ metric) is at or below this; < 0: never.
  ScheduleOptions& stop_at_loss(float loss) { stop_at_loss_ = loss; return *this; }

  double warmup_epochs_ = 0.0;
  std::int64_t warmup_steps_ = 0;
  float warmup_start_ = 0.1f;
  bool cosine_ = true;
  int lr_step_epochs_ = 0;
  int plateau_patience_ = 0;
  float lr_decay_ = 0.1f;
  float min_lr_ = 0.0f;
  int early_stopping_ = 0;
  std::string monitor_ = "val_loss";
  float stop_at_loss_ = -1.0f;
};

// The callbacks of the schedules, in the order they must run, for a run of `epochs` epochs.
std::vector<std::shared_ptr<Callback>> schedule_callbacks(const ScheduleOptions& options, int epochs);

// dtnn's learning rate where none is given: what the zoo's models are tuned for with SGD, momentum 0.9 and the
// cosine schedule.
inline constexpr float kDefaultLearningRate = 0.05f;

// make_optimizer with dtnn's defaults: the name in any case, and SGD's momentum 0.9 unless given (what the zoo's
// models are tuned for; the other optimizers keep their own defaults).
std::unique_ptr<Optimizer> make_default_optimizer(OptimizerConfig config);

// Keeps the last round(fraction x size) samples of `train` apart for validation (Keras's validation_split):
// returns them, and `train` keeps the others. Throws InvalidArgument unless both sides keep a sample.
io::Dataset split_validation(io::Dataset& train, double fraction);

// Before training goes on from a step other than the first (a resumed or replayed run): warm-up and the cosine decay
// compute each step's rate from the base rate, which their callbacks read from the optimizer when fit() begins, so
// the optimizer gets base_lr back where they are on; the other schedules carry the rate on.
void rewind_learning_rate(Optimizer& optimizer, float base_lr, const ScheduleOptions& schedule);

// Where a resumed run starts.
struct ResumePoint {
  std::filesystem::path file;
  std::int64_t step = 0;   // global steps done: FitOptions::initial_step
  std::int64_t epoch = 0;  // epochs done
};

// Restores the model and the optimizer from a checkpoint file, or the newest in a directory, written by a run of
// the model named `model_name` (DataError otherwise). The learning rate is the checkpoint's, except under
// warm-up or the cosine decay: they compute the rate of every step from the base rate, which stays the
// optimizer's.
ResumePoint resume_training(const std::filesystem::path& file_or_dir, const std::string& model_name,
                            Sequential& model, Optimizer& optimizer, const ScheduleOptions& schedule);

}  // namespace dtnn
