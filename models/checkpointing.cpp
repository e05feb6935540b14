// SPDX-License-Identifier: Apache-2.0
#include "models/checkpointing.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/errors.hpp"

namespace dtnn {
namespace {

io::NamedArray to_array(const std::string& name, const Tensor& t) {
  return {name, t.shape(), t.to_vector()};
}

// PyTorch keeps num_batches_tracked as an int64 scalar: shape () in the file.
std::vector<std::int64_t> stored_shape(const std::string& name, const Shape& shape) {
  if (name.ends_with("num_batches_tracked") && numel(shape) == 1) return {};
  return shape;
}

}  // namespace

io::Checkpoint capture_checkpoint(Sequential& model, Optimizer* optimizer, const CheckpointMeta& meta) {
  io::Checkpoint c;
  c.model_name = meta.model_name;
  c.model_options = meta.model_options;
  c.world_size = meta.world_size;
  c.epoch = meta.epoch;
  c.step = meta.step;
  c.samples_seen = meta.samples_seen;
  for (const auto& p : model.named_parameters()) {
    c.parameters.push_back(to_array(p.name, p.parameter->value));
  }
  for (const auto& b : model.named_buffers()) {
    io::NamedArray a = to_array(b.name, b.buffer->value);
    a.shape = stored_shape(b.name, b.buffer->value.shape());
    c.buffers.push_back(std::move(a));
  }
  nlohmann::json opt = {{"name", "none"}};
  if (optimizer != nullptr) {
    opt = {{"name", optimizer->name()}, {"describe", optimizer->describe()}, {"lr", optimizer->learning_rate()}};
    nlohmann::json scalars = nlohmann::json::object();
    for (const auto& p : model.named_parameters()) {
      const ParamState s = optimizer->state_of(*p.parameter);
      for (const auto& [name, tensor] : s.tensors) {
        c.optimizer_state.push_back(to_array(p.name + "." + name, *tensor));
      }
      for (const auto& [name, value] : s.scalars) {
        scalars[p.name][name] = value;
      }
    }
    opt["state"] = scalars;
  }
  c.optimizer = opt.dump();
  return c;
}

void restore_checkpoint(const io::Checkpoint& c, Sequential& model, Optimizer* optimizer,
                        const std::filesystem::path& file) {
  std::vector<io::Expected> params;
  std::vector<io::Expected> buffers;
  for (const auto& p : model.named_parameters()) params.push_back({p.name, p.parameter->value.shape()});
  for (const auto& b : model.named_buffers()) buffers.push_back({b.name, stored_shape(b.name, b.buffer->value.shape())});
  io::check_against(c, params, buffers, file);

  std::map<std::string, const io::NamedArray*> by_name;
  for (const auto* group : {&c.parameters, &c.buffers, &c.optimizer_state}) {
    for (const auto& a : *group) by_name[a.name] = &a;
  }
  for (const auto& p : model.named_parameters()) p.parameter->value.copy_from(by_name.at(p.name)->data);
  for (const auto& b : model.named_buffers()) b.buffer->value.copy_from(by_name.at(b.name)->data);
  if (optimizer == nullptr) return;

  const nlohmann::json opt = nlohmann::json::parse(c.optimizer, nullptr, false);
  // Weights without an optimizer (tools/pytorch_to_checkpoint.py writes them: a start, not a resume) leave the
  // optimizer fresh.
  if (opt.is_object() && opt.empty() && c.optimizer_state.empty()) return;
  if (opt.is_discarded() || opt.value("name", "") != optimizer->name()) {
    throw DataError(fmt::format("{}: optimizer '{}' in the checkpoint, expected '{}'", file.string(),
                                opt.is_discarded() ? "unreadable" : opt.value("name", ""), optimizer->name()));
  }
  std::vector<std::string> problems;
  for (const auto& p : model.named_parameters()) {
    const ParamState s = optimizer->state_of(*p.parameter);
    for (const auto& [name, tensor] : s.tensors) {
      const std::string key = p.name + "." + name;
      const auto it = by_name.find(key);
      if (it == by_name.end()) {
        problems.push_back(fmt::format("missing optimizer state {}", key));
      } else if (it->second->shape != tensor->shape()) {
        problems.push_back(fmt::format("optimizer state {} has shape {}, expected {}", key,
                                       to_string(it->second->shape), to_string(tensor->shape())));
      } else {
        tensor->copy_from(it->second->data);
      }
    }
    std::vector<std::pair<std::string, double>> scalars;
    if (opt.contains("state") && opt["state"].contains(p.name)) {
      for (const auto& [name, value] : opt["state"][p.name].items()) scalars.emplace_back(name, value.get<double>());
    }
    optimizer->restore_scalars(*p.parameter, scalars);
  }
  if (!problems.empty()) {
    std::string all;
    for (const auto& s : problems) all += "\n  " + s;
    throw DataError(fmt::format("{}: the checkpoint does not match the optimizer:{}", file.string(), all));
  }
  if (opt.contains("lr")) optimizer->set_learning_rate(opt["lr"].get<float>());
}

void check_finite(const io::Checkpoint& c, const std::filesystem::path& dir) {
  const auto check = [&](const std::vector<io::NamedArray>& arrays, const char* what) {
    for (const io::NamedArray& a : arrays) {
      const auto bad = std::find_if(a.data.begin(), a.data.end(), [](float v) { return !std::isfinite(v); });
      if (bad != a.data.end()) {
        throw NonFiniteState(fmt::format("{}: the checkpoint of step {} is not written: {} '{}' holds {} at index {}, "
                                         "expected finite values (the run diverged); the checkpoints already there "
                                         "are kept",
                                         dir.string(), c.step, what, a.name, *bad, bad - a.data.begin()));
      }
    }
  };
  check(c.parameters, "parameter");
  check(c.buffers, "buffer");
  check(c.optimizer_state, "optimizer state");
}

CheckpointCallback::CheckpointCallback(std::shared_ptr<io::CheckpointDirectory> dir, CheckpointMeta meta,
                                       CheckpointOptions options)
    : dir_path_(dir->dir()), dir_(std::move(dir)), meta_(std::move(meta)), options_(std::move(options)) {}

CheckpointCallback::CheckpointCallback(std::filesystem::path dir, int keep_last, CheckpointMeta meta,
                                       CheckpointOptions options)
    : dir_path_(std::move(dir)), keep_last_(keep_last), meta_(std::move(meta)), options_(std::move(options)) {}

io::CheckpointDirectory& CheckpointCallback::directory() {
  if (!dir_) dir_ = std::make_shared<io::CheckpointDirectory>(dir_path_, keep_last_);
  return *dir_;
}

void CheckpointCallback::on_batch_begin(TrainState& state) {
  if (start_step_ < 0) start_step_ = state.step;
  // Before step k runs, the weights are those after k steps: a checkpoint there resumes at step k.
  const std::int64_t every = options_.every_steps_;
  if (every > 0 && state.step > start_step_ && state.step % every == 0) {
    save(state, state.step, state.step / state.steps_per_epoch, nullptr);
  }
}

void CheckpointCallback::on_epoch_end(TrainState& state) {
  if (!options_.each_epoch_) return;
  save(state, (state.epoch + 1) * state.steps_per_epoch, state.epoch + 1, &state.history.epochs.back());
}

void CheckpointCallback::on_train_end(TrainState& state) {
  if (state.stopped_early) save(state, state.step, state.step / state.steps_per_epoch, nullptr);
}

void CheckpointCallback::save(TrainState& state, std::int64_t steps_done, std::int64_t epochs_done,
                              const EpochRecord* record) {
  // The steps still in flight end before these weights are read, and a non-finite loss among them stops training
  // before anything is written (NonFiniteLoss).
  if (state.settle) state.settle();
  CheckpointMeta meta = meta_;
  meta.step = steps_done;
  meta.epoch = epochs_done;
  meta.samples_seen = 0;
  for (const auto& e : state.history.epochs) meta.samples_seen += e.images;
  // Every rank takes part in the copy (it waits for its own tasks); rank 0 alone writes.
  io::Checkpoint c = capture_checkpoint(state.model, &state.optimizer, meta);
  if (options_.rank_ != 0) return;
  check_finite(c, dir_path_);
  const std::string& monitor = options_.monitor_;
  double metric = std::nan("");
  if (record != nullptr) {
    if (monitor == "val_loss") metric = record->val_loss;
    if (monitor == "val_accuracy") metric = record->val_accuracy;
    if (monitor == "loss") metric = record->loss;
    if (monitor == "accuracy") metric = record->accuracy;
  }
  const auto goal = monitor.find("accuracy") != std::string::npos ? io::MetricGoal::kMaximize
                                                                  : io::MetricGoal::kMinimize;
  try {
    io::CheckpointDirectory& dir = directory();
    last_ = std::isnan(metric) ? dir.save(c) : dir.save(c, metric, goal);
  } catch (const DataError& e) {
    if (options_.on_error_ == CheckpointErrors::kStop) throw;
    fmt::print(stderr, "dtnn: warning: {} (training goes on: --on-checkpoint-error warn)\n", e.what());
  }
}

}  // namespace dtnn
