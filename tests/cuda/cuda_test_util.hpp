// SPDX-License-Identifier: Apache-2.0
// Runs one codelet's tasks on a CPU worker, then the same tasks on a CUDA worker, and compares what they
// wrote. Every case starts with DTNN_REQUIRE_CUDA(): without a CUDA build or without a GPU it skips.
// Two things keep a comparison honest: every task of a run must have run on a worker of the kind asked for
// (read from StarPU's profiling info: a codelet without a CUDA body would otherwise compare the CPU with
// itself), and the outputs are poisoned where the CUDA tasks will write them, on the GPU (a write-only
// output gets a device buffer that StarPU never copies from the host, so a value written on the host would
// not reach the CUDA body, and an element it leaves unwritten could hold zero or an earlier run's result).
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
#include "runtime/failure.hpp"
#include "runtime/tensor.hpp"
#include "runtime/trace.hpp"
#ifdef DTNN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "runtime/cuda.hpp"
#endif

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

// Threads of the largest grid of codelets/cuda/launch.cuh (65535 blocks of 256). Past that many elements, the
// grid-stride loops of the element-wise kernels take a second pass, which ends inside the grid.
inline constexpr std::int64_t kOneGrid = std::int64_t{65535} * 256;
inline constexpr std::int64_t kPastOneGrid = kOneGrid + 1031;

inline const char* worker_kind(runtime::Device d) { return d == runtime::Device::kCuda ? "CUDA" : "CPU"; }

// Runs `submit` with its tasks on workers of kind `device`, waits for them, and fails the test unless every
// task it submitted ran on such a worker (and there was at least one).
inline void run_on(runtime::Device device, const std::function<void()>& submit) {
  runtime::Tracer::start();
  {
    OnDevice on(device);
    submit();
  }
  runtime::Engine::current()->wait_all();
  runtime::Tracer::stop();
  const std::vector<runtime::TraceEvent> events = runtime::Tracer::events();
  EXPECT_FALSE(events.empty()) << "no task ran (or StarPU kept no profiling info)";
  const starpu_worker_archtype want = device == runtime::Device::kCuda ? STARPU_CUDA_WORKER : STARPU_CPU_WORKER;
  for (const runtime::TraceEvent& e : events) {
    EXPECT_TRUE(e.worker >= 0 && starpu_worker_get_type(e.worker) == want)
        << e.name << " (codelet " << e.codelet << ") ran on worker " << e.worker << ", expected a "
        << worker_kind(device) << " worker";
  }
}

// What poison_on_device writes into every byte: 0x7F7F7F7F is 3.4e38 as a float, finite, not a NaN (which
// the bitwise comparisons accept on both sides) and far from anything a kernel computes here.
inline constexpr unsigned char kPoisonByte = 0x7F;

#ifdef DTNN_HAVE_CUDA
inline void poison_cuda(void** buffers, void*) {
  const std::size_t bytes = STARPU_VECTOR_GET_NX(buffers[0]) * STARPU_VECTOR_GET_ELEMSIZE(buffers[0]);
  DTNN_CUDA_CHECK(cudaMemsetAsync(reinterpret_cast<void*>(STARPU_VECTOR_GET_PTR(buffers[0])), kPoisonByte, bytes,
                                  runtime::cuda::stream()),
                  "test poison");
}

inline starpu_codelet& poison_codelet() {
  static starpu_codelet cl = [] {
    starpu_codelet c{};
    c.where = STARPU_CUDA;
    c.cuda_funcs[0] = runtime::guarded<poison_cuda>;
    c.cuda_flags[0] = STARPU_CUDA_ASYNC;
    c.nbuffers = 1;
    c.modes[0] = STARPU_W;
    c.name = "test_poison";
    return c;
  }();
  return cl;
}
#endif

// Fills every tile of `outputs` with kPoisonByte in the memory of every CUDA worker, one CUDA worker after
// the other. The last one holds the valid copy; the others keep their (now stale) poisoned buffer, which
// StarPU reuses as it is when a task writes the tile there without reading it. Write read-write outputs'
// starting values on the host afterwards: StarPU then copies those to the GPU. Without CUDA workers (every
// CUDA case skips then) there is nothing to poison.
inline void poison_on_device(const std::vector<Tensor*>& outputs) {
#ifdef DTNN_HAVE_CUDA
  const int workers = static_cast<int>(starpu_worker_get_count());
  for (int w = 0; w < workers; ++w) {
    if (starpu_worker_get_type(w) != STARPU_CUDA_WORKER) continue;
    for (Tensor* t : outputs) {
      for (int tile = 0; tile < t->tiles(); ++tile) {
        starpu_task* task = starpu_task_create();
        task->cl = &poison_codelet();
        task->handles[0] = t->tile(tile);
        task->execute_on_a_specific_worker = 1;
        task->workerid = static_cast<unsigned>(w);
        task->name = "test:poison";
        ASSERT_EQ(starpu_task_submit(task), 0) << "poison task on worker " << w;
      }
    }
  }
  runtime::Engine::current()->wait_all();
#else
  static_cast<void>(outputs);
#endif
}

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

// |a - b| <= atol + rtol * max(|a|, |b|) everywhere, and an infinity only against the same infinity (the
// bound is no bound there); reports the worst element.
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
    if ((std::isinf(a) || std::isinf(b)) && a != b) {
      return ::testing::AssertionFailure() << "element " << i << " of " << cpu.size() << ": cpu " << a << ", cuda "
                                           << b;
    }
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

// Runs `submit` with its tasks on CPU workers, reads `outputs`, poisons them on the GPU, resets them to
// `reset` (the state before, for read-write outputs; empty: leave them), runs `submit` on CUDA workers and
// compares each output. `outputs` are pointers so that the lambda and the caller share the tensors.
inline void compare_cpu_cuda(const std::function<void()>& submit, const std::vector<Tensor*>& outputs,
                             double rtol = 1e-5, double atol = 1e-6,
                             const std::vector<std::vector<float>>& reset = {}) {
  std::vector<std::vector<float>> cpu;
  run_on(runtime::Device::kCpu, submit);
  for (Tensor* t : outputs) cpu.push_back(t->to_vector());
  poison_on_device(outputs);
  for (std::size_t i = 0; i < reset.size() && i < outputs.size(); ++i) {
    if (!reset[i].empty()) outputs[i]->copy_from(reset[i]);
  }
  run_on(runtime::Device::kCuda, submit);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    EXPECT_TRUE(all_close(cpu[i], outputs[i]->to_vector(), rtol, atol)) << "output " << i;
  }
}

}  // namespace dtnn::testing_cuda
