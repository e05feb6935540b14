// SPDX-License-Identifier: Apache-2.0
// Whole training steps on the GPU against the same steps on the CPU: every layer kind of the zoo's models
// (convolution, BatchNorm, ReLU, residual Add, shortcut padding, max/avg/global pooling, dense, softmax loss,
// SGD with momentum), several tiles, two steps in flight.
//
// Two steps, not more: at batch 8 these networks are chaotic from the third step on. On the CPU alone, the same
// training with another summation order (1 tile with convgemm against 4 tiles with im2col) differs by at most
// 5e-6 of a tensor's magnitude after two steps, but by 6e-2 (resnet18_cifar10) and 7e-3 (resnet20_cifar10) after
// three (Zen 5, 2026-12-04): past two steps a comparison measures the amplification, not the GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "cuda_test_util.hpp"
#include "io/dataset.hpp"
#include "models/optimizers.hpp"
#include "models/training.hpp"
#include "models/zoo.hpp"

namespace dtnn {
namespace {

struct Trained {
  std::map<std::string, std::vector<float>> values;  // parameters and buffers by name
  double loss = 0.0;
};

Trained train(const std::string& model_name, runtime::Device device, int steps) {
  const models::ModelInfo& info = models::find(model_name);
  const io::Dataset data = io::synthetic_dataset(8 * steps, static_cast<int>(info.input[0]),
                                                 static_cast<int>(info.input[1]), static_cast<int>(info.input[2]),
                                                 info.classes, 21);
  Sequential model = info.make();
  model.build(info.input, 7);
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  History h;
  runtime::Tracer::start();
  {
    testing_cuda::OnDevice on(device);
    h = fit(model, sgd, data, FitOptions().batch_size(8).tiles(2).shuffle(false).steps_per_epoch(steps).verbose(false));
  }
  runtime::Engine::current()->wait_all();
  runtime::Tracer::stop();
  // Every task ran where asked, except loading a batch (gather_batch), which has no CUDA body.
  const starpu_worker_archtype want = device == runtime::Device::kCuda ? STARPU_CUDA_WORKER : STARPU_CPU_WORKER;
  int on_device = 0;
  for (const runtime::TraceEvent& e : runtime::Tracer::events()) {
    const bool right = e.worker >= 0 && starpu_worker_get_type(e.worker) == want;
    on_device += right ? 1 : 0;
    EXPECT_TRUE(right || e.codelet == "gather_batch")
        << model_name << ": " << e.name << " (codelet " << e.codelet << ") ran on worker " << e.worker
        << ", expected a " << testing_cuda::worker_kind(device) << " worker";
  }
  EXPECT_GT(on_device, 0) << model_name << ": no task ran on a " << testing_cuda::worker_kind(device) << " worker";
  Trained t;
  t.loss = h.epochs.back().loss;
  for (const auto& np : model.named_parameters()) t.values[np.name] = np.parameter->value.to_vector();
  for (const auto& nb : model.named_buffers()) t.values[nb.name] = nb.buffer->value.to_vector();
  return t;
}

class CudaTrainingStepTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaTrainingStepTest, EqualsTheCpuStepWithinTolerance) {
  DTNN_REQUIRE_CUDA();
  const std::string name = GetParam();
  const Trained cpu = train(name, runtime::Device::kCpu, 2);
  const Trained gpu = train(name, runtime::Device::kCuda, 2);
  EXPECT_NEAR(cpu.loss, gpu.loss, 1e-4 * std::max(1.0, std::abs(cpu.loss))) << name;
  ASSERT_EQ(cpu.values.size(), gpu.values.size());
  for (const auto& [key, want] : cpu.values) {
    const std::vector<float>& got = gpu.values.at(key);
    // Two steps of fp32 arithmetic in other orders (cuDNN's algorithms, reductions): 1e-4 of the tensor's
    // largest magnitude.
    double scale = 1e-3;
    for (float v : want) scale = std::max(scale, static_cast<double>(std::abs(v)));
    EXPECT_TRUE(testing_cuda::all_close(want, got, 0.0, 1e-4 * scale)) << name << ": " << key;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaTrainingStepTest,
                         ::testing::Values("simplecnn", "lenet5", "resnet20_cifar10", "vgg11bn_cifar10"));

}  // namespace
}  // namespace dtnn
