// SPDX-License-Identifier: Apache-2.0
// The interface of the optimizers (models/optimizers.hpp holds them): one update task per parameter, submitted
// right after that parameter's gradient is summed, and the per-parameter state a checkpoint saves.
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "layers/layer.hpp"

namespace dtnn {

// The state an optimizer keeps for one parameter, as a checkpoint stores it: tensors under PyTorch's names
// (momentum_buffer, exp_avg, exp_avg_sq, square_avg, ...) and scalars (step, mu_product).
struct ParamState {
  std::vector<std::pair<std::string, Tensor*>> tensors;
  std::vector<std::pair<std::string, double>> scalars;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // name: the parameter's dotted name, for task names and traces.
  virtual void submit_update(Parameter& p, std::string_view name, int priority) = 0;
  [[nodiscard]] float learning_rate() const { return lr_; }
  void set_learning_rate(float lr) { lr_ = lr; }
  [[nodiscard]] virtual std::string describe() const = 0;
  // "sgd", "rmsprop", "adam", "adamw", "nadam".
  [[nodiscard]] virtual std::string name() const = 0;
  // The parameter's state, its tensors created (zero) when missing so that a resumed run can load into them.
  [[nodiscard]] virtual ParamState state_of(Parameter& p) = 0;
  // Restores the scalars that state_of reported (unknown names are ignored: InvalidArgument is the caller's).
  virtual void restore_scalars(Parameter& p, const std::vector<std::pair<std::string, double>>& scalars) {}

  // Leaves p out of the weight decay: PyTorch's second parameter group, {"params": ..., "weight_decay": 0}, for the
  // biases, norms and embeddings of a transformer (models/optimizers.hpp exempt_from_weight_decay picks them).
  void exempt_from_weight_decay(const Parameter& p) { no_decay_.insert(&p); }
  [[nodiscard]] bool decays(const Parameter& p) const { return !no_decay_.contains(&p); }
  [[nodiscard]] std::size_t exempt_count() const { return no_decay_.size(); }

 protected:
  explicit Optimizer(float lr) : lr_(lr) {}
  // The weight decay of p: wd, or 0 for an exempt parameter.
  [[nodiscard]] float decay_of(const Parameter& p, float wd) const { return decays(p) ? wd : 0.0f; }
  float lr_;

 private:
  std::unordered_set<const Parameter*> no_decay_;
};

}  // namespace dtnn
