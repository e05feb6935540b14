// SPDX-License-Identifier: Apache-2.0
#include "runtime/sched.hpp"

#include <algorithm>
#include <array>
#include <atomic>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dtnn::runtime {
namespace {

// StarPU's find_sched_policy_from_name also takes "heft", the former name of dmda, with a warning.
constexpr std::string_view kStarpuAliases[] = {"heft"};

struct Registry {
  std::mutex mutex;
  std::map<std::string, PolicyRegistration, std::less<>> policies;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;  // lives as long as the process: engines may start until exit
    reg->policies.emplace("dtnn-uprank",
                          PolicyRegistration{"dtnn-uprank",
                                             "dtnn: ready tasks by upward rank in the step's graph (measured durations)",
                                             [] { return std::make_unique<UpwardRankPolicy>(); }});
    return reg;
  }();
  return *r;
}

// The engine's policy: only one StarPU engine runs at a time (Engine enforces it).
std::unique_ptr<SchedulingPolicy> g_instance;
std::function<std::unique_ptr<SchedulingPolicy>()> g_make_next;
std::atomic<SchedulingPolicy*> g_running{nullptr};
starpu_sched_policy g_glue{};
std::string g_glue_name, g_glue_description;

void glue_init(unsigned sched_ctx_id) {
  g_instance = g_make_next();
  // Priorities are the policy's business: let tasks carry any int (as StarPU's prio does).
  if (starpu_sched_ctx_min_priority_is_set(sched_ctx_id) == 0) starpu_sched_ctx_set_min_priority(sched_ctx_id, -(1 << 30));
  if (starpu_sched_ctx_max_priority_is_set(sched_ctx_id) == 0) starpu_sched_ctx_set_max_priority(sched_ctx_id, 1 << 30);
  g_instance->start(static_cast<int>(starpu_worker_get_count()));
  g_running = g_instance.get();
}

void glue_deinit(unsigned) {
  g_running = nullptr;
  g_instance.reset();
}

int glue_push(starpu_task* task) {
  // Which workers to wake is decided while the task is certainly alive: once the policy has it, another worker
  // may pop, run and destroy it before this thread goes on.
  std::array<char, STARPU_NMAXWORKERS> wake{};
  starpu_worker_collection* workers = starpu_sched_ctx_get_worker_collection(task->sched_ctx);
  starpu_sched_ctx_iterator it;
  workers->init_iterator(workers, &it);
  while (workers->has_next(workers, &it)) {
    const unsigned w = workers->get_next(workers, &it);
    wake[w] = starpu_worker_can_execute_task_first_impl(w, task, nullptr) ? 1 : 0;
  }
  // Marks the task pushed (its push time, task->scheduled): before the policy can hand it to a worker.
  starpu_push_task_end(task);
  g_instance->push(task);
  // With StarPU's non-blocking drivers idle workers poll pop anyway; waking them is cheap and needed otherwise.
  for (std::size_t w = 0; w < wake.size(); ++w) {
    if (wake[w] != 0) starpu_wake_worker_relax_light(static_cast<int>(w));
  }
  return 0;
}

starpu_task* glue_pop(unsigned) { return g_instance->pop(starpu_worker_get_id_check()); }

// Runs on the worker that executed the task (the second argument is the scheduling context).
void glue_post_exec(starpu_task* task, unsigned) { g_instance->done(task, starpu_worker_get_id()); }

}  // namespace

std::vector<std::string> starpu_policy_names() {
  std::vector<std::string> names;
  for (starpu_sched_policy** p = starpu_sched_get_predefined_policies(); *p != nullptr; ++p) {
    names.emplace_back((*p)->policy_name);
  }
  names.insert(names.end(), std::begin(kStarpuAliases), std::end(kStarpuAliases));
  return names;
}

void register_policy(PolicyRegistration registration) {
  if (registration.name.empty() || !registration.make) {
    throw InvalidArgument(fmt::format("register_policy: policy '{}' needs a name and a factory", registration.name));
  }
  const std::vector<std::string> starpu = starpu_policy_names();
  if (std::find(starpu.begin(), starpu.end(), registration.name) != starpu.end() || registration.name == "auto") {
    throw InvalidArgument(fmt::format("register_policy: '{}' is a StarPU policy name, expected a new name",
                                      registration.name));
  }
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.policies.count(registration.name) != 0) {
    throw InvalidArgument(fmt::format("register_policy: a policy named '{}' is registered already", registration.name));
  }
  std::string name = registration.name;
  r.policies.emplace(std::move(name), std::move(registration));
}

std::vector<std::pair<std::string, std::string>> registered_policies() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, reg] : r.policies) out.emplace_back(name, reg.description);
  return out;
}

bool is_registered_policy(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.policies.find(name) != r.policies.end();
}

starpu_sched_policy* starpu_policy_for(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.policies.find(name);
  if (it == r.policies.end()) return nullptr;
  g_make_next = it->second.make;
  g_glue_name = it->second.name;
  g_glue_description = it->second.description;
  g_glue = starpu_sched_policy{};
  g_glue.init_sched = glue_init;
  g_glue.deinit_sched = glue_deinit;
  g_glue.push_task = glue_push;
  g_glue.pop_task = glue_pop;
  g_glue.post_exec_hook = glue_post_exec;
  g_glue.policy_name = g_glue_name.c_str();
  g_glue.policy_description = g_glue_description.c_str();
  g_glue.worker_type = STARPU_WORKER_LIST;
  return &g_glue;
}

SchedulingPolicy* running_policy() { return g_running.load(); }

void notify_step_begins(std::int64_t step) {
  if (SchedulingPolicy* p = g_running.load()) p->step_begins(step);
}

void ScoredReadyList::push(starpu_task* task, double score) {
  std::lock_guard lock(mutex_);
  // Ties: the earlier push first; the sequence is negated so that std::greater puts it in front.
  tasks_.emplace(std::pair<double, std::uint64_t>(score, ~pushed_++), task);
  count_.store(tasks_.size(), std::memory_order_relaxed);
}

starpu_task* ScoredReadyList::pop(int worker) {
  if (empty()) return nullptr;
  std::lock_guard lock(mutex_);
  for (auto it = tasks_.begin(); it != tasks_.end(); ++it) {
    if (starpu_worker_can_execute_task_first_impl(static_cast<unsigned>(worker), it->second, nullptr)) {
      starpu_task* task = it->second;
      tasks_.erase(it);
      count_.store(tasks_.size(), std::memory_order_relaxed);
      return task;
    }
  }
  return nullptr;
}

starpu_task* ScoredReadyList::pop(int worker, const std::function<bool(const starpu_task*)>& wanted, double within) {
  if (empty()) return nullptr;
  std::lock_guard lock(mutex_);
  auto best = tasks_.end();
  for (auto it = tasks_.begin(); it != tasks_.end(); ++it) {
    if (best != tasks_.end() && it->first.first < best->first.first - within) break;
    if (!starpu_worker_can_execute_task_first_impl(static_cast<unsigned>(worker), it->second, nullptr)) continue;
    if (best == tasks_.end()) best = it;
    if (wanted(it->second)) {
      best = it;
      break;
    }
  }
  if (best == tasks_.end()) return nullptr;
  starpu_task* task = best->second;
  tasks_.erase(best);
  count_.store(tasks_.size(), std::memory_order_relaxed);
  return task;
}

std::size_t ScoredReadyList::size() const {
  std::lock_guard lock(mutex_);
  return tasks_.size();
}

void UpwardRankPolicy::push(starpu_task* task) {
  double score = task->priority;
  {
    std::lock_guard lock(mutex_);
    if (!ranks_.empty()) {
      const auto it = ranks_.find(task_key(task));
      // Tasks outside the recorded step (evaluation) keep their priority, which is below every rank in us.
      if (it != ranks_.end()) score = 1e6 + it->second;
    }
  }
  ready_.push(task, score);
}

void UpwardRankPolicy::start(int workers) { last_tile_.assign(static_cast<std::size_t>(workers), -2); }

starpu_task* UpwardRankPolicy::pop(int worker) {
  if (ready_.empty()) return nullptr;  // the common case of an idle worker's poll: no lock
  double within = 0.0;
  int tile = -2;
  {
    std::lock_guard lock(mutex_);
    within = 0.1 * critical_path_us_;
    if (worker >= 0 && static_cast<std::size_t>(worker) < last_tile_.size()) tile = last_tile_[static_cast<std::size_t>(worker)];
  }
  starpu_task* task = within > 0.0 && tile >= 0
                          ? ready_.pop(worker, [tile](const starpu_task* t) {
                              const TaskKey* k = task_key(t);
                              return k != nullptr && k->tile == tile;
                            }, within)
                          : ready_.pop(worker);
  if (task != nullptr) {
    const double now = starpu_timing_now();
    const TaskKey* k = task_key(task);
    std::lock_guard lock(mutex_);
    started_us_[task] = now;
    if (k != nullptr && k->tile >= 0 && static_cast<std::size_t>(worker) < last_tile_.size()) {
      last_tile_[static_cast<std::size_t>(worker)] = k->tile;
    }
  }
  return task;
}

void UpwardRankPolicy::done(starpu_task* task, int) {
  const double now = starpu_timing_now();
  const TaskKey* key = task_key(task);
  std::lock_guard lock(mutex_);
  const auto it = started_us_.find(task);
  if (it == started_us_.end()) return;
  const double took = now - it->second;
  started_us_.erase(it);
  if (key == nullptr) return;
  auto [d, fresh] = duration_us_.try_emplace(key, took);
  if (!fresh) d->second = 0.75 * d->second + 0.25 * took;
}

void UpwardRankPolicy::step_begins(std::int64_t) {
  std::lock_guard lock(mutex_);
  if (recorded_steps_ == 0) {
    recorder_.start(DagRecorder::Times::kSkip);
    recorded_steps_ = 1;
    return;
  }
  if (recorded_steps_ == 1) {
    recorder_.stop();
    graph_ = recorder_.graph();
    graph_keys_.clear();
    for (const DagTask& t : graph_.tasks) graph_keys_.push_back(intern_task_key(t.name, t.tile));
    recorded_steps_ = 2;
  }
  recompute_ranks();
}

void UpwardRankPolicy::recompute_ranks() {
  // The recorded step's structure with the latest measured durations (0 for a task not measured yet).
  Dag g = graph_;
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const auto it = duration_us_.find(graph_keys_[i]);
    g.tasks[i].start_us = 0.0;
    g.tasks[i].end_us = it != duration_us_.end() ? it->second : 0.0;
  }
  const std::vector<double> ranks = g.upward_ranks();
  critical_path_us_ = ranks.empty() ? 0.0 : *std::max_element(ranks.begin(), ranks.end());
  ranks_.clear();
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    double& r = ranks_[graph_keys_[i]];
    r = std::max(r, ranks[i]);
  }
}

double UpwardRankPolicy::rank(const TaskKey* key) const {
  std::lock_guard lock(mutex_);
  const auto it = ranks_.find(key);
  return it != ranks_.end() ? it->second : -1.0;
}

}  // namespace dtnn::runtime
