// SPDX-License-Identifier: Apache-2.0
// A layer of one's own, with CPU codelets of its own: PyTorch's LeakyReLU, y = x > 0 ? x : slope * x, written as
// dtnn's layers are (docs/adding-a-layer.md walks a built-in one through every file): a kernel that knows nothing
// of StarPU, codelets that unpack a task's buffers for it, submit functions that name the tasks, and a Layer
// whose passes only submit, one task per batch tile. The program then checks the layer three ways and trains with
// it: its forward tasks against the formula, its slope-0 case bitwise against dtnn's ReLU over whole training
// steps (forward and backward), and a CNN that uses it on Fashion-MNIST. Exit status 1 when a check fails.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <dtnn/task_graph.hpp>

namespace example {

// The kernels: plain loops on host memory.
void leaky_relu_fwd(std::size_t count, float slope, const float* x, float* y) {
  for (std::size_t i = 0; i < count; ++i) y[i] = x[i] > 0.0f ? x[i] : slope * x[i];
}

void leaky_relu_bwd_data(std::size_t count, float slope, const float* x, const float* dy, float* dx) {
  for (std::size_t i = 0; i < count; ++i) dx[i] = x[i] > 0.0f ? dy[i] : slope * dy[i];
}

// The codelets: a task's argument bytes and buffers, unpacked for the kernels. runtime::guarded turns an exception
// into a failure that the engine raises on the submitting thread (code on worker threads never throws).
struct LeakyReluArgs {
  std::size_t count;
  float slope;
};

void fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = dtnn::runtime::task_args<LeakyReluArgs>(cl_arg);
  leaky_relu_fwd(a.count, a.slope, dtnn::runtime::vector_ptr(buffers[0]), dtnn::runtime::vector_ptr(buffers[1]));
}

void bwd_data_cpu(void** buffers, void* cl_arg) {
  const auto& a = dtnn::runtime::task_args<LeakyReluArgs>(cl_arg);
  leaky_relu_bwd_data(a.count, a.slope, dtnn::runtime::vector_ptr(buffers[0]), dtnn::runtime::vector_ptr(buffers[1]),
                      dtnn::runtime::vector_ptr(buffers[2]));
}

// Each codelet has a history-based performance model named after it; no CUDA body: its tasks run on CPU workers.
dtnn::runtime::Codelet cl_fwd("example_leaky_relu_fwd", dtnn::runtime::guarded<fwd_cpu>, {STARPU_R, STARPU_W});
dtnn::runtime::Codelet cl_bwd_data("example_leaky_relu_bwd_data", dtnn::runtime::guarded<bwd_data_cpu>,
                                   {STARPU_R, STARPU_R, STARPU_W});

// The submit functions: one task on one batch tile, named "<layer>:<pass>" in traces, with its flop count.
void submit_fwd(const dtnn::codelets::TaskTag& tag, float slope, const dtnn::Tensor& x, dtnn::Tensor& y, int tile) {
  using dtnn::codelets::rd, dtnn::codelets::wr;
  const LeakyReluArgs a{static_cast<std::size_t>(x.tile_range(tile).count * x.row_elements()), slope};
  std::string name;
  dtnn::runtime::submit_task(cl_fwd, dtnn::codelets::task_info(tag, "fwd", tile, static_cast<double>(a.count), name),
                             {rd(x.tile(tile)), wr(y.tile(tile))}, a);
}

void submit_bwd_data(const dtnn::codelets::TaskTag& tag, float slope, const dtnn::Tensor& x, const dtnn::Tensor& dy,
                     dtnn::Tensor& dx, int tile) {
  using dtnn::codelets::rd, dtnn::codelets::wr;
  const LeakyReluArgs a{static_cast<std::size_t>(x.tile_range(tile).count * x.row_elements()), slope};
  std::string name;
  dtnn::runtime::submit_task(cl_bwd_data,
                             dtnn::codelets::task_info(tag, "bwd_data", tile, static_cast<double>(a.count), name),
                             {rd(x.tile(tile)), rd(dy.tile(tile)), wr(dx.tile(tile))}, a);
}

// The layer: options checked at construction, shapes at build, passes that submit.
struct LeakyReLUOptions {
  LeakyReLUOptions& negative_slope(float s) { slope_ = s; return *this; }
  float slope_ = 0.01f;  // PyTorch's default
};

class LeakyReLU : public dtnn::Layer {
 public:
  explicit LeakyReLU(LeakyReLUOptions options = {}) : options_(options) {
    if (!std::isfinite(options_.slope_)) {
      throw dtnn::InvalidArgument(fmt::format("LeakyReLU: negative_slope={}, expected a finite value", options_.slope_));
    }
  }
  [[nodiscard]] std::string type() const override { return "LeakyReLU"; }
  [[nodiscard]] std::string describe() const override { return fmt::format("slope {}", options_.slope_); }
  dtnn::Shape build(const dtnn::Shape& sample_input) override { return record_shapes(sample_input, sample_input); }
  void forward(const dtnn::Tensor& x, dtnn::Tensor& y, const dtnn::PassContext& ctx) override {
    for (int t = 0; t < x.tiles(); ++t) submit_fwd({name(), ctx.priority}, options_.slope_, x, y, t);
  }
  // dx is null for a model's first layer. The data gradient runs at the priority dtnn gives data gradients.
  void backward(const dtnn::Tensor& x, const dtnn::Tensor& y, const dtnn::Tensor& dy, dtnn::Tensor* dx,
                const dtnn::PassContext& ctx) override {
    if (dx == nullptr) return;
    for (int t = 0; t < dy.tiles(); ++t) submit_bwd_data({name(), ctx.priority + 1}, options_.slope_, x, dy, *dx, t);
  }

 private:
  LeakyReLUOptions options_;
};

// A small CNN whose activation is `Activation`.
template <class Activation, class... Args>
dtnn::Sequential cnn(Args... activation_args) {
  using namespace dtnn;
  Sequential model;
  model.add<Conv2d>(Conv2dOptions(1, 8, 3).padding(1));
  model.add<Activation>(activation_args...);
  model.add<MaxPool2d>(MaxPool2dOptions(2)).add<Flatten>().add<Dense>(DenseOptions(8 * 14 * 14, 10));
  model.build({1, 28, 28}, /*seed=*/7);
  return model;
}

std::uint64_t train_steps(dtnn::Sequential& model, const dtnn::io::Dataset& data, int steps) {
  dtnn::Sgd sgd(dtnn::SgdOptions(0.05f).momentum(0.9f));
  dtnn::fit(model, sgd, data, dtnn::FitOptions().batch_size(64).tiles(2).steps_per_epoch(steps).verbose(false));
  return model.weights_checksum();
}

}  // namespace example

int main() {
  using namespace dtnn;
  runtime::Engine engine;
  int failures = 0;

  // 1. The forward tasks against the formula: a model of the layer alone, its raw outputs.
  io::Dataset values = io::synthetic_dataset(64, 1, 1, 10, 10, 3);
  for (float& v : values.images) v = 2.0f * v - 1.0f;  // both signs
  Sequential alone;
  alone.add<example::LeakyReLU>(example::LeakyReLUOptions().negative_slope(0.1f)).add<Flatten>();  // 10 outputs
  alone.build({1, 1, 10}, 0);
  const std::vector<float> y = predict(alone, values, EvalOptions().logits(true).tiles(3));
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const float x = values.images[i];
    wrong += y[i] != (x > 0.0f ? x : 0.1f * x) ? 1 : 0;
  }
  fmt::print("forward: {} of {} outputs differ from the formula\n", wrong, y.size());
  failures += wrong != 0 ? 1 : 0;

  // 2. Forward and backward: with slope 0 the layer is a ReLU, so 20 training steps must give dtnn's ReLU's weights
  //    bit for bit.
  const io::TrainTest data = io::load_mnist_like(io::default_fashion_mnist_dir(), "fashion-mnist");
  const io::Dataset train = data.train.stratified_subset(6000, 1);
  Sequential with_relu = example::cnn<ReLU>();
  Sequential with_leaky = example::cnn<example::LeakyReLU>(example::LeakyReLUOptions().negative_slope(0.0f));
  const std::uint64_t relu = example::train_steps(with_relu, train, 20);
  const std::uint64_t leaky = example::train_steps(with_leaky, train, 20);
  fmt::print("20 steps: weights checksum {:016x} with ReLU, {:016x} with LeakyReLU(0)\n", relu, leaky);
  failures += relu != leaky ? 1 : 0;

  // 3. A CNN with LeakyReLU(0.01), one epoch of the subset, tested on 2000 test images.
  Sequential model = example::cnn<example::LeakyReLU>();
  fmt::print("{}", model.summary());
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  fit(model, sgd, train, FitOptions().epochs(1).batch_size(64).tiles(2).verbose(false));
  const EvalResult test = evaluate(model, data.test.stratified_subset(2000, 2));
  fmt::print("test accuracy {:.2f}%\n", 100.0 * test.accuracy);
  if (failures != 0) std::fprintf(stderr, "custom_layer: %d check(s) failed\n", failures);
  return failures == 0 ? 0 : 1;
}
