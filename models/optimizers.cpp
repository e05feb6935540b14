// SPDX-License-Identifier: Apache-2.0
#include "models/optimizers.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "codelets/optimizers.hpp"
#include "codelets/sgd.hpp"
#include "core/errors.hpp"

namespace dtnn {
namespace {

void check_lr(const char* who, float lr) {
  if (!(lr > 0.0f) || !std::isfinite(lr)) {
    throw InvalidArgument(fmt::format("{}: lr={}, expected a finite value > 0", who, lr));
  }
}

// Decay rates and momenta: 1 would freeze the average (or never forget), so the interval is open at 1.
void check_rate(const char* who, const char* what, float value) {
  if (!(value >= 0.0f && value < 1.0f)) {
    throw InvalidArgument(fmt::format("{}: {}={}, expected 0 <= {} < 1", who, what, value, what));
  }
}

void check_non_negative(const char* who, const char* what, float value) {
  if (!(value >= 0.0f) || !std::isfinite(value)) {
    throw InvalidArgument(fmt::format("{}: {}={}, expected a finite value >= 0", who, what, value));
  }
}

// eps = 0 would turn a parameter whose gradient is always zero into 0 / 0.
void check_eps(const char* who, float eps) {
  if (!(eps > 0.0f) || !std::isfinite(eps)) {
    throw InvalidArgument(fmt::format("{}: eps={}, expected a finite value > 0", who, eps));
  }
}

template <class State>
std::int64_t steps_of(const std::unordered_map<const Parameter*, State>& states, const Parameter& p) {
  const auto it = states.find(&p);
  return it == states.end() ? 0 : it->second.steps;
}

MomentState& moments(std::unordered_map<const Parameter*, MomentState>& states, const Parameter& p) {
  MomentState& s = states[&p];
  if (!s.exp_avg.defined()) {
    s.exp_avg = Tensor(p.value.shape());
    s.exp_avg_sq = Tensor(p.value.shape());
  }
  return s;
}

double bias_correction(float beta, std::int64_t t) {
  return 1.0 - std::pow(static_cast<double>(beta), static_cast<double>(t));
}

}  // namespace

Sgd::Sgd(SgdOptions o) : Optimizer(o.lr_), options_(o) {
  if (!(o.lr_ > 0.0f) || !std::isfinite(o.lr_)) {
    throw InvalidArgument(fmt::format("SGD: learning rate {}, expected a finite value > 0", o.lr_));
  }
  if (!(o.momentum_ >= 0.0f && o.momentum_ < 1.0f)) {
    throw InvalidArgument(fmt::format("SGD: momentum {}, expected 0 <= momentum < 1", o.momentum_));
  }
  if (!(o.weight_decay_ >= 0.0f) || !std::isfinite(o.weight_decay_)) {
    throw InvalidArgument(fmt::format("SGD: weight decay {}, expected a finite value >= 0", o.weight_decay_));
  }
  if (o.nesterov_ && o.momentum_ == 0.0f) {
    throw InvalidArgument("SGD: Nesterov with momentum 0, expected momentum > 0");
  }
}

std::string Sgd::describe() const {
  return fmt::format("SGD(lr={}, momentum={}, weight_decay={}{})", lr_, options_.momentum_, options_.weight_decay_,
                     options_.nesterov_ ? ", nesterov" : "");
}

Tensor& Sgd::velocity(const Parameter& p) {
  auto it = velocity_.find(&p);
  if (it == velocity_.end()) {
    it = velocity_.emplace(&p, Tensor(p.value.shape())).first;
  }
  return it->second;
}

void Sgd::submit_update(Parameter& p, std::string_view name, int priority) {
  const SgdParams params{lr_, options_.momentum_, decay_of(p, options_.weight_decay_), options_.nesterov_};
  codelets::submit_sgd_update({name, priority}, params, p.value, p.grad, velocity(p));
}

ParamState Sgd::state_of(Parameter& p) { return {{{"momentum_buffer", &velocity(p)}}, {}}; }

Rmsprop::Rmsprop(RmspropOptions o) : Optimizer(o.lr_), options_(o) {
  check_lr("RMSprop", o.lr_);
  check_rate("RMSprop", "alpha", o.alpha_);
  check_eps("RMSprop", o.eps_);
  check_non_negative("RMSprop", "weight_decay", o.weight_decay_);
  check_rate("RMSprop", "momentum", o.momentum_);
}

std::string Rmsprop::describe() const {
  return fmt::format("RMSprop(lr={}, alpha={}, eps={}, weight_decay={}, momentum={}{})", lr_, options_.alpha_,
                     options_.eps_, options_.weight_decay_, options_.momentum_,
                     options_.centered_ ? ", centered" : "");
}

std::int64_t Rmsprop::steps(const Parameter& p) const { return steps_of(state_, p); }

Rmsprop::State& Rmsprop::ensure(const Parameter& p) {
  State& s = state_[&p];
  if (!s.square_avg.defined()) {
    s.square_avg = Tensor(p.value.shape());
    if (options_.momentum_ != 0.0f) {
      s.momentum_buf = Tensor(p.value.shape());
    }
    if (options_.centered_) {
      s.grad_avg = Tensor(p.value.shape());
    }
  }
  return s;
}

ParamState Rmsprop::state_of(Parameter& p) {
  State& s = ensure(p);
  ParamState out{{{"square_avg", &s.square_avg}}, {{"step", static_cast<double>(s.steps)}}};
  if (s.momentum_buf.defined()) out.tensors.emplace_back("momentum_buffer", &s.momentum_buf);
  if (s.grad_avg.defined()) out.tensors.emplace_back("grad_avg", &s.grad_avg);
  return out;
}

void Rmsprop::restore_scalars(Parameter& p, const std::vector<std::pair<std::string, double>>& scalars) {
  for (const auto& [key, value] : scalars) {
    if (key == "step") ensure(p).steps = static_cast<std::int64_t>(value);
  }
}

void Rmsprop::submit_update(Parameter& p, std::string_view name, int priority) {
  State& s = ensure(p);
  ++s.steps;
  const RmspropParams params{lr_,
                             options_.alpha_,
                             options_.eps_,
                             decay_of(p, options_.weight_decay_),
                             options_.momentum_,
                             options_.centered_ ? 1 : 0};
  codelets::submit_rmsprop_update({name, priority}, params, p.value, p.grad, s.square_avg,
                                  s.momentum_buf.defined() ? &s.momentum_buf : nullptr,
                                  s.grad_avg.defined() ? &s.grad_avg : nullptr);
}

Adam::Adam(AdamOptions o) : Adam(o, Decay::kL2, "Adam") {}

Adam::Adam(const AdamOptions& o, Decay decay, const char* display_name)
    : Optimizer(o.lr_), options_(o), decay_(decay), display_name_(display_name) {
  check_lr(display_name, o.lr_);
  check_rate(display_name, "beta1", o.beta1_);
  check_rate(display_name, "beta2", o.beta2_);
  check_eps(display_name, o.eps_);
  check_non_negative(display_name, "weight_decay", o.weight_decay_);
}

std::string Adam::describe() const {
  return fmt::format("{}(lr={}, beta1={}, beta2={}, eps={}, weight_decay={})", display_name_, lr_, options_.beta1_,
                     options_.beta2_, options_.eps_, options_.weight_decay_);
}

std::int64_t Adam::steps(const Parameter& p) const { return steps_of(state_, p); }

namespace {

ParamState moment_state(MomentState& s, int with_mu_product) {
  ParamState out{{{"exp_avg", &s.exp_avg}, {"exp_avg_sq", &s.exp_avg_sq}}, {{"step", static_cast<double>(s.steps)}}};
  if (with_mu_product) out.scalars.emplace_back("mu_product", s.mu_product);
  return out;
}

void restore_moments(MomentState& s, const std::vector<std::pair<std::string, double>>& scalars) {
  for (const auto& [key, value] : scalars) {
    if (key == "step") s.steps = static_cast<std::int64_t>(value);
    if (key == "mu_product") s.mu_product = value;
  }
}

}  // namespace

ParamState Adam::state_of(Parameter& p) { return moment_state(moments(state_, p), 0); }

void Adam::restore_scalars(Parameter& p, const std::vector<std::pair<std::string, double>>& scalars) {
  restore_moments(moments(state_, p), scalars);
}

void Adam::submit_update(Parameter& p, std::string_view name, int priority) {
  MomentState& s = moments(state_, p);
  const std::int64_t t = ++s.steps;
  const double lr = lr_;
  const float wd = decay_of(p, options_.weight_decay_);
  AdamParams params;
  params.step_size = static_cast<float>(lr / bias_correction(options_.beta1_, t));
  params.inv_sqrt_bias_correction2 = static_cast<float>(1.0 / std::sqrt(bias_correction(options_.beta2_, t)));
  params.beta1 = options_.beta1_;
  params.beta2 = options_.beta2_;
  params.eps = options_.eps_;
  params.weight_decay = decay_ == Decay::kL2 ? wd : 0.0f;
  params.decay_factor = decay_ == Decay::kDecoupled ? static_cast<float>(1.0 - lr * static_cast<double>(wd)) : 1.0f;
  codelets::submit_adam_update({name, priority}, params, p.value, p.grad, s.exp_avg, s.exp_avg_sq);
}

namespace {

AdamOptions as_adam_options(const AdamWOptions& o) {
  return AdamOptions(o.lr_).beta1(o.beta1_).beta2(o.beta2_).eps(o.eps_).weight_decay(o.weight_decay_);
}

}  // namespace

AdamW::AdamW(AdamWOptions o) : Adam(as_adam_options(o), Decay::kDecoupled, "AdamW") {}

Nadam::Nadam(NadamOptions o) : Optimizer(o.lr_), options_(o) {
  check_lr("NAdam", o.lr_);
  check_rate("NAdam", "beta1", o.beta1_);
  check_rate("NAdam", "beta2", o.beta2_);
  check_eps("NAdam", o.eps_);
  check_non_negative("NAdam", "weight_decay", o.weight_decay_);
  check_non_negative("NAdam", "momentum_decay", o.momentum_decay_);
}

std::string Nadam::describe() const {
  return fmt::format("NAdam(lr={}, beta1={}, beta2={}, eps={}, weight_decay={}, momentum_decay={})", lr_,
                     options_.beta1_, options_.beta2_, options_.eps_, options_.weight_decay_,
                     options_.momentum_decay_);
}

std::int64_t Nadam::steps(const Parameter& p) const { return steps_of(state_, p); }

ParamState Nadam::state_of(Parameter& p) { return moment_state(moments(state_, p), 1); }

void Nadam::restore_scalars(Parameter& p, const std::vector<std::pair<std::string, double>>& scalars) {
  restore_moments(moments(state_, p), scalars);
}

void Nadam::submit_update(Parameter& p, std::string_view name, int priority) {
  MomentState& s = moments(state_, p);
  const std::int64_t t = ++s.steps;
  const double lr = lr_;
  const double beta1 = options_.beta1_;
  const double psi = options_.momentum_decay_;
  const double mu = beta1 * (1.0 - 0.5 * std::pow(0.96, static_cast<double>(t) * psi));
  const double mu_next = beta1 * (1.0 - 0.5 * std::pow(0.96, static_cast<double>(t + 1) * psi));
  s.mu_product *= mu;
  NadamParams params;
  params.grad_coef = static_cast<float>(lr * (1.0 - mu) / (1.0 - s.mu_product));
  params.momentum_coef = static_cast<float>(lr * mu_next / (1.0 - s.mu_product * mu_next));
  params.inv_sqrt_bias_correction2 = static_cast<float>(1.0 / std::sqrt(bias_correction(options_.beta2_, t)));
  params.beta1 = options_.beta1_;
  params.beta2 = options_.beta2_;
  params.eps = options_.eps_;
  params.weight_decay = decay_of(p, options_.weight_decay_);
  codelets::submit_nadam_update({name, priority}, params, p.value, p.grad, s.exp_avg, s.exp_avg_sq);
}

const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names{"sgd", "rmsprop", "adam", "adamw", "nadam"};
  return names;
}

namespace {

struct Setting {
  const char* name;
  int given;
  std::string value;
};

std::vector<Setting> settings(const OptimizerConfig& c) {
  auto show = [](const auto& v) { return v ? fmt::format("{}", *v) : std::string(); };
  return {{"weight_decay", c.weight_decay.has_value(), show(c.weight_decay)},
          {"momentum", c.momentum.has_value(), show(c.momentum)},
          {"nesterov", c.nesterov.has_value(), show(c.nesterov)},
          {"alpha", c.alpha.has_value(), show(c.alpha)},
          {"centered", c.centered.has_value(), show(c.centered)},
          {"beta1", c.beta1.has_value(), show(c.beta1)},
          {"beta2", c.beta2.has_value(), show(c.beta2)},
          {"eps", c.eps.has_value(), show(c.eps)},
          {"momentum_decay", c.momentum_decay.has_value(), show(c.momentum_decay)}};
}

// A hyper-parameter the optimizer ignores is almost always a typo on the command line or a wrong optimizer name.
void check_only(const OptimizerConfig& c, const std::string& name, std::vector<std::string_view> accepted) {
  for (const Setting& s : settings(c)) {
    if (s.given && std::find(accepted.begin(), accepted.end(), s.name) == accepted.end()) {
      throw InvalidArgument(fmt::format("make_optimizer: {}={} given for {}, which does not use it; {} takes lr, {}",
                                        s.name, s.value, name, name, fmt::join(accepted, ", ")));
    }
  }
}

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c) {
  std::string name = c.name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
  const float lr = c.learning_rate;
  if (name == "sgd") {
    check_only(c, name, {"momentum", "nesterov", "weight_decay"});
    SgdOptions o(lr);
    if (c.momentum) o.momentum(*c.momentum);
    if (c.nesterov) o.nesterov(*c.nesterov);
    if (c.weight_decay) o.weight_decay(*c.weight_decay);
    return std::make_unique<Sgd>(o);
  }
  if (name == "rmsprop") {
    check_only(c, name, {"alpha", "eps", "weight_decay", "momentum", "centered"});
    RmspropOptions o(lr);
    if (c.alpha) o.alpha(*c.alpha);
    if (c.eps) o.eps(*c.eps);
    if (c.weight_decay) o.weight_decay(*c.weight_decay);
    if (c.momentum) o.momentum(*c.momentum);
    if (c.centered) o.centered(*c.centered);
    return std::make_unique<Rmsprop>(o);
  }
  if (name == "adam" || name == "adamw") {
    check_only(c, name, {"beta1", "beta2", "eps", "weight_decay"});
    if (name == "adam") {
      AdamOptions o(lr);
      if (c.beta1) o.beta1(*c.beta1);
      if (c.beta2) o.beta2(*c.beta2);
      if (c.eps) o.eps(*c.eps);
      if (c.weight_decay) o.weight_decay(*c.weight_decay);
      return std::make_unique<Adam>(o);
    }
    AdamWOptions o(lr);
    if (c.beta1) o.beta1(*c.beta1);
    if (c.beta2) o.beta2(*c.beta2);
    if (c.eps) o.eps(*c.eps);
    if (c.weight_decay) o.weight_decay(*c.weight_decay);
    return std::make_unique<AdamW>(o);
  }
  if (name == "nadam") {
    check_only(c, name, {"beta1", "beta2", "eps", "weight_decay", "momentum_decay"});
    NadamOptions o(lr);
    if (c.beta1) o.beta1(*c.beta1);
    if (c.beta2) o.beta2(*c.beta2);
    if (c.eps) o.eps(*c.eps);
    if (c.weight_decay) o.weight_decay(*c.weight_decay);
    if (c.momentum_decay) o.momentum_decay(*c.momentum_decay);
    return std::make_unique<Nadam>(o);
  }
  throw InvalidArgument(fmt::format("make_optimizer: optimizer '{}', expected one of {}", c.name,
                                    fmt::join(optimizer_names(), ", ")));
}

const std::vector<std::string>& weight_decay_groups() {
  static const std::vector<std::string> names{"bias", "norm", "embedding"};
  return names;
}

namespace {

// The weight-decay group of a parameter of `layer` (a leaf: containers own no parameters): "weight" for the rest.
std::string_view decay_group(const Layer& layer, const Parameter& p) {
  const std::string type = layer.type();
  if (type.find("Norm") != std::string::npos) return "norm";
  if (type == "Embedding" || type == "PositionalEncoding") return "embedding";
  if (p.value.shape().size() == 1) return "bias";
  return "weight";
}

void exempt_layer(Optimizer& o, Layer& layer, const std::vector<std::string>& groups, std::vector<std::string>& out) {
  for (Parameter* p : layer.parameters()) {
    if (std::find(groups.begin(), groups.end(), decay_group(layer, *p)) == groups.end()) continue;
    o.exempt_from_weight_decay(*p);
    out.push_back(layer.name() + "." + p->name);
  }
  for (Layer* child : layer.children()) exempt_layer(o, *child, groups, out);
}

}  // namespace

std::vector<std::string> exempt_from_weight_decay(Optimizer& o, Sequential& model,
                                                  const std::vector<std::string>& groups) {
  const auto& known = weight_decay_groups();
  for (const std::string& g : groups) {
    if (std::find(known.begin(), known.end(), g) == known.end()) {
      throw InvalidArgument(fmt::format("weight-decay group '{}', expected one of {}", g, fmt::join(known, ", ")));
    }
  }
  std::vector<std::string> names;
  for (std::size_t i = 0; i < model.size(); ++i) exempt_layer(o, model.layer(i), groups, names);
  return names;
}

}  // namespace dtnn
