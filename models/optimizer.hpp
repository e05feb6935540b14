// SPDX-License-Identifier: Apache-2.0
// Optimizers submit one update task per parameter, right after that parameter's gradient is summed.
#pragma once

#include <string_view>
#include <unordered_map>

#include "codelets/cpu/kernels.hpp"
#include "layers/layer.hpp"

namespace dtnn {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // name: the parameter's dotted name, for task names and traces.
  virtual void submit_update(Parameter& p, std::string_view name, int priority) = 0;
  [[nodiscard]] float learning_rate() const { return lr_; }
  void set_learning_rate(float lr) { lr_ = lr; }
  [[nodiscard]] virtual std::string describe() const = 0;

 protected:
  explicit Optimizer(float lr) : lr_(lr) {}
  float lr_;
};

struct SgdOptions {
  explicit SgdOptions(float learning_rate) : lr_(learning_rate) {}
  SgdOptions& momentum(float m) { momentum_ = m; return *this; }
  SgdOptions& weight_decay(float wd) { weight_decay_ = wd; return *this; }
  SgdOptions& nesterov(int on) { nesterov_ = on; return *this; }

  float lr_;
  float momentum_ = 0.0f;
  float weight_decay_ = 0.0f;
  int nesterov_ = 0;
};

// PyTorch's SGD: v = momentum * v + (g + wd * w); w -= lr * v (or lr * (g' + momentum * v) with Nesterov).
class Sgd : public Optimizer {
 public:
  explicit Sgd(SgdOptions options);
  void submit_update(Parameter& p, std::string_view name, int priority) override;
  [[nodiscard]] std::string describe() const override;

 private:
  SgdOptions options_;
  std::unordered_map<const Parameter*, Tensor> velocity_;
};

}  // namespace dtnn
