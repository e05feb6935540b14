// SPDX-License-Identifier: Apache-2.0
// What the zoo's model files share (internal to the zoo): the classes option, and layers initialised the way the
// reference models initialise them where that differs from PyTorch's per-layer default.
#pragma once

#include <string_view>

#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "models/zoo.hpp"

namespace dtnn::models::detail {

// options.classes_, or `fallback` when it is 0; InvalidArgument naming the model when negative.
int classes_or(const ModelOptions& options, int fallback, std::string_view model);

// Which size normalises He initialisation: the inputs (PyTorch's default, preserves the forward signal) or the
// outputs (preserves the backward signal; torchvision's choice for VGG and ResNet).
enum class FanMode { kFanIn, kFanOut };

// Conv2d with He et al. 2015's initialisation for ReLU networks, as torch.nn.init.kaiming_normal_(weight,
// mode, nonlinearity="relu"): weight ~ N(0, 2 / fan), fan = in/groups * kh * kw or out * kh * kw; bias 0.
class KaimingConv2d : public Conv2d {
 public:
  KaimingConv2d(Conv2dOptions options, FanMode mode) : Conv2d(options), mode_(mode) {}
  void reset_parameters(Rng& rng) override;

 private:
  FanMode mode_;
};

// Dense with weight ~ N(0, stddev^2) and bias 0 (torchvision's VGG classifier: stddev 0.01).
class NormalDense : public Dense {
 public:
  NormalDense(DenseOptions options, float stddev) : Dense(options), stddev_(stddev) {}
  void reset_parameters(Rng& rng) override;

 private:
  float stddev_;
};

// Dense with PyTorch's default weight and bias 0 (torchvision's DenseNet classifier).
class ZeroBiasDense : public Dense {
 public:
  explicit ZeroBiasDense(DenseOptions options) : Dense(options) {}
  void reset_parameters(Rng& rng) override;
};

}  // namespace dtnn::models::detail
