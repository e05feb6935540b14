// SPDX-License-Identifier: Apache-2.0
// The StarPU runtime of a process: initialised by the constructor, shut down by the destructor.
#pragma once

#include <string>

namespace dtnn::runtime {

// Schedulers that honour task priorities (measured: dmda ignores them). The default is lws, a
// work-stealing scheduler with priority queues and no calibration cost.
inline constexpr const char* kDefaultScheduler = "lws";

struct EngineOptions {
  std::string scheduler_ = kDefaultScheduler;
  int workers_ = 0;    // CPU workers; 0 = one per core, capped by StarPU's build
  int profiling_ = 0;  // 1 = collect per-task profiling info (needed by the tracer)

  EngineOptions& scheduler(std::string name) { scheduler_ = std::move(name); return *this; }
  EngineOptions& workers(int n) { workers_ = n; return *this; }
  EngineOptions& profiling(int on) { profiling_ = on; return *this; }
};

class Engine {
 public:
  explicit Engine(EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  [[nodiscard]] int cpu_workers() const { return cpu_workers_; }
  [[nodiscard]] const std::string& scheduler() const { return options_.scheduler_; }
  // One line for logs: StarPU version, scheduler, workers, BLIS configuration.
  [[nodiscard]] std::string describe() const;

  // Waits for every submitted task, then re-raises failures recorded on worker threads.
  void wait_all();

  // The live engine (exactly one may exist at a time), or nullptr.
  static Engine* current();

 private:
  EngineOptions options_;
  int cpu_workers_ = 0;
};

// Clamps a priority to the range of the running scheduler.
int clamp_priority(int priority);

}  // namespace dtnn::runtime
