// SPDX-License-Identifier: Apache-2.0
#include "models/schedules.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dtnn {
namespace {

void check_min_lr(const char* who, float min_lr) {
  if (!(min_lr >= 0.0f) || !std::isfinite(min_lr)) {
    throw InvalidArgument(fmt::format("{}: min_lr={}, expected a finite value >= 0", who, min_lr));
  }
}

void check_factor(const char* who, float factor) {
  if (!(factor > 0.0f && factor < 1.0f)) {
    throw InvalidArgument(fmt::format("{}: factor={}, expected 0 < factor < 1", who, factor));
  }
}

void check_patience(const char* who, int patience) {
  if (patience < 0) {
    throw InvalidArgument(fmt::format("{}: patience={}, expected a number of epochs >= 0", who, patience));
  }
}

// The reductions' rule: multiply, but stop at min_lr, and never raise an lr that is already below it.
void reduce_lr(Optimizer& optimizer, float factor, float min_lr) {
  const float lr = optimizer.learning_rate();
  if (lr > min_lr) {
    optimizer.set_learning_rate(std::max(lr * factor, min_lr));
  }
}

}  // namespace

std::int64_t Duration::to_steps(std::int64_t steps_per_epoch) const {
  return in_epochs_ ? count_ * steps_per_epoch : count_;
}

std::string Duration::to_string() const {
  return fmt::format("{} {}{}", count_, in_epochs_ ? "epoch" : "step", count_ == 1 ? "" : "s");
}

namespace detail {

void LrFactor::begin(const Optimizer& optimizer) {
  written_ = optimizer.learning_rate();
  others_ = written_;
  factor_ = 1.0;
}

void LrFactor::set(Optimizer& optimizer, double factor) {
  if (factor == factor_) {
    return;
  }
  const float now = optimizer.learning_rate();
  // Once this factor is 0 the product is 0 whatever the others do, and their share cannot be recovered from it;
  // only CosineDecay reaches 0, at its end, after which its factor no longer changes.
  if (now != written_ && factor_ != 0.0) {
    others_ = static_cast<double>(now) / factor_;
  }
  factor_ = factor;
  written_ = static_cast<float>(others_ * factor);
  optimizer.set_learning_rate(written_);
}

Monitor::Monitor(const char* who, std::string metric, double min_delta)
    : who_(who), metric_(std::move(metric)), min_delta_(min_delta),
      higher_is_better_(metric_.find("accuracy") != std::string::npos ? 1 : 0) {
  if (metric_ != "loss" && metric_ != "accuracy" && metric_ != "val_loss" && metric_ != "val_accuracy") {
    throw InvalidArgument(fmt::format("{}: monitor='{}', expected one of loss, accuracy, val_loss, val_accuracy",
                                      who, metric_));
  }
  if (!(min_delta >= 0.0) || !std::isfinite(min_delta)) {
    throw InvalidArgument(fmt::format("{}: min_delta={}, expected a finite value >= 0", who, min_delta));
  }
  reset();
}

void Monitor::reset() {
  best_ = higher_is_better_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
}

double Monitor::read(const TrainState& state) const {
  if (state.history.epochs.empty()) {
    throw InvalidArgument(fmt::format("{}: no epoch has ended, expected to be called from on_epoch_end", who_));
  }
  const EpochRecord& r = state.history.epochs.back();
  if (metric_ == "loss") return r.loss;
  if (metric_ == "accuracy") return r.accuracy;
  // A diverged validation loss is NaN too, but then its accuracy is still a number.
  if (std::isnan(r.val_loss) && std::isnan(r.val_accuracy)) {
    throw InvalidArgument(fmt::format("{}: monitor={} has no value at epoch {}, expected fit() to be given a "
                                      "validation set",
                                      who_, metric_, r.epoch));
  }
  return metric_ == "val_loss" ? r.val_loss : r.val_accuracy;
}

int Monitor::improves(double value) const {
  return higher_is_better_ ? value > best_ + min_delta_ : value < best_ - min_delta_;
}

}  // namespace detail

WarmUp::WarmUp(Duration length, float start_factor) : length_(length), start_factor_(start_factor) {
  if (length.count() < 1) {
    throw InvalidArgument(fmt::format("WarmUp: length {}, expected at least 1", length.to_string()));
  }
  // A start of 0 would leave no factor to divide out of the lr when another schedule changes it.
  if (!(start_factor > 0.0f && start_factor <= 1.0f)) {
    throw InvalidArgument(fmt::format("WarmUp: start_factor={}, expected 0 < start_factor <= 1", start_factor));
  }
}

void WarmUp::on_train_begin(TrainState& state) {
  steps_ = length_.to_steps(state.steps_per_epoch);
  factor_.begin(state.optimizer);
}

void WarmUp::on_batch_begin(TrainState& state) {
  const double f = state.step >= steps_
                       ? 1.0
                       : start_factor_ + (1.0 - start_factor_) * static_cast<double>(state.step) /
                                             static_cast<double>(steps_);
  factor_.set(state.optimizer, f);
}

StepDecay::StepDecay(int every_epochs, float factor, float min_lr)
    : every_(every_epochs), factor_(factor), min_lr_(min_lr) {
  if (every_epochs < 1) {
    throw InvalidArgument(fmt::format("StepDecay: every_epochs={}, expected at least 1", every_epochs));
  }
  check_factor("StepDecay", factor);
  check_min_lr("StepDecay", min_lr);
}

void StepDecay::on_epoch_begin(TrainState& state) {
  if (state.epoch > 0 && state.epoch % every_ == 0) {
    reduce_lr(state.optimizer, factor_, min_lr_);
  }
}

ReduceLROnPlateau::ReduceLROnPlateau(ReduceLROnPlateauOptions o)
    : options_(o), monitor_("ReduceLROnPlateau", o.monitor_, o.min_delta_) {
  check_factor("ReduceLROnPlateau", o.factor_);
  check_patience("ReduceLROnPlateau", o.patience_);
  check_min_lr("ReduceLROnPlateau", o.min_lr_);
}

void ReduceLROnPlateau::on_train_begin(TrainState& state) {
  monitor_.reset();
  wait_ = 0;
}

void ReduceLROnPlateau::on_epoch_end(TrainState& state) {
  const double value = monitor_.read(state);
  if (monitor_.improves(value)) {
    monitor_.set_best(value);
    wait_ = 0;
    return;
  }
  if (++wait_ >= options_.patience_) {
    reduce_lr(state.optimizer, options_.factor_, options_.min_lr_);
    wait_ = 0;
  }
}

CosineDecay::CosineDecay(CosineDecayOptions o) : options_(o) {
  if (o.total_.count() < 1) {
    throw InvalidArgument(fmt::format("CosineDecay: total {}, expected at least 1", o.total_.to_string()));
  }
  if (o.start_.count() < 0) {
    throw InvalidArgument(fmt::format("CosineDecay: start {}, expected at least 0", o.start_.to_string()));
  }
  check_min_lr("CosineDecay", o.min_lr_);
}

void CosineDecay::on_train_begin(TrainState& state) {
  total_ = options_.total_.to_steps(state.steps_per_epoch);
  start_ = options_.start_.to_steps(state.steps_per_epoch);
  if (start_ >= total_) {
    throw InvalidArgument(fmt::format("CosineDecay: start {} ({} steps) not before total {} ({} steps), expected "
                                      "start < total",
                                      options_.start_.to_string(), start_, options_.total_.to_string(), total_));
  }
  const float base = state.optimizer.learning_rate();
  if (!(options_.min_lr_ <= base)) {
    throw InvalidArgument(fmt::format("CosineDecay: min_lr={} above the optimizer's lr={}, expected min_lr <= lr",
                                      options_.min_lr_, base));
  }
  min_factor_ = base > 0.0f ? static_cast<double>(options_.min_lr_) / base : 0.0;
  factor_.begin(state.optimizer);
}

void CosineDecay::on_batch_begin(TrainState& state) {
  const double progress = std::clamp(static_cast<double>(state.step - start_) / static_cast<double>(total_ - start_),
                                     0.0, 1.0);
  const double f = min_factor_ + (1.0 - min_factor_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  factor_.set(state.optimizer, f);
}

EarlyStopping::EarlyStopping(EarlyStoppingOptions o)
    : options_(o), monitor_("EarlyStopping", o.monitor_, o.min_delta_) {
  check_patience("EarlyStopping", o.patience_);
}

void EarlyStopping::on_train_begin(TrainState& state) {
  monitor_.reset();
  wait_ = 0;
  best_epoch_ = 0;
  stopped_epoch_ = 0;
  restored_ = 0;
  best_weights_.clear();
}

void EarlyStopping::on_epoch_end(TrainState& state) {
  const double value = monitor_.read(state);
  const int epoch = state.history.epochs.back().epoch;
  if (monitor_.improves(value)) {
    monitor_.set_best(value);
    best_epoch_ = epoch;
    wait_ = 0;
    if (options_.restore_best_) {
      snapshot(state.model);
    }
    return;
  }
  if (++wait_ >= options_.patience_) {
    state.stop = true;
    stopped_epoch_ = epoch;
    if (options_.restore_best_ && best_epoch_ > 0) {
      restore(state.model);
    }
  }
}

void EarlyStopping::on_train_end(TrainState& state) {
  if (!options_.restore_best_ || restored_ || best_epoch_ == 0 || state.history.epochs.empty() ||
      state.history.epochs.back().epoch == best_epoch_) {
    return;
  }
  restore(state.model);
}

void EarlyStopping::snapshot(Sequential& model) {
  best_weights_.clear();
  for (const NamedParameter& p : model.named_parameters()) {
    best_weights_.emplace_back(p.name, p.parameter->value.to_vector());
  }
  for (const NamedBuffer& b : model.named_buffers()) {
    best_weights_.emplace_back(b.name, b.buffer->value.to_vector());
  }
}

void EarlyStopping::restore(Sequential& model) {
  std::vector<std::pair<std::string, Tensor*>> targets;
  for (const NamedParameter& p : model.named_parameters()) {
    targets.emplace_back(p.name, &p.parameter->value);
  }
  for (const NamedBuffer& b : model.named_buffers()) {
    targets.emplace_back(b.name, &b.buffer->value);
  }
  if (targets.size() != best_weights_.size()) {
    throw InvalidArgument(fmt::format("EarlyStopping: the model has {} parameters and buffers, the snapshot of epoch "
                                      "{} has {}, expected the same model",
                                      targets.size(), best_epoch_, best_weights_.size()));
  }
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const auto& [name, values] = best_weights_[i];
    Tensor& t = *targets[i].second;
    if (targets[i].first != name || static_cast<std::size_t>(t.numel()) != values.size()) {
      throw InvalidArgument(fmt::format("EarlyStopping: model tensor {} {} where the snapshot of epoch {} has {} "
                                        "with {} values, expected the same model",
                                        targets[i].first, to_string(t.shape()), best_epoch_, name, values.size()));
    }
  }
  for (std::size_t i = 0; i < targets.size(); ++i) {
    targets[i].second->copy_from(best_weights_[i].second);
  }
  restored_ = 1;
}

namespace {

std::string loss_monitor(std::string monitor) {
  if (monitor != "loss" && monitor != "val_loss") {
    throw InvalidArgument(fmt::format("StopAtLoss: monitor='{}', expected loss or val_loss", monitor));
  }
  return monitor;
}

}  // namespace

StopAtLoss::StopAtLoss(float threshold, std::string monitor)
    : threshold_(threshold), monitor_("StopAtLoss", loss_monitor(std::move(monitor)), 0.0) {
  if (!std::isfinite(threshold)) {
    throw InvalidArgument(fmt::format("StopAtLoss: threshold={}, expected a finite value", threshold));
  }
}

void StopAtLoss::on_train_begin(TrainState& state) { stopped_epoch_ = 0; }

void StopAtLoss::on_epoch_end(TrainState& state) {
  if (monitor_.read(state) <= threshold_) {
    state.stop = true;
    stopped_epoch_ = state.history.epochs.back().epoch;
  }
}

float scale_lr_for_ranks(float lr, int ranks) {
  if (ranks < 1) {
    throw InvalidArgument(fmt::format("scale_lr_for_ranks: ranks={}, expected at least 1", ranks));
  }
  return lr * static_cast<float>(ranks);
}

}  // namespace dtnn
