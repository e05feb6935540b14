// SPDX-License-Identifier: Apache-2.0
// Runs one codelet's tasks on a CPU worker, then the same tasks on a CUDA worker, and compares what they
// wrote. Every case starts with DTNN_REQUIRE_CUDA(): without a CUDA build or without a GPU it skips.
#pragma once

#include <gtest/gtest.h>
#include <starpu.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "runtime/codelet.hpp"
#include "runtime/engine.hpp"
#include "runtime/tensor.hpp"

namespace dtnn::testing_cuda {

inline bool have_cuda_worker() {
  return runtime::built_with_cuda() && starpu_cuda_worker_get_count() > 0;
}

#define DTNN_REQUIRE_CUDA()                                                                          \
  do {                                                                                              \
    if (!::dtnn::testing_cuda::have_cuda_worker()) {                                                \
      GTEST_SKIP() << (::dtnn::runtime::built_with_cuda() ? "no GPU: no CUDA worker started"        \
                                                          : "build without CUDA codelets");         \
    }                                                                                               \
  } while (0)

// Tasks submitted while it lives run only on workers of one kind.
class OnDevice {
 public:
  explicit OnDevice(runtime::Device d) : previous_(runtime::task_device()) { runtime::set_task_device(d); }
  ~OnDevice() { runtime::set_task_device(previous_); }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  runtime::Device previous_;
};

inline std::vector<float> random_values(std::int64_t n, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

inline Tensor random_tensor(Shape shape, int tiles, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(std::move(shape), tiles);
  t.copy_from(random_values(t.numel(), seed, lo, hi));
  return t;
}

// |a - b| <= atol + rtol * max(|a|, |b|) everywhere; reports the worst element.
inline ::testing::AssertionResult all_close(std::span<const float> cpu, std::span<const float> gpu, double rtol,
                                            double atol) {
  if (cpu.size() != gpu.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << cpu.size() << " vs " << gpu.size();
  }
  std::size_t worst = 0;
  double worst_excess = -1.0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const double a = cpu[i], b = gpu[i];
    if (std::isnan(a) != std::isnan(b)) {
      return ::testing::AssertionFailure() << "NaN mismatch at " << i << ": cpu " << a << ", cuda " << b;
    }
    if (std::isnan(a)) continue;
    const double excess = std::abs(a - b) - (atol + rtol * std::max(std::abs(a), std::abs(b)));
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  if (worst_excess > 0) {
    return ::testing::AssertionFailure() << "element " << worst << " of " << cpu.size() << ": cpu " << cpu[worst]
                                         << ", cuda " << gpu[worst] << " (rtol " << rtol << ", atol " << atol
                                         << ")";
  }
  return ::testing::AssertionSuccess();
}

// Runs `submit` with its tasks on CPU workers, reads `outputs`, resets them to `reset` (the state before, for
// read-write outputs; empty: leave them), runs `submit` on CUDA workers and compares each output.
// `outputs` are pointers so that the lambda and the caller share the tensors.
inline void compare_cpu_cuda(const std::function<void()>& submit, const std::vector<Tensor*>& outputs,
                             double rtol = 1e-5, double atol = 1e-6,
                             const std::vector<std::vector<float>>& reset = {}) {
  std::vector<std::vector<float>> cpu;
  {
    OnDevice on(runtime::Device::kCpu);
    submit();
  }
  runtime::Engine::current()->wait_all();
  for (Tensor* t : outputs) cpu.push_back(t->to_vector());
  for (std::size_t i = 0; i < reset.size() && i < outputs.size(); ++i) {
    if (!reset[i].empty()) outputs[i]->copy_from(reset[i]);
  }
  {
    OnDevice on(runtime::Device::kCuda);
    submit();
  }
  runtime::Engine::current()->wait_all();
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    EXPECT_TRUE(all_close(cpu[i], outputs[i]->to_vector(), rtol, atol)) << "output " << i;
  }
}

}  // namespace dtnn::testing_cuda
