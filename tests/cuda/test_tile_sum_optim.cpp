// SPDX-License-Identifier: Apache-2.0
// Gradient tile sums and optimizer updates: CUDA against CPU. The tile sums are pure fp32 additions in a fixed
// order, so they must match bit for bit. The updates use the same separately rounded operations as the CPU
// kernels; they match bit for bit wherever the CPU compiler cannot fuse a multiply and an add either.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "codelets/cpu/kernels.hpp"
#include "codelets/optimizers.hpp"
#include "codelets/sgd.hpp"
#include "codelets/tile_sum.hpp"
#include "cuda_test_util.hpp"
#ifdef DTNN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "codelets/cuda/optimizers.hpp"
#endif

namespace dtnn {
namespace {

using testing_cuda::random_tensor;
using testing_cuda::random_values;

// The CPU kernels are built without -march: on x86-64 the compiler then has no FMA instruction and every
// multiply and add is rounded on its own, as the CUDA kernels do. Where it may fuse (-mfma, aarch64), the
// results differ by a few ulps of the weights (|w| <= ~1 here) after a few steps.
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__FMA__)
constexpr double kUpdateRtol = 0.0;
constexpr double kUpdateAtol = 0.0;
#else
constexpr double kUpdateRtol = 1e-6;
constexpr double kUpdateAtol = 1e-6;
#endif

// Equal bit patterns, any NaN matching any NaN (the CPU keeps an input NaN's payload, the GPU writes its
// canonical NaN). Stricter than a zero tolerance: -0 and +0 differ.
::testing::AssertionResult same_bits(const std::vector<float>& cpu, const std::vector<float>& gpu) {
  if (cpu.size() != gpu.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << cpu.size() << " vs " << gpu.size();
  }
  std::size_t mismatches = 0, first = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    if (std::isnan(cpu[i]) && std::isnan(gpu[i])) continue;
    std::uint32_t a = 0, b = 0;
    std::memcpy(&a, &cpu[i], sizeof(a));
    std::memcpy(&b, &gpu[i], sizeof(b));
    if (a != b && mismatches++ == 0) first = i;
  }
  if (mismatches > 0) {
    return ::testing::AssertionFailure() << mismatches << " of " << cpu.size() << " elements differ, first " << first
                                         << ": cpu " << cpu[first] << ", cuda " << gpu[first];
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult matches(const std::vector<float>& cpu, const std::vector<float>& gpu, double rtol,
                                   double atol) {
  return rtol == 0.0 && atol == 0.0 ? same_bits(cpu, gpu) : testing_cuda::all_close(cpu, gpu, rtol, atol);
}

// As testing_cuda::compare_cpu_cuda, with a bitwise comparison at zero tolerance. Every output is poisoned on the
// GPU, then reset on the host to its value before the CPU run (read here), before the CUDA run: a read-write
// output starts from that value, a write-only one from the poison.
void compare_runs(const std::function<void()>& submit, const std::vector<std::pair<const char*, Tensor*>>& outputs,
                  double rtol, double atol) {
  std::vector<std::vector<float>> before, cpu;
  for (const auto& [name, t] : outputs) before.push_back(t->to_vector());
  testing_cuda::run_on(runtime::Device::kCpu, submit);
  std::vector<Tensor*> tensors;
  for (const auto& [name, t] : outputs) {
    cpu.push_back(t->to_vector());
    tensors.push_back(t);
  }
  testing_cuda::poison_on_device(tensors);
  for (std::size_t i = 0; i < outputs.size(); ++i) outputs[i].second->copy_from(before[i]);
  testing_cuda::run_on(runtime::Device::kCuda, submit);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    EXPECT_TRUE(matches(cpu[i], outputs[i].second->to_vector(), rtol, atol)) << outputs[i].first;
  }
}

// Partials whose tiles differ in magnitude by powers of ten, so that summing them in another order would
// round differently; element 0 is -0 in every tile (the sum must stay -0) and element 1 holds an infinity.
Tensor partials_tensor(int tiles, std::int64_t row, std::uint32_t seed) {
  Tensor t({tiles, row}, tiles);
  std::vector<float> v = random_values(t.numel(), seed);
  for (int k = 0; k < tiles; ++k) {
    const float scale = std::pow(10.0f, static_cast<float>(k % 5 - 2));
    for (std::int64_t i = 0; i < row; ++i) v[static_cast<std::size_t>(k * row + i)] *= scale;
    v[static_cast<std::size_t>(k * row)] = -0.0f;
  }
  v[1] = INFINITY;
  t.copy_from(v);
  return t;
}

// used = 1..7: one task that overwrites; 8..14: a second task that accumulates 1..7 more; 15: a third one.
TEST(CudaTileSumTest, EveryTileCountMatchesCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  constexpr int kTiles = 15;
  const Tensor partials = partials_tensor(kTiles, 3 * 37 * 11, 11);
  for (int used = 1; used <= kTiles; ++used) {
    SCOPED_TRACE("used " + std::to_string(used));
    Tensor total({3, 37, 11});
    compare_runs([&] { codelets::submit_tile_sum({"w"}, partials, used, total); }, {{"total", &total}}, 0.0, 0.0);
  }
}

// Many blocks per launch and a grid that does not divide the count.
TEST(CudaTileSumTest, LargeGradientMatchesCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  const Tensor partials = partials_tensor(9, 300001, 12);
  Tensor total({300001});
  compare_runs([&] { codelets::submit_tile_sum({"w"}, partials, 9, total); }, {{"total", &total}}, 0.0, 0.0);
}

// Each tile past one grid: the kernel's grid-stride loop takes a second pass.
TEST(CudaTileSumTest, GradientPastOneGridMatchesCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  const Tensor partials = partials_tensor(3, testing_cuda::kPastOneGrid, 13);
  Tensor total({testing_cuda::kPastOneGrid});
  compare_runs([&] { codelets::submit_tile_sum({"w"}, partials, 3, total); }, {{"total", &total}}, 0.0, 0.0);
}

// Parameters of an odd size (not a multiple of the block size), updated over several steps with a new
// gradient each step, so that the state tensors carry from one step to the next.
constexpr int kSteps = 4;
const Shape kParamShape{7, 5, 13, 3};

std::vector<Tensor> step_gradients(std::uint32_t seed) {
  std::vector<Tensor> g;
  for (int t = 0; t < kSteps; ++t) g.push_back(random_tensor(kParamShape, 1, seed + static_cast<std::uint32_t>(t)));
  return g;
}

TEST(CudaSgdTest, UpdatesMatchCpu) {
  DTNN_REQUIRE_CUDA();
  const std::vector<SgdParams> variants{
      {0.1f, 0.0f, 0.0f, 0}, {0.05f, 0.9f, 1e-3f, 0}, {0.05f, 0.9f, 1e-3f, 1}, {0.2f, 0.5f, 0.0f, 1}};
  for (std::size_t k = 0; k < variants.size(); ++k) {
    const SgdParams& p = variants[k];
    SCOPED_TRACE("momentum " + std::to_string(p.momentum) + " weight_decay " + std::to_string(p.weight_decay) +
                 " nesterov " + std::to_string(p.nesterov));
    const auto seed = static_cast<std::uint32_t>(100 * k);
    Tensor w = random_tensor(kParamShape, 1, seed + 1);
    Tensor v = random_tensor(kParamShape, 1, seed + 2, -0.1f, 0.1f);
    const std::vector<Tensor> g = step_gradients(seed + 10);
    compare_runs(
        [&] {
          for (int t = 0; t < kSteps; ++t) codelets::submit_sgd_update({"w"}, p, w, g[static_cast<std::size_t>(t)], v);
        },
        {{"weights", &w}, {"velocity", &v}}, kUpdateRtol, kUpdateAtol);
  }
}

// One parameter past one grid, two steps of SGD with Nesterov momentum and of Adam.
TEST(CudaSgdTest, ParameterPastOneGridMatchesCpu) {
  DTNN_REQUIRE_CUDA();
  const Shape shape{testing_cuda::kPastOneGrid};
  const SgdParams p{0.05f, 0.9f, 1e-3f, 1};
  Tensor w = random_tensor(shape, 1, 501);
  Tensor v = random_tensor(shape, 1, 502, -0.1f, 0.1f);
  const Tensor g0 = random_tensor(shape, 1, 503), g1 = random_tensor(shape, 1, 504);
  compare_runs(
      [&] {
        codelets::submit_sgd_update({"w"}, p, w, g0, v);
        codelets::submit_sgd_update({"w"}, p, w, g1, v);
      },
      {{"weights", &w}, {"velocity", &v}}, kUpdateRtol, kUpdateAtol);
}

TEST(CudaRmspropTest, EveryVariantMatchesCpu) {
  DTNN_REQUIRE_CUDA();
  for (int centered = 0; centered <= 1; ++centered) {
    for (float momentum : {0.0f, 0.9f}) {
      SCOPED_TRACE("centered " + std::to_string(centered) + " momentum " + std::to_string(momentum));
      const RmspropParams p{0.01f, 0.99f, 1e-8f, 1e-2f, momentum, centered};
      const auto seed = static_cast<std::uint32_t>(1000 + 100 * centered + (momentum != 0.0f ? 50 : 0));
      Tensor w = random_tensor(kParamShape, 1, seed + 1);
      // Square averages below the squared gradient averages, so that the centered variance is clamped at 0
      // in some elements and positive in others.
      Tensor sq = random_tensor(kParamShape, 1, seed + 2, 0.0f, 1e-2f);
      Tensor buf = random_tensor(kParamShape, 1, seed + 3, -0.1f, 0.1f);
      Tensor ga = random_tensor(kParamShape, 1, seed + 4, -0.1f, 0.1f);
      const std::vector<Tensor> g = step_gradients(seed + 10);
      Tensor* momentum_buf = momentum != 0.0f ? &buf : nullptr;
      Tensor* grad_avg = centered != 0 ? &ga : nullptr;
      std::vector<std::pair<const char*, Tensor*>> outputs{{"weights", &w}, {"square_avg", &sq}};
      if (momentum_buf != nullptr) outputs.emplace_back("momentum_buffer", momentum_buf);
      if (grad_avg != nullptr) outputs.emplace_back("grad_avg", grad_avg);
      compare_runs(
          [&] {
            for (int t = 0; t < kSteps; ++t) {
              codelets::submit_rmsprop_update({"w"}, p, w, g[static_cast<std::size_t>(t)], sq, momentum_buf,
                                              grad_avg);
            }
          },
          outputs, kUpdateRtol, kUpdateAtol);
    }
  }
}

// The per-step scalars as models/optimizers.cpp works them out (in double, rounded once to float).
double bias_correction(double beta, std::int64_t t) { return 1.0 - std::pow(beta, static_cast<double>(t)); }

AdamParams adam_params(double lr, double wd, int decoupled, std::int64_t t) {
  AdamParams p;
  p.step_size = static_cast<float>(lr / bias_correction(p.beta1, t));
  p.inv_sqrt_bias_correction2 = static_cast<float>(1.0 / std::sqrt(bias_correction(p.beta2, t)));
  p.eps = 1e-8f;
  p.weight_decay = decoupled != 0 ? 0.0f : static_cast<float>(wd);
  p.decay_factor = decoupled != 0 ? static_cast<float>(1.0 - lr * wd) : 1.0f;
  return p;
}

TEST(CudaAdamTest, AdamAndAdamWMatchCpu) {
  DTNN_REQUIRE_CUDA();
  for (int decoupled = 0; decoupled <= 1; ++decoupled) {
    SCOPED_TRACE(decoupled != 0 ? "AdamW" : "Adam");
    const auto seed = static_cast<std::uint32_t>(2000 + 100 * decoupled);
    Tensor w = random_tensor(kParamShape, 1, seed + 1);
    Tensor m = random_tensor(kParamShape, 1, seed + 2, -0.1f, 0.1f);
    Tensor v = random_tensor(kParamShape, 1, seed + 3, 0.0f, 1e-2f);
    const std::vector<Tensor> g = step_gradients(seed + 10);
    std::vector<AdamParams> params;
    for (int t = 1; t <= kSteps; ++t) params.push_back(adam_params(1e-3, 1e-2, decoupled, t));
    compare_runs(
        [&] {
          for (int t = 0; t < kSteps; ++t) {
            const auto i = static_cast<std::size_t>(t);
            codelets::submit_adam_update({"w"}, params[i], w, g[i], m, v);
          }
        },
        {{"weights", &w}, {"exp_avg", &m}, {"exp_avg_sq", &v}}, kUpdateRtol, kUpdateAtol);
  }
}

TEST(CudaAdamTest, ParameterPastOneGridMatchesCpu) {
  DTNN_REQUIRE_CUDA();
  const Shape shape{testing_cuda::kPastOneGrid};
  Tensor w = random_tensor(shape, 1, 2501);
  Tensor m = random_tensor(shape, 1, 2502, -0.1f, 0.1f);
  Tensor v = random_tensor(shape, 1, 2503, 0.0f, 1e-2f);
  const Tensor g0 = random_tensor(shape, 1, 2504), g1 = random_tensor(shape, 1, 2505);
  const AdamParams p1 = adam_params(1e-3, 1e-2, 1, 1), p2 = adam_params(1e-3, 1e-2, 1, 2);
  compare_runs(
      [&] {
        codelets::submit_adam_update({"w"}, p1, w, g0, m, v);
        codelets::submit_adam_update({"w"}, p2, w, g1, m, v);
      },
      {{"weights", &w}, {"exp_avg", &m}, {"exp_avg_sq", &v}}, kUpdateRtol, kUpdateAtol);
}

TEST(CudaNadamTest, UpdatesMatchCpu) {
  DTNN_REQUIRE_CUDA();
  const double lr = 2e-3, beta1 = 0.9, beta2 = 0.999, psi = 4e-3;
  std::vector<NadamParams> params;
  double mu_product = 1.0;
  for (std::int64_t t = 1; t <= kSteps; ++t) {
    const double mu = beta1 * (1.0 - 0.5 * std::pow(0.96, static_cast<double>(t) * psi));
    const double mu_next = beta1 * (1.0 - 0.5 * std::pow(0.96, static_cast<double>(t + 1) * psi));
    mu_product *= mu;
    NadamParams p;
    p.grad_coef = static_cast<float>(lr * (1.0 - mu) / (1.0 - mu_product));
    p.momentum_coef = static_cast<float>(lr * mu_next / (1.0 - mu_product * mu_next));
    p.inv_sqrt_bias_correction2 = static_cast<float>(1.0 / std::sqrt(bias_correction(beta2, t)));
    p.beta1 = static_cast<float>(beta1);
    p.beta2 = static_cast<float>(beta2);
    p.eps = 1e-8f;
    p.weight_decay = 1e-2f;
    params.push_back(p);
  }
  Tensor w = random_tensor(kParamShape, 1, 3001);
  Tensor m = random_tensor(kParamShape, 1, 3002, -0.1f, 0.1f);
  Tensor v = random_tensor(kParamShape, 1, 3003, 0.0f, 1e-2f);
  const std::vector<Tensor> g = step_gradients(3010);
  compare_runs(
      [&] {
        for (int t = 0; t < kSteps; ++t) {
          const auto i = static_cast<std::size_t>(t);
          codelets::submit_nadam_update({"w"}, params[i], w, g[i], m, v);
        }
      },
      {{"weights", &w}, {"exp_avg", &m}, {"exp_avg_sq", &v}}, kUpdateRtol, kUpdateAtol);
}

#ifdef DTNN_HAVE_CUDA
// SGD without a velocity buffer (no codelet passes one: the model always keeps a velocity), called directly
// on device buffers against the CPU kernel.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<float>& host) : count_(host.size()) {
    EXPECT_EQ(cudaMalloc(&ptr_, bytes()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  [[nodiscard]] float* get() const { return static_cast<float*>(ptr_); }
  [[nodiscard]] std::vector<float> to_host() const {
    std::vector<float> host(count_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  [[nodiscard]] std::size_t bytes() const { return count_ * sizeof(float); }
  std::size_t count_;
  void* ptr_ = nullptr;
};

TEST(CudaOptimKernelsTest, SgdWithoutVelocityMatchesCpu) {
  DTNN_REQUIRE_CUDA();
  constexpr std::int64_t kCount = 1001;
  const SgdParams p{0.1f, 0.0f, 1e-2f, 0};
  std::vector<float> w = random_values(kCount, 4200);
  const std::vector<float> g = random_values(kCount, 4201);
  DeviceBuffer gpu_w(w), gpu_g(g);
  kernels::cpu::sgd_update(w.size(), p, w.data(), g.data(), nullptr);
  kernels::cuda::sgd_update(w.size(), p, gpu_w.get(), gpu_g.get(), nullptr, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_TRUE(matches(w, gpu_w.to_host(), kUpdateRtol, kUpdateAtol));
}
#endif  // DTNN_HAVE_CUDA

}  // namespace
}  // namespace dtnn
