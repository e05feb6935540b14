// SPDX-License-Identifier: Apache-2.0
// The README's API example: build a CNN, train it on Fashion-MNIST, evaluate it.
#include <cstdio>

#include <dtnn/dtnn.hpp>

int main() {
  using namespace dtnn;
  runtime::Engine engine;  // StarPU with one CPU worker per core and the lws scheduler
  auto data = io::load_mnist_like(io::default_fashion_mnist_dir(), "fashion-mnist");

  Sequential model;
  model.add<Conv2d>(Conv2dOptions(1, 16, 5).padding(2))
      .add<ReLU>()
      .add<MaxPool2d>(MaxPool2dOptions(2))
      .add<Flatten>()
      .add<Dense>(DenseOptions(16 * 14 * 14, 10));
  model.build({1, 28, 28}, /*seed=*/42);

  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  fit(model, sgd, data.train, FitOptions().epochs(1).batch_size(64).tiles(2));
  const EvalResult test = evaluate(model, data.test);
  std::printf("test accuracy %.2f%%\n", 100.0 * test.accuracy);
}
