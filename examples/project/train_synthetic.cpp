// SPDX-License-Identifier: Apache-2.0
// A program of one's own, built against an installed dtnn with find_package(dtnn) or pkg-config (CMakeLists.txt
// here; tests/install builds and runs it both ways). Its data are made in memory: noise with one bright 7x7 square
// at one of ten places, the place being the label. The zoo's simplecnn learns them in two epochs; the program
// prints the test accuracy and exits 1 below 90%.
#include <cstdint>
#include <cstdio>

#include <dtnn/dtnn.hpp>

// `count` images of the ten squares, from a seed: dtnn's synthetic dataset (noise, uniform labels), squares drawn in.
dtnn::io::Dataset squares(int count, std::uint64_t seed) {
  dtnn::io::Dataset data = dtnn::io::synthetic_dataset(count, 1, 28, 28, 10, seed);
  data.name = "squares";
  for (std::int64_t i = 0; i < data.size(); ++i) {
    float* image = data.images.data() + i * data.sample_elements();
    const int top = 7 * (data.labels[i] / 4), left = 7 * (data.labels[i] % 4);
    for (int r = 0; r < 7; ++r) {
      for (int c = 0; c < 7; ++c) image[(top + r) * 28 + left + c] = 1.0f;
    }
  }
  return data;
}

int main() {
  using namespace dtnn;
  runtime::Engine engine;  // StarPU with one CPU worker per core
  const io::Dataset train = squares(512, /*seed=*/1), test = squares(256, /*seed=*/2);

  Sequential model = models::simplecnn();
  model.build({1, 28, 28}, /*seed=*/42);
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  fit(model, sgd, train, FitOptions().epochs(2).batch_size(32).verbose(false));
  const EvalResult result = evaluate(model, test);

  std::printf("simplecnn (%lld parameters) trained on %lld images of squares: test accuracy %.2f%%\n",
              static_cast<long long>(model.parameter_count()), static_cast<long long>(train.size()),
              100.0 * result.accuracy);
  return result.accuracy >= 0.9 ? 0 : 1;
}
