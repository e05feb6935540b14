// SPDX-License-Identifier: Apache-2.0
// Model zoo: free functions returning an unbuilt model, and a registry by name.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "models/sequential.hpp"

namespace dtnn::models {

// 784-512-512-512-10 perceptron with ReLU (PyDTNN's simplemlp), for 1x28x28 inputs.
Sequential simplemlp();
// Two 3x3 convolutions (32 and 64 channels) each with ReLU and 2x2 max pooling, then Dense 128 + ReLU and
// Dense 10: the default CNN for (Fashion-)MNIST, 1x28x28 inputs.
Sequential simplecnn();

struct ModelInfo {
  std::string name;
  std::string description;
  Shape input;  // per sample, (C, H, W)
  int classes;
  std::function<Sequential()> make;
};

const std::vector<ModelInfo>& registry();
// Throws InvalidArgument listing the known names when `name` is not one of them.
const ModelInfo& find(std::string_view name);

}  // namespace dtnn::models
