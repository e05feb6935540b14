// SPDX-License-Identifier: Apache-2.0
#include "runtime/engine.hpp"

#include <hwloc.h>
#include <sched.h>
#include <starpu.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "runtime/blis_setup.hpp"
#include "runtime/cuda.hpp"
#include "core/errors.hpp"
#include "runtime/failure.hpp"
#include "runtime/machine.hpp"
#include "runtime/mpi.hpp"
#include "runtime/sched.hpp"

namespace dtnn::runtime {
namespace {

Engine* g_current = nullptr;


// The cores this thread may run on, counted as StarPU counts them (one worker per core, not per hardware thread),
// each as the logical index of its first PU in that set: what StarPU calls a bind id. hwloc's topology is the whole
// machine: a CPU binding (mpirun's --bind-to core, taskset, numactl) is not a cgroup restriction, and StarPU 1.3
// binds its i-th worker to the machine's i-th core whatever the process's binding, so two ranks bound to cores 0
// and 1 both put their worker on core 0 (measured: simplecnn, 2 ranks x 1 worker on this 2-core machine, each
// worker at half a core).
struct BoundCores {
  std::vector<unsigned> bindids;  // the allowed cores' first PUs (logical indices)
  int machine = 0;                // cores of the machine
};

BoundCores bound_cores() {
  BoundCores cores;
  hwloc_topology_t topology = nullptr;
  if (hwloc_topology_init(&topology) == 0) {
    if (hwloc_topology_load(topology) == 0) {
      hwloc_bitmap_t binding = hwloc_bitmap_alloc();
      const bool bound = binding != nullptr && hwloc_get_cpubind(topology, binding, HWLOC_CPUBIND_THREAD) == 0 &&
                         !hwloc_bitmap_iszero(binding);
      cores.machine = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_CORE);
      for (int i = 0; i < cores.machine; ++i) {
        const hwloc_obj_t core = hwloc_get_obj_by_type(topology, HWLOC_OBJ_CORE, static_cast<unsigned>(i));
        hwloc_obj_t pu = nullptr;
        while ((pu = hwloc_get_next_obj_inside_cpuset_by_type(topology, core->cpuset, HWLOC_OBJ_PU, pu)) != nullptr) {
          if (!bound || hwloc_bitmap_isset(binding, pu->os_index)) break;
        }
        if (pu != nullptr) cores.bindids.push_back(pu->logical_index);
      }
      hwloc_bitmap_free(binding);
    }
    hwloc_topology_destroy(topology);
  }
  if (cores.bindids.empty()) {
    // No topology: every hardware thread counts, StarPU's own numbering.
    cores.machine = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 0; i < cores.machine; ++i) cores.bindids.push_back(static_cast<unsigned>(i));
  }
  return cores;
}

#ifndef DTNN_SIMGRID
// The CPUs each CPU worker may run on, as the workers' own threads see it (sched_getaffinity), in worker order:
// "1, 0" for two workers, "0-1" for one that is not bound.
std::string cpu_worker_cpus() {
  struct Seen {
    std::mutex mutex;
    std::map<int, std::string> cpus;
  } seen;
  starpu_execute_on_each_worker(
      [](void* arg) {
        cpu_set_t set;
        CPU_ZERO(&set);
        std::string list = "?";
        if (sched_getaffinity(0, sizeof(set), &set) == 0) {
          list.clear();
          for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
            if (!CPU_ISSET(cpu, &set)) continue;
            int last = cpu;
            while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
            list += fmt::format("{}{}", list.empty() ? "" : ",", last == cpu ? fmt::format("{}", cpu)
                                                                                : fmt::format("{}-{}", cpu, last));
            cpu = last;
          }
        }
        auto* s = static_cast<Seen*>(arg);
        const std::lock_guard lock(s->mutex);
        s->cpus[starpu_worker_get_id()] = list;
      },
      &seen, STARPU_CPU);
  std::string joined;
  for (const auto& [worker, list] : seen.cpus) joined += fmt::format("{}{}", joined.empty() ? "" : ", ", list);
  return joined;
}
#endif

// CPU workers to start. By default every core but one per CUDA worker, whose driver thread StarPU binds to a
// core of its own (were all cores CPU workers, it would share one with a spinning worker).
int cpu_worker_count(int requested, int cuda_workers, int cores) {
  if (requested > STARPU_MAXCPUS) {
    throw InvalidArgument(fmt::format("Engine: workers={}, expected at most {}, the CPU workers this StarPU build "
                                      "supports (STARPU_MAXCPUS){}",
                                      requested, STARPU_MAXCPUS,
                                      STARPU_MAXCPUS < 256 ? "; scripts/build_starpu.sh builds one with 256" : ""));
  }
  return requested > 0 ? requested : std::clamp(cores - cuda_workers, 1, STARPU_MAXCPUS);
}

// Sets an environment variable that starpu_init reads, and restores the process's own value afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

#ifdef STARPU_USE_FXT
// The file StarPU 1.3's FxT writes for process id `id` (src/common/fxt.c): <prefix>/<suffix>_<id>.
std::string fxt_file_name(const std::string& dir, int id) {
  const char* suffix = std::getenv("STARPU_FXT_SUFFIX");
  const char* user = std::getenv("USER");
  return fmt::format("{}/{}_{}", dir, suffix != nullptr ? suffix : fmt::format("prof_file_{}", user ? user : ""), id);
}
#endif

// Start-up, step 1: the options make sense in this build (before anything is started).
void check_options(const EngineOptions& o) {
  const std::vector<std::string> starpu_policies = starpu_policy_names();
  if (o.scheduler_ != "auto" && !is_registered_policy(o.scheduler_) &&
      std::find(starpu_policies.begin(), starpu_policies.end(), o.scheduler_) == starpu_policies.end()) {
    std::string known = "auto";
    for (const std::string& s : starpu_policies) known += fmt::format(", {}", s);
    for (const auto& [name, description] : registered_policies()) known += fmt::format(", {}", name);
    throw InvalidArgument(fmt::format("Engine: unknown scheduler '{}', expected one of {}", o.scheduler_, known));
  }
  if (o.cuda_ < -1) {
    throw InvalidArgument(fmt::format("Engine: cuda={}, expected -1 (every GPU), 0 or a positive count", o.cuda_));
  }
  if (o.cuda_ != 0 && !built_with_cuda()) {
#ifdef STARPU_USE_CUDA
    constexpr const char* starpu_cuda = "StarPU has CUDA but dtnn was configured without it";
#else
    constexpr const char* starpu_cuda = "the StarPU it was built with has no CUDA";
#endif
    throw InvalidArgument(fmt::format("Engine: cuda={} asks for GPUs, expected 0 in this build ({}); build the "
                                      "CUDA configuration with 'DTNN_CUDA=1 scripts/setup.sh build'",
                                      o.cuda_, starpu_cuda));
  }
  if (o.workers_ < 0) {
    throw InvalidArgument(fmt::format("Engine: workers={}, expected 0 (all cores) or a positive count", o.workers_));
  }
#ifndef STARPU_USE_FXT
  if (!o.fxt_dir_.empty()) {
    throw InvalidArgument(fmt::format("Engine: fxt_dir '{}' asks for an FxT trace, expected a StarPU built with FxT "
                                      "(this one has none, like Debian's libstarpu-dev; scripts/setup.sh builds dtnn "
                                      "against a StarPU of its own that has)",
                                      o.fxt_dir_));
  }
#endif
}

// Step 2: the workers to start, and the cores they may run on.
struct WorkerPlan {
  int cuda = 0;          // StarPU's ncuda: -1 every GPU, 0 none (also when no GPU is visible), n the first n
  int cuda_threads = 0;  // the CUDA workers' driver threads
  int cpus = 0;          // CPU workers
  BoundCores bound;      // the cores this thread may run on
  std::string scheduler;  // the policy's name, "auto" decided by whether GPUs will be used
};

WorkerPlan plan_workers(const EngineOptions& o) {
  WorkerPlan plan;
  // Without a visible GPU no CUDA worker is asked for (and "auto" stays on the CPU scheduler).
  plan.cuda = o.cuda_ != 0 && cuda_device_count() > 0 ? o.cuda_ : 0;
  plan.cuda_threads = plan.cuda == -1 ? cuda_device_count() : plan.cuda;
  plan.bound = bound_cores();
  plan.cpus = cpu_worker_count(o.workers_, plan.cuda_threads, static_cast<int>(plan.bound.bindids.size()));
  plan.scheduler = o.scheduler_ == "auto" ? (plan.cuda == 0 ? kDefaultScheduler : kDefaultGpuScheduler) : o.scheduler_;
  return plan;
}

// Step 3: StarPU's configuration for that plan (its policy name points into plan.scheduler).
starpu_conf starpu_configuration(const EngineOptions& o, const WorkerPlan& plan) {
  starpu_conf conf;
  starpu_conf_init(&conf);
  conf.ncuda = plan.cuda;
  conf.ncpus = plan.cpus;
#ifndef DTNN_SIMGRID
  // A binding to some of the cores: StarPU binds its workers (and CUDA drivers) to those, in turn, unless the
  // user chose with StarPU's own variables.
  const auto& bindids = plan.bound.bindids;
  if (static_cast<int>(bindids.size()) < plan.bound.machine && std::getenv("STARPU_WORKERS_CPUID") == nullptr &&
      std::getenv("STARPU_WORKERS_COREID") == nullptr) {
    conf.use_explicit_workers_bindid = 1;
    for (unsigned i = 0; i < STARPU_NMAXWORKERS; ++i) conf.workers_bindid[i] = bindids[i % bindids.size()];
  }
#endif
  if (o.cuda_ == 1 && o.cuda_device_ >= 0) {
    conf.use_explicit_workers_cuda_gpuid = 1;
    conf.workers_cuda_gpuid[0] = static_cast<unsigned>(o.cuda_device_);
  }
  conf.nopencl = 0;
  conf.nmic = 0;
  conf.nmpi_ms = 0;
  // dtnn's own policies (runtime/sched.hpp) by their struct, StarPU's by name.
  conf.sched_policy = starpu_policy_for(plan.scheduler);
  conf.sched_policy_name = conf.sched_policy == nullptr ? plan.scheduler.c_str() : nullptr;
  return conf;
}

// Step 4: the environment starpu_init reads, for the life of the start-up (the process's own values come back).
class StartEnvironment {
 public:
  StartEnvironment(const EngineOptions& o, const WorkerPlan& plan)
      // A StarPU built with FxT traces unless STARPU_FXT_TRACE=0: dtnn's traces only when asked (fxt_dir).
      : fxt_trace_("STARPU_FXT_TRACE", o.fxt_dir_.empty() ? "0" : "1") {
    // More threads to bind than cores (e.g. 8 workers on 2 cores): StarPU 1.3 would bind several to one core and
    // warn; unbound, the OS shares the cores among them.
    if (plan.cpus + plan.cuda_threads > static_cast<int>(plan.bound.bindids.size()) &&
        std::getenv("STARPU_WORKERS_NOBIND") == nullptr) {
      nobind_.emplace("STARPU_WORKERS_NOBIND", "1");
    }
    if (!o.fxt_dir_.empty()) {
      std::error_code error;
      std::filesystem::create_directories(o.fxt_dir_, error);
      if (error) {
        throw InvalidArgument(fmt::format("Engine: FxT folder '{}' cannot be created: {}", o.fxt_dir_,
                                          error.message()));
      }
      fxt_prefix_.emplace("STARPU_FXT_PREFIX", o.fxt_dir_);
    }
  }

 private:
  ScopedEnv fxt_trace_;
  std::optional<ScopedEnv> nobind_;
  std::optional<ScopedEnv> fxt_prefix_;
};

// Step 5: starpu_init (the host allocator serves its buffers from the start); RuntimeError when it fails.
void start_starpu(starpu_conf& conf, const EngineOptions& o) {
  install_host_allocator(o.host_allocator_);
#ifdef DTNN_SIMGRID
  // `dtnn simulate` runs under StarPU's own main, which has started SimGrid already (app/simulate.cpp). A program
  // that keeps its main gets SimGrid started here, from these arguments (starpu_init passes none and crashes
  // there), with the running thread attached (SimGrid's slower thread contexts). SimGrid's INFO lines (platform
  // version, configuration changes) are left out; warnings stay.
  static char program[] = "dtnn";
  static char quiet[] = "--log=root.thres:warning";
  static char* arguments[] = {program, quiet, nullptr};
  int argc = 2;
  char** argv = arguments;
  const int rc = starpu_initialize(&conf, &argc, &argv);
#else
  const int rc = starpu_init(&conf);
#endif
  if (rc != 0) {
    release_host_allocator();
    throw RuntimeError(fmt::format("Engine: starpu_init failed ({}), scheduler '{}', {} CPU workers", rc,
                                   o.scheduler_, conf.ncpus));
  }
}

}  // namespace

Engine::Engine(EngineOptions options) : options_(std::move(options)) {
  if (g_current != nullptr) {
    throw InvalidArgument("Engine: a StarPU engine is already running in this process, expected at most one");
  }
  check_options(options_);
  configure_blis();
  const WorkerPlan plan = plan_workers(options_);
  cores_ = static_cast<int>(plan.bound.bindids.size());
  machine_cores_ = plan.bound.machine;
  starpu_conf conf = starpu_configuration(options_, plan);
  const StartEnvironment environment(options_, plan);
  start_starpu(conf, options_);
  record_started(plan.scheduler);
#ifdef DTNN_HAVE_CUDA
  // A CUDA worker that cannot get its handles fails the engine here, with StarPU shut down again so that the
  // process can report the error (or start another engine).
  try {
    cuda::start_workers();
  } catch (...) {
    starpu_shutdown();
    release_host_allocator();
    throw;
  }
#endif
  g_current = this;
}

// Step 6: what started, as describe() and the accessors tell it.
void Engine::record_started(const std::string& scheduler) {
  if (options_.profiling_) {
    starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
  }
#ifdef STARPU_USE_FXT
  if (!options_.fxt_dir_.empty()) {
    // One file per MPI rank, named by rank as StarPU-MPI names them (starpu_fxt_tool -i takes them all).
    const Mpi* mpi = Mpi::current();
    const int id = mpi != nullptr && mpi->active() ? mpi->rank() : 0;
    if (id != 0) starpu_profiling_set_id(id);
    fxt_file_ = fxt_file_name(options_.fxt_dir_, id);
  }
#endif
  cpu_workers_ = static_cast<int>(starpu_cpu_worker_get_count());
#ifndef DTNN_SIMGRID
  if (cores_ < machine_cores_) worker_cpus_ = cpu_worker_cpus();
#endif
  cuda_workers_ = static_cast<int>(starpu_cuda_worker_get_count());
  // The policy StarPU runs, by its own name: STARPU_SCHED overrides the name asked for, and "heft" runs dmda. The
  // global scheduling context is context 0.
  const starpu_sched_policy* running = starpu_sched_ctx_get_sched_policy(0);
  options_.scheduler_ = running != nullptr && running->policy_name != nullptr ? running->policy_name : scheduler;
}

Engine::~Engine() {
  starpu_task_wait_for_all();
#ifdef DTNN_HAVE_CUDA
  cuda::stop_workers();
#endif
  starpu_shutdown();
  release_host_allocator();
  g_current = nullptr;
}

std::string Engine::describe() const {
  const BlisSetup& blis = configure_blis();
  int major = 0, minor = 0, release = 0;
  starpu_get_version(&major, &minor, &release);
  std::string gpus;
  if (cuda_workers_ > 0) {
    gpus = fmt::format(", {} CUDA worker{}", cuda_workers_, cuda_workers_ == 1 ? "" : "s");
#ifdef DTNN_HAVE_CUDA
    for (int w = 0; w < static_cast<int>(starpu_worker_get_count()); ++w) {
      if (starpu_worker_get_type(w) == STARPU_CUDA_WORKER) {
        char name[128];
        starpu_worker_get_name(w, name, sizeof(name));
        gpus += fmt::format(" [{}]", name);
      }
    }
#endif
  }
  const int threads = cpu_workers_ + cuda_workers_;
  const std::string unbound =
      threads > cores_ && !simulated() ? fmt::format(" (oversubscribed: {} worker threads on {} cores)", threads, cores_) : "";
  const std::string binding = cores_ < machine_cores_ && !simulated()
                                  ? fmt::format(" (bound to {} of the {} cores: workers on CPUs {})", cores_, machine_cores_,
                                                worker_cpus_)
                                  : "";
  const std::string fxt = fxt_file_.empty() ? "" : fmt::format("; FxT trace {}", fxt_file_);
  return fmt::format("StarPU {}.{}.{}, scheduler {}, {} CPU workers{}{}{}, host allocator {}; BLIS {} '{}' ({}){}",
                     major, minor, release,
                     options_.scheduler_, cpu_workers_, binding, unbound, gpus, to_string(options_.host_allocator_), blis.version,
                     blis.arch, blis.reason, fxt);
}

void Engine::wait_all() {
  const int rc = starpu_task_wait_for_all();
  if (rc != 0) {
    throw RuntimeError(fmt::format("Engine: starpu_task_wait_for_all failed ({})", rc));
  }
  rethrow_task_failures();
}

Engine* Engine::current() { return g_current; }

int cuda_device_count() {
#ifdef DTNN_SIMGRID
  const char* home = std::getenv("STARPU_HOME");
  return home == nullptr ? 0 : machine_gpus(std::filesystem::path(home).parent_path());
#elif defined(DTNN_HAVE_CUDA)
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
#else
  return 0;
#endif
}

bool built_with_cuda() {
#if defined(DTNN_HAVE_CUDA) || defined(DTNN_SIMGRID)
  return true;
#else
  return false;
#endif
}

int clamp_priority(int priority) {
  return std::clamp(priority, starpu_sched_get_min_priority(), starpu_sched_get_max_priority());
}

}  // namespace dtnn::runtime
