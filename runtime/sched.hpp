// SPDX-License-Identifier: Apache-2.0
// Scheduling policies written in C++ inside dtnn, chosen by name like StarPU's own (--scheduler NAME,
// EngineOptions::scheduler). A policy is a class with two duties: StarPU hands it every task whose dependencies
// are satisfied (push), and every idle worker asks it for work (pop). That is StarPU's starpu_sched_policy
// contract; the glue here (runtime/sched.cpp) does the StarPU side of it: marking the task pushed, waking the
// workers, passing the worker id, and telling the policy when a task has run and when a new training step starts.
//
//   class Fifo : public dtnn::runtime::SchedulingPolicy {
//    public:
//     void push(starpu_task* task) override { ready_.push(task, 0.0); }
//     starpu_task* pop(int worker) override { return ready_.pop(worker); }
//    private:
//     dtnn::runtime::ScoredReadyList ready_;
//   };
//   dtnn::runtime::register_policy({"my-fifo", "first in, first out", [] { return std::make_unique<Fifo>(); }});
//
// Every method may be called from several threads at once (pushes from any thread, pops from every worker):
// a policy guards its own state (ScoredReadyList does). Tasks that dtnn submits carry their identity across
// steps, runtime::task_key(task) (name and tile), so a policy can learn per task from one step to the next.
#pragma once

#include <starpu.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/dag.hpp"

namespace dtnn::runtime {

class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;
  // Once StarPU's workers exist (ids 0 .. workers - 1), before any task.
  virtual void start(int workers) {}
  // A task whose dependencies are all satisfied.
  virtual void push(starpu_task* task) = 0;
  // Work for this worker, or nullptr when there is none it can run (idle workers ask again and again).
  virtual starpu_task* pop(int worker) = 0;
  // After the task ran on worker (before its successors are released).
  virtual void done(starpu_task* task, int worker) {}
  // The driver is about to submit training step `step` (global index).
  virtual void step_begins(std::int64_t step) {}
};

struct PolicyRegistration {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<SchedulingPolicy>()> make;
};

// The policy names that this StarPU knows (STARPU_SCHED's values), as it lists them
// (starpu_sched_get_predefined_policies), and the aliases it accepts.
[[nodiscard]] std::vector<std::string> starpu_policy_names();
// Registers a policy so that the Engine accepts its name. InvalidArgument when the name is empty, taken by
// StarPU's policies or by another registration, or make is empty. dtnn's own policies are registered already.
void register_policy(PolicyRegistration registration);
// The names and descriptions of every registered policy, by name.
[[nodiscard]] std::vector<std::pair<std::string, std::string>> registered_policies();
[[nodiscard]] bool is_registered_policy(std::string_view name);
// For Engine: a starpu_sched_policy that runs a new instance of the registered policy `name` (one engine at a
// time). nullptr when no such policy is registered.
[[nodiscard]] starpu_sched_policy* starpu_policy_for(std::string_view name);
// The instance of the running engine's policy when it is a registered one, else nullptr.
[[nodiscard]] SchedulingPolicy* running_policy();
// Called by the training loop before it submits each step; tells the running registered policy, if any.
void notify_step_begins(std::int64_t step);

// A building block: ready tasks ordered by a score, highest first, ties first in first out. pop(worker) takes
// the best task that worker can execute (CPU or CUDA implementation), so one list serves mixed workers.
class ScoredReadyList {
 public:
  void push(starpu_task* task, double score);
  starpu_task* pop(int worker);
  // Locality: among the tasks the worker can run whose score is within `within` of the best one, the first that
  // `wanted` accepts; the best one when none does.
  starpu_task* pop(int worker, const std::function<bool(const starpu_task*)>& wanted, double within);
  [[nodiscard]] std::size_t size() const;
  // Without taking the lock: idle workers poll pop() all the time (StarPU's drivers do not block), and a lock
  // per poll slows the workers that have work (on hyperthreads and through the lock's cache line).
  [[nodiscard]] bool empty() const { return count_.load(std::memory_order_relaxed) == 0; }

 private:
  std::atomic<std::size_t> count_{0};
  mutable std::mutex mutex_;
  std::multimap<std::pair<double, std::uint64_t>, starpu_task*, std::greater<>> tasks_;  // key: (score, -seq)
  std::uint64_t pushed_ = 0;
};

// dtnn-uprank: list scheduling by upward rank, the priority rule of HEFT, made for training steps. The first
// step's graph is recorded (DagRecorder), every task's duration is measured as it runs (a moving average per
// task key), and at the start of each step every task key gets its upward rank in that graph: its own duration
// plus the longest chain of durations after it to the end of the step. Ready tasks run highest rank first, so
// the chain that bounds the step from below (the critical path) is never left waiting behind work that has
// slack. Until the ranks exist (the first two steps), the tasks' own priorities order the list (as prio).
// Locality: a worker takes a task of the batch tile it ran last when that task's rank is within 10% of the
// critical path of the best ready task's, so that a tile's chain tends to stay in one core's cache (what lws
// gets from pushing a released task to the worker that released it).
class UpwardRankPolicy : public SchedulingPolicy {
 public:
  void start(int workers) override;
  void push(starpu_task* task) override;
  starpu_task* pop(int worker) override;
  void done(starpu_task* task, int worker) override;
  void step_begins(std::int64_t step) override;

  // The rank of a task key, or a negative value when it has none yet. For tests and the laboratory.
  [[nodiscard]] double rank(const TaskKey* key) const;

 private:
  void recompute_ranks();

  ScoredReadyList ready_;
  DagRecorder recorder_;
  mutable std::mutex mutex_;
  int recorded_steps_ = 0;  // 0: none yet; 1: recording the first; 2: graph_ holds it
  Dag graph_;
  std::vector<const TaskKey*> graph_keys_;  // the key of each node of graph_
  std::unordered_map<const starpu_task*, double> started_us_;
  std::unordered_map<const TaskKey*, double> duration_us_;
  std::unordered_map<const TaskKey*, double> ranks_;
  double critical_path_us_ = 0.0;
  std::vector<int> last_tile_;  // per worker: the tile of the task it ran last (-2: none yet)
};

}  // namespace dtnn::runtime
