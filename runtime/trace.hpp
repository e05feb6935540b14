// SPDX-License-Identifier: Apache-2.0
// Task tracer: per-task start/end/worker from StarPU's profiling API (not FxT), written as Chrome
// trace-event JSON that opens in Perfetto: one row per worker, one event per task "<layer>:<pass>".
#pragma once

#include <starpu.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/dag.hpp"

namespace dtnn::runtime {

struct TraceEvent {
  std::string name;
  std::string codelet;  // the implementation that ran, e.g. "conv2d_fwd_convgemm"
  int tile = -1;
  double flops = 0.0;
  int worker = -1;
  double start_us = 0.0;
  double end_us = 0.0;
  int priority = 0;  // the task's scheduling priority (0 for work that is not a task)
  // When its last dependency was met and it was pushed to the scheduler (StarPU's push_start_time); 0 for work
  // that is not a task. start_us - ready_us is its wait: in a queue, or for a worker to wake up and take it.
  double ready_us = 0.0;
};

class Tracer {
 public:
  // Starts recording the tasks submitted from now on; needs an Engine with profiling enabled.
  static void start();
  static void stop();
  [[nodiscard]] static bool active();
  [[nodiscard]] static std::vector<TraceEvent> events();
  // Writes the events recorded so far; throws dtnn::DataError naming the file when it cannot be written.
  static void write_chrome_trace(const std::filesystem::path& file);

  // Records work that is not a StarPU task (MPI reductions on the communication thread) on its own row;
  // times from starpu_timing_now(). No-op when the tracer is inactive.
  static void record(std::string name, int tile, double flops, double start_us, double end_us);

  // Called by submit_task: arranges for the task to be recorded when the tracer is active, and for its times
  // to reach the DAG recorder when it is recorded there.
  static void attach(starpu_task* task, int tile, dag_hooks::Tickets* dag = nullptr);
  // Undoes attach for a task that StarPU refused (its callback will never run).
  static void detach(starpu_task* task);
};

// Each CPU worker's speed against the mean duration of the same tasks over every CPU worker, in the order of the
// CPU workers' devid (StarPU's CPU index): 1.1 where its tasks lasted the mean / 1.1, from the events that started at
// or after from_us. A task's shape is its name, codelet and tile; shapes that ran on one worker only are left out.
// StarPU's CPU models are one per architecture, so a machine whose cores differ (a busy neighbour of a VM, hybrid
// CPUs) shows it only here; `dtnn calibrate` records it and `dtnn simulate --worker-speeds` simulates it. Workers
// without such tasks, and every worker when there is one, get 1. Needs the engine that ran the tasks.
[[nodiscard]] std::vector<double> cpu_worker_speeds(const std::vector<TraceEvent>& events, double from_us);

// The time a CPU worker spends between two of its tasks when the second was ready before the first ended: the
// median, over the events that started at or after from_us, of start - previous end on the same CPU worker, for the
// tasks whose ready_us is at or before that end (StarPU's pop, the previous task's termination and its successors'
// pushes, the callbacks; not waiting for work). 0 without such a pair. `dtnn calibrate` records it and
// `dtnn simulate` charges it before each simulated CPU task (docs/simulation.md, "What is modelled, and what is not").
[[nodiscard]] double cpu_task_overhead_us(const std::vector<TraceEvent>& events, double from_us);

}  // namespace dtnn::runtime
