// SPDX-License-Identifier: Apache-2.0
// Where a step's values stop being finite: one training step's forward and backward passes run with every
// activation and gradient kept (no update), then read on the host, layer by layer. For a run whose loss became NaN
// or infinite (NonFiniteLoss), on the weights before that step (a replay: app/nonfinite.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "io/dataset.hpp"
#include "models/sequential.hpp"
#include "models/training.hpp"

namespace dtnn {

struct NonFiniteSite {
  std::string layer;      // the top-level layer's name ("3", "layer2.1"); empty when everything is finite
  std::string type;       // its type ("Conv2d", "Block")
  bool gradient = false;  // false: its output in the forward pass; true: the gradient of its input (backward)
  std::string value;      // the first value that is not finite ("nan", "inf", "-inf")

  [[nodiscard]] bool found() const { return !layer.empty(); }
  // "layer 3 (Conv2d): output holds nan", or "every output and gradient is finite".
  [[nodiscard]] std::string describe() const;
};

// Submits global step `step` (of epoch `epoch`) of `options` on `rows` of `data` -- its forward and backward passes,
// the loss included, without the optimizer's update --, waits, and returns the first top-level layer whose output is
// not finite, else the first in backward order whose input gradient is not finite (a layer and the ReLU fused into it
// count as one: the pair's output is the ReLU's). The model's parameters are left unchanged.
NonFiniteSite first_nonfinite(Sequential& model, const io::Dataset& data, std::span<const std::int64_t> rows,
                              std::int64_t step, std::int64_t epoch, const FitOptions& options);

}  // namespace dtnn
