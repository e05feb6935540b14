// SPDX-License-Identifier: Apache-2.0
#include "runtime/trace.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/text_file.hpp"

namespace dtnn::runtime {
namespace {

std::atomic<bool> g_active{false};
std::mutex g_mutex;
std::vector<TraceEvent> g_events;

struct Pending {
  starpu_task* task;
  int tile;
  dag_hooks::Tickets* dag;  // the DAG recorders that hold it, or null
  bool traced;              // the tracer was active when it was submitted
};

// Runs on the worker after the task; profiling info is valid here.
void on_task_end(void* arg) {
  const Pending pending = *static_cast<Pending*>(arg);
  delete static_cast<Pending*>(arg);
  const starpu_task* task = pending.task;
  if (task->profiling_info == nullptr) {
    if (pending.dag != nullptr) dag_hooks::finished(pending.dag, -1, 0.0, 0.0);
    return;
  }
  const double start_us = starpu_timing_timespec_to_us(&task->profiling_info->start_time);
  const double end_us = starpu_timing_timespec_to_us(&task->profiling_info->end_time);
  if (pending.dag != nullptr) {
    dag_hooks::finished(pending.dag, task->profiling_info->workerid, start_us, end_us);
  }
  if (!pending.traced) {
    return;
  }
  TraceEvent e;
  e.name = task->name != nullptr ? task->name : "task";
  e.codelet = task->cl != nullptr && task->cl->name != nullptr ? task->cl->name : "";
  e.tile = pending.tile;
  e.flops = task->flops;
  e.worker = task->profiling_info->workerid;
  e.start_us = start_us;
  e.end_us = end_us;
  e.priority = task->priority;
  e.ready_us = starpu_timing_timespec_to_us(&task->profiling_info->push_start_time);
  std::lock_guard lock(g_mutex);
  g_events.push_back(std::move(e));
}

}  // namespace

void Tracer::start() {
  if (starpu_profiling_status_get() != STARPU_PROFILING_ENABLE) {
    starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
  }
  std::lock_guard lock(g_mutex);
  g_events.clear();
  g_active = true;
}

void Tracer::stop() { g_active = false; }

bool Tracer::active() { return g_active; }

std::vector<TraceEvent> Tracer::events() {
  std::lock_guard lock(g_mutex);
  return g_events;
}

// Row of the events that are not tasks (the communication thread).
constexpr int kCommRow = 1000;

void Tracer::record(std::string name, int tile, double flops, double start_us, double end_us) {
  if (!g_active) {
    return;
  }
  TraceEvent e{std::move(name), "mpi_allreduce", tile, flops, kCommRow, start_us, end_us};
  std::lock_guard lock(g_mutex);
  g_events.push_back(std::move(e));
}

void Tracer::attach(starpu_task* task, int tile, dag_hooks::Tickets* dag) {
  if (!g_active && dag == nullptr) {
    return;
  }
  task->callback_func = on_task_end;
  task->callback_arg = new Pending{task, tile, dag, g_active.load()};
}

void Tracer::detach(starpu_task* task) {
  if (task->callback_func == on_task_end) {
    auto* pending = static_cast<Pending*>(task->callback_arg);
    if (pending->dag != nullptr) dag_hooks::refused(pending->dag);
    delete pending;
    task->callback_func = nullptr;
    task->callback_arg = nullptr;
  }
}

void Tracer::write_chrome_trace(const std::filesystem::path& file) {
  std::vector<TraceEvent> events = Tracer::events();
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.start_us < b.start_us; });
  const double origin = events.empty() ? 0.0 : events.front().start_us;
  nlohmann::json trace_events = nlohmann::json::array();
  std::vector<int> workers;
  for (const TraceEvent& e : events) {
    nlohmann::json args = {{"flops", e.flops}, {"codelet", e.codelet}, {"priority", e.priority}};
    if (e.tile >= 0) {
      args["tile"] = e.tile;
    }
    if (e.ready_us > 0.0) {
      args["wait_us"] = std::max(0.0, e.start_us - e.ready_us);
    }
    trace_events.push_back({{"name", e.name},
                            {"cat", e.name.substr(e.name.find(':') + 1)},
                            {"ph", "X"},
                            {"pid", 0},
                            {"tid", e.worker},
                            {"ts", e.start_us - origin},
                            {"dur", std::max(0.0, e.end_us - e.start_us)},
                            {"args", args}});
    if (std::find(workers.begin(), workers.end(), e.worker) == workers.end()) {
      workers.push_back(e.worker);
    }
  }
  for (int w : workers) {
    char name[64] = "MPI communication thread";
    if (w >= 0 && w != kCommRow) {
      starpu_worker_get_name(w, name, sizeof(name));
    }
    trace_events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", w},
                            {"args", {{"name", fmt::format("{} (worker {})", name, w)}}}});
  }
  trace_events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", "dtnn"}}}});
  const nlohmann::json doc = {{"traceEvents", trace_events}, {"displayTimeUnit", "ms"}};

  write_text_file(file, doc.dump() + "\n", "trace");
}

namespace {

// A task that started at or after from_us on a CPU worker (not the communication thread's row, nor a GPU's).
bool cpu_task_from(const TraceEvent& e, double from_us) {
  return e.start_us >= from_us && e.worker >= 0 && e.worker != kCommRow &&
         starpu_worker_get_type(e.worker) == STARPU_CPU_WORKER;
}

}  // namespace

std::vector<double> cpu_worker_speeds(const std::vector<TraceEvent>& events, double from_us) {
  const int cpus = static_cast<int>(starpu_cpu_worker_get_count());
  std::vector<double> speeds(static_cast<std::size_t>(std::max(cpus, 0)), 1.0);
  if (cpus < 2) return speeds;
  // Per shape: the microseconds and the count of its tasks on each CPU worker (by devid).
  struct Shape {
    std::vector<double> us;
    std::vector<int> count;
  };
  std::map<std::tuple<std::string, std::string, int>, Shape> shapes;
  for (const TraceEvent& e : events) {
    if (!cpu_task_from(e, from_us)) continue;
    const int cpu = starpu_worker_get_devid(e.worker);
    if (cpu < 0 || cpu >= cpus) continue;
    Shape& s = shapes[{e.name, e.codelet, e.tile}];
    if (s.us.empty()) {
      s.us.assign(speeds.size(), 0.0);
      s.count.assign(speeds.size(), 0);
    }
    s.us[static_cast<std::size_t>(cpu)] += std::max(0.0, e.end_us - e.start_us);
    s.count[static_cast<std::size_t>(cpu)] += 1;
  }
  // A worker's speed: what its tasks would have lasted at their shapes' means, over what they lasted.
  std::vector<double> spent(speeds.size(), 0.0);
  std::vector<double> at_means(speeds.size(), 0.0);
  for (const auto& [key, s] : shapes) {
    const int on = static_cast<int>(std::count_if(s.count.begin(), s.count.end(), [](int n) { return n > 0; }));
    if (on < 2) continue;
    double us = 0.0;
    int n = 0;
    for (std::size_t w = 0; w < speeds.size(); ++w) {
      us += s.us[w];
      n += s.count[w];
    }
    const double mean = us / n;
    for (std::size_t w = 0; w < speeds.size(); ++w) {
      spent[w] += s.us[w];
      at_means[w] += mean * s.count[w];
    }
  }
  for (std::size_t w = 0; w < speeds.size(); ++w) {
    if (spent[w] > 0.0 && at_means[w] > 0.0) speeds[w] = at_means[w] / spent[w];
  }
  return speeds;
}

double cpu_task_overhead_us(const std::vector<TraceEvent>& events, double from_us) {
  std::map<int, std::vector<const TraceEvent*>> by_worker;
  for (const TraceEvent& e : events) {
    if (cpu_task_from(e, from_us)) by_worker[e.worker].push_back(&e);
  }
  std::vector<double> gaps;
  for (auto& [worker, tasks] : by_worker) {
    std::sort(tasks.begin(), tasks.end(), [](const auto* a, const auto* b) { return a->start_us < b->start_us; });
    for (std::size_t i = 1; i < tasks.size(); ++i) {
      const TraceEvent& prev = *tasks[i - 1];
      const TraceEvent& e = *tasks[i];
      if (e.ready_us > 0.0 && e.ready_us <= prev.end_us) gaps.push_back(std::max(0.0, e.start_us - prev.end_us));
    }
  }
  if (gaps.empty()) return 0.0;
  const auto mid = gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2);
  std::nth_element(gaps.begin(), mid, gaps.end());
  return *mid;
}

}  // namespace dtnn::runtime
