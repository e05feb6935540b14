// SPDX-License-Identifier: Apache-2.0
// The optimizers, with PyTorch's definitions (SGD, RMSprop, Adam, AdamW, NAdam), and the factory by name that the
// command line uses (the interface they implement is models/optimizer.hpp). Each submits one update task per
// parameter and keeps its state tensors per parameter, created on that parameter's first update. Bias corrections use the number of updates of that
// parameter, counted by the optimizer (PyDTNN counts per layer: the same count for every parameter of a layer).
// Unlike PyDTNN, eps sits outside the square root, as in PyTorch and in the papers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "models/optimizer.hpp"
#include "models/sequential.hpp"

namespace dtnn {

struct SgdOptions {
  explicit SgdOptions(float learning_rate) : lr_(learning_rate) {}
  SgdOptions& momentum(float m) { momentum_ = m; return *this; }
  SgdOptions& weight_decay(float wd) { weight_decay_ = wd; return *this; }
  SgdOptions& nesterov(bool on) { nesterov_ = on; return *this; }

  float lr_;
  float momentum_ = 0.0f;
  float weight_decay_ = 0.0f;
  bool nesterov_ = false;
};

// PyTorch's SGD: v = momentum * v + (g + wd * w); w -= lr * v (or lr * (g' + momentum * v) with Nesterov).
class Sgd : public Optimizer {
 public:
  explicit Sgd(SgdOptions options);
  void submit_update(Parameter& p, std::string_view name, int priority) override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::string name() const override { return "sgd"; }
  [[nodiscard]] ParamState state_of(Parameter& p) override;

 private:
  Tensor& velocity(const Parameter& p);
  SgdOptions options_;
  std::unordered_map<const Parameter*, Tensor> velocity_;
};

// alpha is the decay of the squared-gradient average (PyDTNN and Keras call it rho).
struct RmspropOptions {
  explicit RmspropOptions(float learning_rate) : lr_(learning_rate) {}
  RmspropOptions& alpha(float a) { alpha_ = a; return *this; }
  RmspropOptions& eps(float e) { eps_ = e; return *this; }
  RmspropOptions& weight_decay(float wd) { weight_decay_ = wd; return *this; }
  RmspropOptions& momentum(float m) { momentum_ = m; return *this; }
  // Divides by the centred second moment (an estimate of the gradient's variance), as PyTorch's centered=True.
  RmspropOptions& centered(bool on) { centered_ = on; return *this; }

  float lr_;
  float alpha_ = 0.99f;
  float eps_ = 1e-8f;
  float weight_decay_ = 0.0f;
  float momentum_ = 0.0f;
  bool centered_ = false;
};

// PyTorch's RMSprop: v = alpha v + (1 - alpha) g^2; w -= lr g / (sqrt(v) + eps); with momentum,
// buf = momentum buf + g / (sqrt(v) + eps), w -= lr buf. Weight decay is L2 (g += wd w).
class Rmsprop : public Optimizer {
 public:
  explicit Rmsprop(RmspropOptions options);
  void submit_update(Parameter& p, std::string_view name, int priority) override;
  [[nodiscard]] std::string describe() const override;
  // Updates submitted so far for p (0 before its first).
  [[nodiscard]] std::int64_t steps(const Parameter& p) const;
  [[nodiscard]] std::string name() const override { return "rmsprop"; }
  [[nodiscard]] ParamState state_of(Parameter& p) override;
  void restore_scalars(Parameter& p, const std::vector<std::pair<std::string, double>>& scalars) override;

 private:
  struct State;
  State& ensure(const Parameter& p);
  struct State {
    Tensor square_avg;
    Tensor momentum_buf;  // only with momentum
    Tensor grad_avg;      // only when centered
    std::int64_t steps = 0;
  };
  RmspropOptions options_;
  std::unordered_map<const Parameter*, State> state_;
};

struct AdamOptions {
  explicit AdamOptions(float learning_rate) : lr_(learning_rate) {}
  AdamOptions& beta1(float b) { beta1_ = b; return *this; }
  AdamOptions& beta2(float b) { beta2_ = b; return *this; }
  AdamOptions& eps(float e) { eps_ = e; return *this; }
  AdamOptions& weight_decay(float wd) { weight_decay_ = wd; return *this; }

  float lr_;
  float beta1_ = 0.9f;
  float beta2_ = 0.999f;
  float eps_ = 1e-8f;
  float weight_decay_ = 0.0f;
};

// AdamW's options differ from Adam's only in the default weight decay (PyTorch's 0.01): a separate type keeps
// AdamW(AdamWOptions(lr)) from silently training without decay.
struct AdamWOptions {
  explicit AdamWOptions(float learning_rate) : lr_(learning_rate) {}
  AdamWOptions& beta1(float b) { beta1_ = b; return *this; }
  AdamWOptions& beta2(float b) { beta2_ = b; return *this; }
  AdamWOptions& eps(float e) { eps_ = e; return *this; }
  AdamWOptions& weight_decay(float wd) { weight_decay_ = wd; return *this; }

  float lr_;
  float beta1_ = 0.9f;
  float beta2_ = 0.999f;
  float eps_ = 1e-8f;
  float weight_decay_ = 0.01f;
};

// State of the Adam family for one parameter.
struct MomentState {
  Tensor exp_avg;
  Tensor exp_avg_sq;
  std::int64_t steps = 0;
  double mu_product = 1.0;  // NAdam: product of the momentum schedule up to this step
};

// PyTorch's Adam: g += wd w (L2); m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
// w -= lr mhat / (sqrt(vhat) + eps) with mhat = m / (1 - beta1^t), vhat = v / (1 - beta2^t).
class Adam : public Optimizer {
 public:
  explicit Adam(AdamOptions options);
  void submit_update(Parameter& p, std::string_view name, int priority) override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::int64_t steps(const Parameter& p) const;
  [[nodiscard]] std::string name() const override { return decay_ == Decay::kL2 ? "adam" : "adamw"; }
  [[nodiscard]] ParamState state_of(Parameter& p) override;
  void restore_scalars(Parameter& p, const std::vector<std::pair<std::string, double>>& scalars) override;

 protected:
  enum class Decay { kL2, kDecoupled };
  Adam(const AdamOptions& options, Decay decay, const char* display_name);

 private:
  AdamOptions options_;
  Decay decay_;
  const char* display_name_;
  std::unordered_map<const Parameter*, MomentState> state_;
};

// PyTorch's AdamW: w -= lr wd w (decoupled from the gradient), then Adam's step without the L2 term.
class AdamW : public Adam {
 public:
  explicit AdamW(AdamWOptions options);
};

struct NadamOptions {
  explicit NadamOptions(float learning_rate) : lr_(learning_rate) {}
  NadamOptions& beta1(float b) { beta1_ = b; return *this; }
  NadamOptions& beta2(float b) { beta2_ = b; return *this; }
  NadamOptions& eps(float e) { eps_ = e; return *this; }
  NadamOptions& weight_decay(float wd) { weight_decay_ = wd; return *this; }
  NadamOptions& momentum_decay(float psi) { momentum_decay_ = psi; return *this; }

  float lr_;
  float beta1_ = 0.9f;
  float beta2_ = 0.999f;
  float eps_ = 1e-8f;
  float weight_decay_ = 0.0f;
  float momentum_decay_ = 0.004f;
};

// PyTorch's NAdam (Dozat 2016 with the momentum schedule mu_t = beta1 (1 - 0.5 * 0.96^(t psi)), psi the
// momentum decay): g += wd w; m, v as Adam;
// w -= lr [(1 - mu_t) / (1 - prod_{i<=t} mu_i) g + mu_{t+1} / (1 - prod_{i<=t+1} mu_i) m] / (sqrt(vhat) + eps).
// Chosen over PyDTNN's simplified form (a constant mu = beta1, no momentum schedule) to match PyTorch's results
// step for step.
class Nadam : public Optimizer {
 public:
  explicit Nadam(NadamOptions options);
  void submit_update(Parameter& p, std::string_view name, int priority) override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::int64_t steps(const Parameter& p) const;
  [[nodiscard]] std::string name() const override { return "nadam"; }
  [[nodiscard]] ParamState state_of(Parameter& p) override;
  void restore_scalars(Parameter& p, const std::vector<std::pair<std::string, double>>& scalars) override;

 private:
  NadamOptions options_;
  std::unordered_map<const Parameter*, MomentState> state_;
};

// Optimizer by name, as the command line gives it. Hyper-parameters left unset take the optimizer's default;
// one the named optimizer does not use is rejected rather than ignored.
struct OptimizerConfig {
  std::string name = "sgd";  // sgd, rmsprop, adam, adamw, nadam (any case)
  float learning_rate = 0.01f;
  std::optional<float> weight_decay;    // all
  std::optional<float> momentum;        // sgd, rmsprop
  std::optional<bool> nesterov;         // sgd
  std::optional<float> alpha;           // rmsprop
  std::optional<bool> centered;         // rmsprop
  std::optional<float> beta1;           // adam, adamw, nadam
  std::optional<float> beta2;           // adam, adamw, nadam
  std::optional<float> eps;             // rmsprop, adam, adamw, nadam
  std::optional<float> momentum_decay;  // nadam
};

// Throws InvalidArgument for an unknown name (listing the known ones), a hyper-parameter the optimizer does not
// take, or a value its constructor rejects.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config);
const std::vector<std::string>& optimizer_names();

// Weight-decay groups, as transformer recipes (GPT-2, BERT, nanoGPT's AdamW) leave some parameters undecayed:
// "bias" (the 1-D parameters of dense, convolution and attention layers), "norm" (LayerNorm and BatchNorm weights
// and biases), "embedding" (token embeddings and learned position tables). Exempts the parameters of `groups` from
// o's weight decay and returns their full names. InvalidArgument for another group name.
std::vector<std::string> exempt_from_weight_decay(Optimizer& o, Sequential& model,
                                                  const std::vector<std::string>& groups);
const std::vector<std::string>& weight_decay_groups();

}  // namespace dtnn
