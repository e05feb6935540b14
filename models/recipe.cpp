// SPDX-License-Identifier: Apache-2.0
#include "models/recipe.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "io/checkpoint.hpp"
#include "io/cifar.hpp"
#include "io/h5dataset.hpp"
#include "io/h5tokens.hpp"
#include "io/normalize.hpp"
#include "io/text.hpp"
#include "layers/dense.hpp"
#include "models/checkpointing.hpp"
#include "models/schedules.hpp"

namespace dtnn {
namespace {

void set_conv_variant(Layer& layer, ConvVariant v, codelets::Precision p) {
  if (auto* conv = dynamic_cast<Conv2d*>(&layer)) {
    conv->set_variant(v);
    conv->set_precision(p);
  }
  // Dense layers take tf32 (GPUs' cuBLAS); in the bf16 precisions they stay fp32.
  if (auto* dense = dynamic_cast<Dense*>(&layer)) {
    dense->set_precision(p == codelets::Precision::kTf32 ? p : codelets::Precision::kFp32);
  }
  for (Layer* child : layer.children()) set_conv_variant(*child, v, p);
}

}  // namespace

io::TrainTest open_dataset(const DataOptions& o, std::int64_t batch_hint) {
  if (o.dataset == "h5") {
    if (o.file.empty()) throw InvalidArgument("--data-file: required for --dataset h5");
    return {io::open_h5_dataset(o.file, "train", batch_hint), io::open_h5_dataset(o.file, "test", batch_hint)};
  }
  std::filesystem::path dir = o.dir;
  if (dir.empty()) {
    if (o.dataset != "fashion-mnist") {
      throw InvalidArgument(fmt::format("--data-dir: required for --dataset {}", o.dataset));
    }
    dir = io::default_fashion_mnist_dir();
  }
  if (o.dataset == "cifar10") return io::load_cifar10(dir);
  if (o.dataset == "cifar100") return io::load_cifar100(dir);
  return io::load_mnist_like(dir, o.dataset);
}

models::ModelInfo zoo_model_info(const ZooModelOptions& options) {
  models::ModelInfo info = models::find(options.name);
  if (options.sequence == 0) return info;
  if (options.sequence < 0 || info.input.size() != 1) {
    throw InvalidArgument(fmt::format("--sequence {}: model {} takes {} per sample, expected a language model "
                                      "(token ids [context]) and a sequence >= 1",
                                      options.sequence, info.name, to_string(info.input)));
  }
  if (options.sequence > info.input[0]) {
    throw InvalidArgument(fmt::format("--sequence {}: longer than model {}'s context, expected at most {}",
                                      options.sequence, info.name, info.input[0]));
  }
  info.input = {options.sequence};
  return info;
}

Sequential build_zoo_model(const ZooModelOptions& options, std::uint64_t seed) {
  const models::ModelInfo info = zoo_model_info(options);
  check_precision_runs(options.precision, "--precision");
  check_variant_runs(options.conv, options.precision, "--conv");
  Sequential model = info.make();
  for (std::size_t i = 0; i < model.size(); ++i) set_conv_variant(model.layer(i), options.conv, options.precision);
  model.fusion(options.fusion);
  model.build(info.input, seed);
  return model;
}

bool takes_tokens(const models::ModelInfo& model) {
  const Sequential unbuilt = model.make();
  return unbuilt.size() > 0 && unbuilt.input_dtype() == DType::kInt32;
}

io::Dataset synthetic_data(const models::ModelInfo& model, int count, std::uint64_t seed) {
  const auto& in = model.input;
  if (takes_tokens(model)) {
    if (in.size() != 1) {
      throw InvalidArgument(fmt::format("{}: a model of token ids with input {}, expected [sequence]", model.name,
                                        to_string(in)));
    }
    return io::synthetic_token_dataset(count, static_cast<int>(in[0]), model.classes, seed);
  }
  return io::synthetic_dataset(count, static_cast<int>(in[0]), static_cast<int>(in[1]), static_cast<int>(in[2]),
                               model.classes, seed);
}

io::TrainTest load_data(const DataOptions& o, const models::ModelInfo& model, std::int64_t batch_hint,
                        std::uint64_t seed) {
  if (o.dataset == "synthetic") {
    const auto n = static_cast<int>(o.synthetic_samples);
    return {synthetic_data(model, n, seed), synthetic_data(model, std::max(1, n / 6), seed + 1)};
  }
  io::TrainTest data;
  if (o.dataset == "h5" && !o.file.empty() && io::is_h5_tokens(o.file)) {
    if (!takes_tokens(model) || model.input.size() != 1) {
      throw InvalidArgument(fmt::format("--data-file {}: token ids, model {} takes input {}, expected a model of "
                                        "token ids [sequence] (an Embedding first)",
                                        o.file.string(), model.name, to_string(model.input)));
    }
    const int sequence = static_cast<int>(model.input[0]);
    data = {io::open_h5_tokens(o.file, "train", sequence), io::open_h5_tokens(o.file, "test", sequence)};
  } else if (o.dataset == "text") {
    if (!takes_tokens(model) || model.input.size() != 1) {
      throw InvalidArgument(fmt::format("--dataset text: model {} takes input {}, expected a model of token ids "
                                        "[sequence] (an Embedding first)", model.name, to_string(model.input)));
    }
    if (!o.dir.empty() && !o.file.empty()) {
      throw InvalidArgument(fmt::format("--dataset text: --data-dir {} and --data-file {}, expected one of them",
                                        o.dir.string(), o.file.string()));
    }
    const std::filesystem::path corpus = !o.file.empty() ? o.file : !o.dir.empty() ? o.dir : io::default_text_dir();
    data = io::load_text_dataset(corpus, static_cast<int>(model.input[0]));
    if (data.train.classes != model.classes) {
      throw InvalidArgument(fmt::format("--dataset text: a byte-level corpus has a vocabulary of {}, model {} outputs "
                                        "{} classes", data.train.classes, model.name, model.classes));
    }
  } else {
    data = open_dataset(o, batch_hint);
  }
  if (o.normalize && data.train.has_tokens()) {
    throw InvalidArgument(fmt::format("--normalize: {} holds token ids, expected images to normalise",
                                      data.train.name));
  }
  if (o.train_samples > 0) {
    data.train = data.train.stratified_subset(std::min(o.train_samples, data.train.size()), seed);
  }
  if (o.test_samples > 0) {
    data.test = data.test.stratified_subset(std::min(o.test_samples, data.test.size()), seed + 1);
  }
  if (o.normalize) {
    // The training set's statistics for both, as PyDTNN does.
    const io::ChannelStats stats = io::channel_stats(data.train);
    io::normalize(data.train, stats);
    io::normalize(data.test, stats);
  }
  return data;
}

std::vector<std::shared_ptr<Callback>> schedule_callbacks(const ScheduleOptions& o, int epochs) {
  std::vector<std::shared_ptr<Callback>> out;
  if (o.warmup_epochs_ > 0 && o.warmup_steps_ > 0) {
    throw InvalidArgument(fmt::format("warm-up of {} epochs and of {} steps, expected one of them", o.warmup_epochs_,
                                      o.warmup_steps_));
  }
  if (o.warmup_steps_ > 0) out.push_back(std::make_shared<WarmUp>(Steps{o.warmup_steps_}, o.warmup_start_));
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
    out.push_back(std::make_shared<CosineDecay>(
        CosineDecayOptions(Epochs{epochs}).min_lr(o.min_lr_).start(Steps{o.warmup_steps_})));
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
  rewind_learning_rate(optimizer, base_lr, schedule);
  return {file, c.step, c.epoch};
}

void rewind_learning_rate(Optimizer& optimizer, float base_lr, const ScheduleOptions& schedule) {
  if (schedule.cosine_ || schedule.warmup_epochs_ > 0) optimizer.set_learning_rate(base_lr);
}

}  // namespace dtnn
