// SPDX-License-Identifier: Apache-2.0
// One numerical gradient checker for every layer: compares the gradients that the layer's backward tasks
// compute with central differences of L = sum(y * R) for a fixed random R.
#pragma once

#include <cstdint>

#include "layers/layer.hpp"

namespace dtnn::testing {

struct GradCheckOptions {
  std::int64_t batch = 3;
  int tiles = 2;
  float eps = 1e-3f;
  double atol = 2e-3;  // |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 2e-2;
  int probes = 24;     // coordinates checked per tensor (all of them when the tensor is smaller)
  std::uint64_t seed = 7;
};

// Builds the layer for sample_input, then checks the input gradient and every parameter gradient with
// gtest expectations naming the tensor and coordinate.
void check_layer_gradients(Layer& layer, const Shape& sample_input, const GradCheckOptions& options = {});

}  // namespace dtnn::testing
