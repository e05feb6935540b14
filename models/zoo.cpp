// SPDX-License-Identifier: Apache-2.0
#include "models/zoo.hpp"

#include <fmt/format.h>

#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/simple.hpp"
#include "runtime/errors.hpp"

namespace dtnn::models {

Sequential simplemlp() {
  Sequential m;
  m.add<Flatten>()
      .add<Dense>(DenseOptions(784, 512))
      .add<ReLU>()
      .add<Dense>(DenseOptions(512, 512))
      .add<ReLU>()
      .add<Dense>(DenseOptions(512, 512))
      .add<ReLU>()
      .add<Dense>(DenseOptions(512, 10));
  return m;
}

Sequential simplecnn() {
  Sequential m;
  m.add<Conv2d>(Conv2dOptions(1, 32, 3).padding(1))
      .add<ReLU>()
      .add<MaxPool2d>(MaxPool2dOptions(2))
      .add<Conv2d>(Conv2dOptions(32, 64, 3).padding(1))
      .add<ReLU>()
      .add<MaxPool2d>(MaxPool2dOptions(2))
      .add<Flatten>()
      .add<Dense>(DenseOptions(64 * 7 * 7, 128))
      .add<ReLU>()
      .add<Dense>(DenseOptions(128, 10));
  return m;
}

const std::vector<ModelInfo>& registry() {
  static const std::vector<ModelInfo> models = {
      {"simplecnn", "2 x (conv3x3 + ReLU + maxpool) + dense 128 + dense 10", {1, 28, 28}, 10, simplecnn},
      {"simplemlp", "784-512-512-512-10 perceptron", {1, 28, 28}, 10, simplemlp},
  };
  return models;
}

const ModelInfo& find(std::string_view name) {
  std::string known;
  for (const auto& m : registry()) {
    if (m.name == name) {
      return m;
    }
    known += known.empty() ? m.name : ", " + m.name;
  }
  throw InvalidArgument(fmt::format("--model: unknown model '{}', expected one of {}", name, known));
}

}  // namespace dtnn::models
