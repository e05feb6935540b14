// SPDX-License-Identifier: Apache-2.0
// The StarPU runtime of a process: initialised by the constructor, shut down by the destructor.
#pragma once

#include <string>

#include "runtime/host_memory.hpp"

namespace dtnn::runtime {

// Schedulers that honour task priorities (measured: dmda ignores them). The default is lws, a
// work-stealing scheduler with priority queues and no calibration cost.
inline constexpr const char* kDefaultScheduler = "lws";
// With CUDA workers the default is dmdas: it places each task on the worker whose calibrated performance
// model (history per codelet and shape) gives the earliest end, data transfers included, and it honours
// priorities. "auto" picks kDefaultScheduler or kDefaultGpuScheduler by whether CUDA workers started.
inline constexpr const char* kDefaultGpuScheduler = "dmdas";

// True when this build has the CUDA codelets (a CUDA-enabled StarPU and nvcc were found at configure time), or
// simulates them (DTNN_SIMGRID: every codelet with a CUDA body in the CUDA build has a placeholder that a
// simulated CUDA worker never runs, taking its calibrated time instead).
[[nodiscard]] bool built_with_cuda();
// CUDA devices visible to this process (0 without CUDA or without a GPU); in a simulation, the CUDA hosts of the
// machine folder StarPU is pointed at (STARPU_HOME, runtime/machine.hpp).
[[nodiscard]] int cuda_device_count();

struct EngineOptions {
  std::string scheduler_ = kDefaultScheduler;
  // CPU workers; 0 = one per core, less one core per CUDA worker (each has a driver thread of its own).
  // More than the cores is allowed (oversubscribed: workers are then left unbound); more than the StarPU
  // build's STARPU_MAXCPUS is an error.
  int workers_ = 0;
  bool profiling_ = false;  // collect per-task profiling info (needed by the tracer)
  int cuda_ = 0;       // CUDA workers (one per GPU): 0 = none, -1 = every GPU StarPU finds, n = the first n
  int cuda_device_ = -1;  // with cuda_ = 1: use this CUDA device id (one rank per GPU), -1 = StarPU's choice
  // Non-empty: StarPU records its FxT trace into this folder (created if missing), for starpu_fxt_tool. Empty:
  // no FxT trace, whatever STARPU_FXT_TRACE says (a StarPU built with FxT would otherwise trace into /tmp).
  std::string fxt_dir_;
  // Who serves StarPU's host buffers (the transient activations and gradients): runtime/host_memory.hpp.
  HostAllocator host_allocator_ = kDefaultHostAllocator;

  EngineOptions& scheduler(std::string name) { scheduler_ = std::move(name); return *this; }
  EngineOptions& workers(int n) { workers_ = n; return *this; }
  EngineOptions& profiling(bool on) { profiling_ = on; return *this; }
  EngineOptions& cuda(int n) { cuda_ = n; return *this; }
  EngineOptions& cuda_device(int id) { cuda_device_ = id; return *this; }
  EngineOptions& fxt_dir(std::string dir) { fxt_dir_ = std::move(dir); return *this; }
  EngineOptions& host_allocator(HostAllocator a) { host_allocator_ = a; return *this; }
};

class Engine {
 public:
  explicit Engine(EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  [[nodiscard]] int cpu_workers() const { return cpu_workers_; }
  [[nodiscard]] int cuda_workers() const { return cuda_workers_; }
  // Cores the creating thread was bound to (mpirun --bind-to core, taskset), where the workers are bound; the
  // machine's cores when it was not bound.
  [[nodiscard]] int cores() const { return cores_; }
  [[nodiscard]] const std::string& scheduler() const { return options_.scheduler_; }
  [[nodiscard]] HostAllocator host_allocator() const { return options_.host_allocator_; }
  // The FxT trace file StarPU writes at shutdown (empty without fxt_dir).
  [[nodiscard]] const std::string& fxt_file() const { return fxt_file_; }
  // One line for logs: StarPU version, scheduler, workers, BLIS configuration, FxT trace file.
  [[nodiscard]] std::string describe() const;

  // Waits for every submitted task, then re-raises failures recorded on worker threads.
  void wait_all();

  // The live engine (exactly one may exist at a time), or nullptr.
  static Engine* current();

 private:
  void record_started(const std::string& scheduler);

  EngineOptions options_;
  int cpu_workers_ = 0;
  int cuda_workers_ = 0;
  int cores_ = 0;
  int machine_cores_ = 0;
  std::string worker_cpus_;  // the CPU workers' CPUs, as they see them (only when bound to some cores)
  std::string fxt_file_;
};

// Clamps a priority to the range of the running scheduler.
int clamp_priority(int priority);

}  // namespace dtnn::runtime
