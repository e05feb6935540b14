// SPDX-License-Identifier: Apache-2.0
// A step's task graph as data. While recording, every submitted task becomes a node (name, codelet, layer, pass,
// tile, flops, priority) and every dependency StarPU derives from the order of data accesses becomes an edge:
// StarPU's implicit dependencies are sequential consistency per data handle, so a reader depends on the last
// writer, and a writer on the readers since the last write (or, if none, on the last writer). Worker, start
// and end come from StarPU's profiling information when the task has run. The graph feeds lower bounds on the
// step's makespan (critical path, work / workers) and offline scheduling research (--dag FILE).
//
// Only tasks submitted through runtime::submit_task are recorded; dependencies on tasks submitted before the
// recording started are left out (those tasks are done or in flight: the recorded graph starts from them).
// Data-parallel reductions are not tasks (the communication thread acquires the gradients), so their waits
// do not appear as nodes or edges.
#pragma once

#include <starpu.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/codelet.hpp"

namespace dtnn::runtime {

// The identity of a task across steps: its name ("<layer>:<pass>") and batch tile. Interned, so a pointer to it
// is stable for the life of the process. While one of dtnn's own policies (runtime/sched.hpp) runs, submit_task
// stores it in the task's sched_data, where the policy reads it (StarPU's own policies get sched_data untouched:
// the userchoice component of modular-heteroprio-heft reads it as a sub-scheduler's index).
struct TaskKey {
  std::string name;
  int tile = -1;
  auto operator<=>(const TaskKey&) const = default;
};
const TaskKey* intern_task_key(std::string_view name, int tile);
// The key of a task submitted by submit_task while one of dtnn's own policies runs, else nullptr.
const TaskKey* task_key(const starpu_task* task);

struct DagTask {
  std::int64_t id = 0;  // submission order within the recording, from 0
  std::string name;     // "<layer>:<pass>"
  std::string codelet;  // e.g. "conv2d_fwd_convgemm"
  int tile = -1;
  double flops = 0.0;
  int priority = 0;
  int worker = -1;       // -1 until the task has run (or when profiling was off)
  double start_us = 0.0;
  double end_us = 0.0;
  [[nodiscard]] double duration_us() const { return end_us - start_us; }
  [[nodiscard]] std::string layer() const { return name.substr(0, name.rfind(':')); }
  [[nodiscard]] std::string pass() const;
};

struct DagEdge {
  std::int64_t from = 0;
  std::int64_t to = 0;
};

// Lower bounds on the makespan of a graph on `workers` identical workers with its tasks' measured durations:
// no schedule ends before its longest chain (critical path) nor before its total work spread evenly.
struct DagBounds {
  double critical_path_us = 0.0;
  double work_us = 0.0;      // sum of task durations
  int workers = 1;
  double span_us = 0.0;      // what the recorded schedule took: last end - first start
  [[nodiscard]] double work_per_worker_us() const { return work_us / workers; }
  [[nodiscard]] double lower_bound_us() const;
  // lower_bound / span: 1 means the recorded schedule was as short as these bounds allow.
  [[nodiscard]] double efficiency() const { return span_us > 0 ? lower_bound_us() / span_us : 0.0; }
};

struct Dag {
  std::vector<DagTask> tasks;  // tasks[i].id == i
  std::vector<DagEdge> edges;  // from < to: submission order is a topological order
  // Throws InvalidArgument naming the first edge that is out of range or not from an earlier task.
  void check() const;
  // For each task, the longest chain of durations from it to a sink, itself included (HEFT's upward rank).
  [[nodiscard]] std::vector<double> upward_ranks() const;
  // Bounds for `workers` workers; span from the recorded start and end times.
  [[nodiscard]] DagBounds bounds(int workers) const;
  // JSON: {"tasks": [...], "edges": [[from, to], ...], "bounds": {...}} plus the given metadata object
  // (a JSON object as text, e.g. the scheduler and step). Throws DataError naming the file on failure.
  void write_json(const std::filesystem::path& file, int workers, std::string_view metadata_json = "{}") const;
};

// Records the tasks submitted while it is started. Several recorders may record at once (the --dag capture of
// one step and a policy's own calibration of another); each keeps its own graph.
class DagRecorder {
 public:
  DagRecorder();
  ~DagRecorder();
  DagRecorder(const DagRecorder&) = delete;
  DagRecorder& operator=(const DagRecorder&) = delete;

  enum class Times { kRecord, kSkip };
  // Records the tasks submitted from now on (forgetting any earlier recording of this recorder). With
  // Times::kRecord it enables StarPU's profiling, so that the tasks' workers and times are known once they
  // have run; kSkip records the graph alone (no profiling cost).
  void start(Times times = Times::kRecord);
  // Stops adding tasks; those recorded keep receiving their times as they finish.
  void stop();
  [[nodiscard]] bool active() const;
  // The graph recorded so far. After the recorded tasks have run (Engine::wait_all) it has all their times.
  [[nodiscard]] Dag graph() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// What submit_task and the tracer call; not for other code.
namespace dag_hooks {
struct Tickets;  // the recorders that hold a task, and its id in each
// Before a task is submitted: adds it to every active recorder; nullptr when none is active.
Tickets* add(const starpu_task* task, int tile, std::span<const Access> data);
// After it ran (end-of-task callback): gives each recorder the task's times, then frees the tickets.
void finished(Tickets* tickets, int worker, double start_us, double end_us);
// For a task StarPU refused: takes it out of the recorders again and frees the tickets.
void refused(Tickets* tickets);
}  // namespace dag_hooks

}  // namespace dtnn::runtime
