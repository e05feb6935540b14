// SPDX-License-Identifier: Apache-2.0
#include "models/recipe.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "io/checkpoint.hpp"
#include "models/checkpointing.hpp"
#include "models/schedules.hpp"

namespace dtnn {

std::vector<std::shared_ptr<Callback>> schedule_callbacks(const ScheduleOptions& o, int epochs) {
  std::vector<std::shared_ptr<Callback>> out;
  if (o.warmup_epochs_ > 0) {
    out.push_back(std::make_shared<WarmUp>(Epochs{static_cast<std::int64_t>(std::ceil(o.warmup_epochs_))},
                                           o.warmup_start_));
  }
  if (o.lr_step_epochs_ > 0) {
    out.push_back(std::make_shared<StepDecay>(o.lr_step_epochs_, o.lr_decay_, o.min_lr_));
  }
  if (o.plateau_patience_ > 0) {
    out.push_back(std::make_shared<ReduceLROnPlateau>(
        ReduceLROnPlateauOptions(o.monitor_).factor(o.lr_decay_).patience(o.plateau_patience_).min_lr(o.min_lr_)));
  }
  if (o.cosine_) {
    out.push_back(std::make_shared<CosineDecay>(CosineDecayOptions(Epochs{epochs}).min_lr(o.min_lr_)));
  }
  if (o.early_stopping_ > 0) {
    out.push_back(std::make_shared<EarlyStopping>(EarlyStoppingOptions(o.monitor_).patience(o.early_stopping_)));
  }
  if (o.stop_at_loss_ >= 0.0f) {
    out.push_back(std::make_shared<StopAtLoss>(o.stop_at_loss_, o.monitor_.starts_with("val_") ? "val_loss" : "loss"));
  }
  return out;
}

std::unique_ptr<Optimizer> make_default_optimizer(OptimizerConfig config) {
  std::transform(config.name.begin(), config.name.end(), config.name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (config.name == "sgd" && !config.momentum) {
    config.momentum = 0.9f;
  }
  return make_optimizer(config);
}

io::Dataset split_validation(io::Dataset& train, double fraction) {
  const auto count = static_cast<std::int64_t>(std::llround(fraction * static_cast<double>(train.size())));
  if (count < 1 || count >= train.size()) {
    throw InvalidArgument(fmt::format("--validation-split: {} of {} samples leaves {} for validation, expected "
                                      "at least one sample on each side",
                                      fraction, train.size(), count));
  }
  io::Dataset validation = train.subset(train.size() - count, count);
  train = train.subset(0, train.size() - count);
  return validation;
}

ResumePoint resume_training(const std::filesystem::path& file_or_dir, const std::string& model_name,
                            Sequential& model, Optimizer& optimizer, const ScheduleOptions& schedule) {
  const std::filesystem::path file = io::resolve_checkpoint(file_or_dir);
  const io::Checkpoint c = io::load_checkpoint(file);
  if (c.model_name != model_name) {
    throw DataError(fmt::format("{}: checkpoint of model '{}', expected '{}'", file.string(), c.model_name,
                                model_name));
  }
  const float base_lr = optimizer.learning_rate();
  restore_checkpoint(c, model, &optimizer, file);
  // Warm-up and cosine are functions of the step and the base learning rate: they recompute the rate of step
  // c.step from the base. Without them the checkpoint's rate (after step decays or plateaus) carries on.
  if (schedule.cosine_ || schedule.warmup_epochs_ > 0) optimizer.set_learning_rate(base_lr);
  return {file, c.step, c.epoch};
}

}  // namespace dtnn
