// SPDX-License-Identifier: Apache-2.0
#include "runtime/dag.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "runtime/text_file.hpp"

namespace dtnn::runtime {
namespace {

struct KeyLess {
  using is_transparent = void;
  bool operator()(const TaskKey& a, const TaskKey& b) const { return a < b; }
  bool operator()(const TaskKey& a, std::pair<std::string_view, int> b) const {
    return std::pair<std::string_view, int>(a.name, a.tile) < b;
  }
  bool operator()(std::pair<std::string_view, int> a, const TaskKey& b) const {
    return a < std::pair<std::string_view, int>(b.name, b.tile);
  }
};

// Per data handle: the last task that wrote it and the tasks that read it since.
struct HandleState {
  std::int64_t last_writer = -1;
  std::vector<std::int64_t> readers;
};

}  // namespace

struct DagRecorder::State {
  mutable std::mutex mutex;
  bool active = false;
  std::uint64_t recording = 0;  // start() begins a new one; times of an older one's tasks are dropped
  Dag dag;
  std::unordered_map<starpu_data_handle_t, HandleState> handles;

  std::int64_t add(const starpu_task* task, int tile, std::span<const Access> data);
};

namespace {

// The recorders that exist; submit_task asks each whether it records. g_any_active spares the lock when none do.
std::mutex g_recorders_mutex;
std::vector<std::shared_ptr<DagRecorder::State>> g_recorders;
std::atomic<int> g_any_active{0};

}  // namespace

namespace dag_hooks {
struct Tickets {
  struct Ticket {
    std::shared_ptr<DagRecorder::State> state;
    std::uint64_t recording;
    std::int64_t id;
  };
  std::vector<Ticket> held;
};
}  // namespace dag_hooks

const TaskKey* intern_task_key(std::string_view name, int tile) {
  static std::mutex mutex;
  static std::set<TaskKey, KeyLess> keys;
  std::lock_guard lock(mutex);
  auto it = keys.find(std::pair<std::string_view, int>(name, tile));
  if (it == keys.end()) {
    it = keys.insert(TaskKey{std::string(name), tile}).first;
  }
  return &*it;
}

const TaskKey* task_key(const starpu_task* task) { return static_cast<const TaskKey*>(task->sched_data); }

std::string DagTask::pass() const {
  const auto colon = name.rfind(':');
  return colon == std::string::npos ? std::string() : name.substr(colon + 1);
}

double DagBounds::lower_bound_us() const { return std::max(critical_path_us, work_per_worker_us()); }

void Dag::check() const {
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].id != static_cast<std::int64_t>(i)) {
      throw InvalidArgument(fmt::format("dag: task {} has id {}, expected {}", i, tasks[i].id, i));
    }
  }
  const auto n = static_cast<std::int64_t>(tasks.size());
  for (const DagEdge& e : edges) {
    if (e.from < 0 || e.to >= n || e.from >= e.to) {
      throw InvalidArgument(fmt::format("dag: edge {} -> {}, expected 0 <= from < to < {} (submission order)", e.from,
                                        e.to, n));
    }
  }
}

std::vector<double> Dag::upward_ranks() const {
  check();
  std::vector<std::vector<std::int64_t>> successors(tasks.size());
  for (const DagEdge& e : edges) successors[static_cast<std::size_t>(e.from)].push_back(e.to);
  std::vector<double> rank(tasks.size(), 0.0);
  for (std::size_t i = tasks.size(); i-- > 0;) {
    double longest = 0.0;
    for (std::int64_t s : successors[i]) longest = std::max(longest, rank[static_cast<std::size_t>(s)]);
    rank[i] = std::max(0.0, tasks[i].duration_us()) + longest;
  }
  return rank;
}

DagBounds Dag::bounds(int workers) const {
  if (workers < 1) {
    throw InvalidArgument(fmt::format("dag: bounds for {} workers, expected at least 1", workers));
  }
  DagBounds b;
  b.workers = workers;
  for (double r : upward_ranks()) b.critical_path_us = std::max(b.critical_path_us, r);
  double first = 0.0, last = 0.0;
  bool any = false;
  for (const DagTask& t : tasks) {
    b.work_us += std::max(0.0, t.duration_us());
    if (t.worker < 0) continue;
    first = any ? std::min(first, t.start_us) : t.start_us;
    last = any ? std::max(last, t.end_us) : t.end_us;
    any = true;
  }
  b.span_us = any ? last - first : 0.0;
  return b;
}

void Dag::write_json(const std::filesystem::path& file, int workers, std::string_view metadata_json) const {
  const DagBounds b = bounds(workers);
  double origin = 0.0;
  bool any = false;
  for (const DagTask& t : tasks) {
    if (t.worker >= 0) {
      origin = any ? std::min(origin, t.start_us) : t.start_us;
      any = true;
    }
  }
  nlohmann::json jt = nlohmann::json::array();
  for (const DagTask& t : tasks) {
    jt.push_back({{"id", t.id},
                  {"name", t.name},
                  {"codelet", t.codelet},
                  {"layer", t.layer()},
                  {"pass", t.pass()},
                  {"tile", t.tile},
                  {"flops", t.flops},
                  {"priority", t.priority},
                  {"worker", t.worker},
                  {"start_us", t.start_us - origin},
                  {"end_us", t.end_us - origin}});
  }
  nlohmann::json je = nlohmann::json::array();
  for (const DagEdge& e : edges) je.push_back({e.from, e.to});
  nlohmann::json doc = nlohmann::json::parse(metadata_json);
  doc["tasks"] = std::move(jt);
  doc["edges"] = std::move(je);
  doc["bounds"] = {{"workers", b.workers},
                   {"critical_path_us", b.critical_path_us},
                   {"work_us", b.work_us},
                   {"work_per_worker_us", b.work_per_worker_us()},
                   {"lower_bound_us", b.lower_bound_us()},
                   {"span_us", b.span_us},
                   {"efficiency", b.efficiency()}};
  write_text_file(file, doc.dump() + "\n", "dag");
}

DagRecorder::DagRecorder() : state_(std::make_shared<State>()) {
  std::lock_guard lock(g_recorders_mutex);
  g_recorders.push_back(state_);
}

DagRecorder::~DagRecorder() {
  stop();
  std::lock_guard lock(g_recorders_mutex);
  std::erase(g_recorders, state_);
}

void DagRecorder::start(Times times) {
  if (times == Times::kRecord && starpu_profiling_status_get() != STARPU_PROFILING_ENABLE) {
    starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
  }
  std::lock_guard lock(state_->mutex);
  state_->dag = Dag{};
  state_->handles.clear();
  ++state_->recording;
  if (!state_->active) ++g_any_active;
  state_->active = true;
}

void DagRecorder::stop() {
  std::lock_guard lock(state_->mutex);
  if (state_->active) --g_any_active;
  state_->active = false;
  state_->handles.clear();
}

bool DagRecorder::active() const {
  std::lock_guard lock(state_->mutex);
  return state_->active;
}

Dag DagRecorder::graph() const {
  std::lock_guard lock(state_->mutex);
  return state_->dag;
}

std::int64_t DagRecorder::State::add(const starpu_task* task, int tile, std::span<const Access> data) {
  const auto id = static_cast<std::int64_t>(dag.tasks.size());
  DagTask t;
  t.id = id;
  t.name = task->name != nullptr ? task->name : "task";
  t.codelet = task->cl != nullptr && task->cl->name != nullptr ? task->cl->name : "";
  t.tile = tile;
  t.flops = task->flops;
  t.priority = task->priority;
  dag.tasks.push_back(std::move(t));
  std::set<std::int64_t> preds;
  for (const Access& a : data) {
    const auto mode = static_cast<unsigned>(a.mode);
    if ((mode & (STARPU_R | STARPU_W)) == 0) continue;  // scratch: private to the task
    HandleState& h = handles[a.handle];
    if ((mode & STARPU_W) != 0) {
      if (h.readers.empty()) {
        if (h.last_writer >= 0) preds.insert(h.last_writer);
      } else {
        preds.insert(h.readers.begin(), h.readers.end());
      }
    } else if (h.last_writer >= 0) {
      preds.insert(h.last_writer);
    }
  }
  // Updated after collecting, so that a task reaching one handle through two buffers does not depend on itself.
  for (const Access& a : data) {
    const auto mode = static_cast<unsigned>(a.mode);
    if ((mode & (STARPU_R | STARPU_W)) == 0) continue;
    HandleState& h = handles[a.handle];
    if ((mode & STARPU_W) != 0) {
      h.last_writer = id;
      h.readers.clear();
    } else if (h.readers.empty() || h.readers.back() != id) {
      h.readers.push_back(id);
    }
  }
  preds.erase(id);
  for (std::int64_t p : preds) dag.edges.push_back({p, id});
  return id;
}

namespace dag_hooks {

Tickets* add(const starpu_task* task, int tile, std::span<const Access> data) {
  if (g_any_active.load() == 0) {
    return nullptr;
  }
  std::vector<std::shared_ptr<DagRecorder::State>> recorders;
  {
    std::lock_guard lock(g_recorders_mutex);
    recorders = g_recorders;
  }
  auto tickets = std::make_unique<Tickets>();
  for (auto& r : recorders) {
    std::lock_guard lock(r->mutex);
    if (r->active) tickets->held.push_back({r, r->recording, r->add(task, tile, data)});
  }
  return tickets->held.empty() ? nullptr : tickets.release();
}

void finished(Tickets* tickets, int worker, double start_us, double end_us) {
  std::unique_ptr<Tickets> owned(tickets);
  for (auto& t : owned->held) {
    std::lock_guard lock(t.state->mutex);
    if (t.recording != t.state->recording || t.id >= static_cast<std::int64_t>(t.state->dag.tasks.size())) continue;
    DagTask& task = t.state->dag.tasks[static_cast<std::size_t>(t.id)];
    task.worker = worker;
    task.start_us = start_us;
    task.end_us = end_us;
  }
}

void refused(Tickets* tickets) {
  std::unique_ptr<Tickets> owned(tickets);
  for (auto& t : owned->held) {
    std::lock_guard lock(t.state->mutex);
    Dag& dag = t.state->dag;
    if (t.recording != t.state->recording || t.id != static_cast<std::int64_t>(dag.tasks.size()) - 1) continue;
    dag.tasks.pop_back();
    while (!dag.edges.empty() && dag.edges.back().to == t.id) dag.edges.pop_back();
    // The handles' last accesses may still name it: a refused submission ends the step with an exception, so
    // the recording is not extended further.
  }
}

}  // namespace dag_hooks

}  // namespace dtnn::runtime
