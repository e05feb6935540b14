// SPDX-License-Identifier: Apache-2.0
#include "runtime/codelet.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "runtime/dag.hpp"
#include "runtime/engine.hpp"
#include "runtime/sched.hpp"
#include "runtime/trace.hpp"

namespace dtnn::runtime {
namespace {

uint32_t footprint_with_args(starpu_task* task) {
  return starpu_hash_crc32c_be_n(task->cl_arg, task->cl_arg_size, starpu_task_data_footprint(task));
}

std::atomic<Device> g_task_device{Device::kAny};
std::atomic<Priorities> g_task_priorities{Priorities::kOn};

}  // namespace

void set_task_device(Device device) { g_task_device.store(device); }
void set_task_priorities(Priorities p) { g_task_priorities.store(p); }
Priorities task_priorities() { return g_task_priorities.load(); }
Device task_device() { return g_task_device.load(); }
const char* to_string(Device device) {
  switch (device) {
    case Device::kCpu: return "cpu";
    case Device::kCuda: return "cuda";
    case Device::kAny: break;
  }
  return "any";
}

void simulated_cuda_body(void**, void*) {
  std::fputs("dtnn: a simulated CUDA body ran; in a SimGrid StarPU codelets never run\n", stderr);
  std::abort();
}

Codelet::Codelet(const char* name, starpu_cpu_func_t cpu, std::initializer_list<starpu_data_access_mode> modes,
                 Footprint footprint)
    : Codelet(name, cpu, nullptr, modes, footprint) {}

Codelet::Codelet(const char* name, starpu_cpu_func_t cpu, starpu_cuda_func_t cuda,
                 std::initializer_list<starpu_data_access_mode> modes, Footprint footprint) {
  model_.type = STARPU_HISTORY_BASED;
  model_.symbol = name;
  if (footprint == Footprint::kDataAndArgs) {
    model_.footprint = footprint_with_args;
  }
  cl_.where = STARPU_CPU;
  cl_.cpu_funcs[0] = cpu;
  if (cuda != nullptr) {
    cl_.where |= STARPU_CUDA;
    cl_.cuda_funcs[0] = cuda;
    cl_.cuda_flags[0] = STARPU_CUDA_ASYNC;
  }
  cl_.name = name;
  cl_.model = &model_;
  if (modes.size() == 0) {
    cl_.nbuffers = STARPU_VARIABLE_NBUFFERS;
  } else {
    cl_.nbuffers = static_cast<int>(modes.size());
    std::size_t i = 0;
    for (starpu_data_access_mode m : modes) {
      cl_.modes[i++] = m;
    }
  }
}

Codelet::Codelet(const char* name, const Codelet& body) {
  model_ = body.model_;
  model_.symbol = name;
  cl_ = body.cl_;
  cl_.where = STARPU_CPU;
  cl_.cuda_funcs[0] = nullptr;
  cl_.cuda_flags[0] = 0;
  cl_.name = name;
  cl_.model = &model_;
}

Codelet& twin(Codelet& body, std::string_view suffix) {
  static std::mutex mutex;
  static std::map<std::pair<const Codelet*, std::string>, std::pair<std::unique_ptr<std::string>,
                                                                     std::unique_ptr<Codelet>>> twins;
  std::lock_guard lock(mutex);
  auto [it, inserted] = twins.try_emplace({&body, std::string(suffix)});
  if (inserted) {
    it->second.first = std::make_unique<std::string>(std::string(body.name()) + std::string(suffix));
    it->second.second = std::make_unique<Codelet>(it->second.first->c_str(), body);
  }
  return *it->second.second;
}

void submit_task(Codelet& cl, const TaskInfo& info, std::span<const Access> data, const void* args,
                 std::size_t args_size) {
  if (data.size() > STARPU_NMAXBUFS) {
    throw InvalidArgument(fmt::format("{}: {} buffers in one task, expected at most {} (StarPU's build)", info.name,
                                      data.size(), STARPU_NMAXBUFS));
  }
  if (!cl.variable_buffers() && static_cast<int>(data.size()) != cl.get()->nbuffers) {
    throw InvalidArgument(fmt::format("{}: codelet {} takes {} buffers, got {}", info.name, cl.name(),
                                      cl.get()->nbuffers, data.size()));
  }
  starpu_task* task = starpu_task_create();
  task->cl = cl.get();
  if (cl.variable_buffers()) {
    task->nbuffers = static_cast<int>(data.size());
  }
  for (std::size_t i = 0; i < data.size(); ++i) {
    task->handles[i] = data[i].handle;
    if (cl.variable_buffers()) {
      task->modes[i] = data[i].mode;
    }
  }
  if (args_size > 0) {
    void* copy = std::malloc(args_size);
    if (copy == nullptr) {
      starpu_task_destroy(task);
      throw std::bad_alloc();
    }
    std::memcpy(copy, args, args_size);
    task->cl_arg = copy;
    task->cl_arg_size = args_size;
    task->cl_arg_free = 1;
  }
  if (cl.has_cuda()) {
    switch (task_device()) {
      case Device::kCpu: task->where = STARPU_CPU; break;
      case Device::kCuda: task->where = STARPU_CUDA; break;
      case Device::kAny: break;
    }
  }
  const TaskKey* key = intern_task_key(info.name, info.tile);
  task->name = key->name.c_str();
  // For dtnn's own policies (runtime/sched.hpp) only: StarPU's userchoice component (modular-heteroprio-heft)
  // reads sched_data as the index of the sub-scheduler that takes the task.
  if (running_policy() != nullptr) task->sched_data = const_cast<TaskKey*>(key);
  task->flops = info.flops;
  task->priority = task_priorities() == Priorities::kOn ? clamp_priority(info.priority) : 0;
  Tracer::attach(task, info.tile, dag_hooks::add(task, info.tile, data));
  const int rc = starpu_task_submit(task);
  if (rc != 0) {
    Tracer::detach(task);
    task->destroy = 0;
    starpu_task_destroy(task);
    throw RuntimeError(fmt::format("{}: starpu_task_submit failed ({}{})", info.name, rc,
                                   rc == -ENODEV ? ": no worker can run this codelet" : ""));
  }
}

}  // namespace dtnn::runtime
