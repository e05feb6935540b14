// SPDX-License-Identifier: Apache-2.0
// Codelet helper and typed task submission. Every codelet gets a history-based performance model named
// after it, so that StarPU's model-based schedulers learn each task type per shape.
#pragma once

#include <starpu.h>

#include <cstddef>
#include <initializer_list>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#ifdef DTNN_HAVE_CUDA
#define DTNN_CUDA_FUNC(f) (f)
#elif defined(DTNN_SIMGRID)
// The simulation build: StarPU offers a task to a simulated CUDA worker only if its codelet has a CUDA body, which
// never runs there (the task takes its calibrated CUDA time).
#define DTNN_CUDA_FUNC(f) (&::dtnn::runtime::simulated_cuda_body)
#else
#define DTNN_CUDA_FUNC(f) nullptr
#endif

namespace dtnn::runtime {

// The CUDA body of every codelet that has one in the CUDA build, in the simulation build (DTNN_SIMGRID); aborts if
// StarPU ever runs it.
void simulated_cuda_body(void** buffers, void* cl_arg);

// Where tasks may run, process-wide (the CLI's --device, and tests that run one codelet on each kind of
// worker). kCpu and kCuda restrict the tasks of codelets that have a CUDA implementation; the others
// (loading a batch, say) always run on CPU workers.
enum class Device { kAny, kCpu, kCuda };
void set_task_device(Device device);
[[nodiscard]] Device task_device();
[[nodiscard]] const char* to_string(Device device);

// Whether tasks keep the priorities dtnn gives them (the default) or all run at priority 0, process-wide: the
// scheduler laboratory's priorities-off configurations (--priorities off).
enum class Priorities { kOn, kOff };
void set_task_priorities(Priorities p);
[[nodiscard]] Priorities task_priorities();

// What distinguishes the histories of a performance model: the sizes of the data only, or the sizes and
// the task's argument struct (its shape fields), for codelets whose cost depends on more than sizes.
enum class Footprint { kData, kDataAndArgs };

class Codelet {
 public:
  // modes: the access mode of each buffer; empty means a variable number of buffers whose modes come with
  // each task.
  Codelet(const char* name, starpu_cpu_func_t cpu, std::initializer_list<starpu_data_access_mode> modes,
          Footprint footprint = Footprint::kDataAndArgs);
  // With a CUDA implementation too (nullptr: none). CUDA bodies are asynchronous: they only enqueue work on
  // the worker's stream (runtime/cuda.hpp), and StarPU waits for the stream before the task counts as done.
  // Write the argument as DTNN_CUDA_FUNC(f) so that builds without CUDA compile it as nullptr.
  Codelet(const char* name, starpu_cpu_func_t cpu, starpu_cuda_func_t cuda,
          std::initializer_list<starpu_data_access_mode> modes, Footprint footprint = Footprint::kDataAndArgs);
  // A CPU-only codelet of its own name (and so its own performance model) running `body`'s CPU function (see twin).
  Codelet(const char* name, const Codelet& body);
  Codelet(const Codelet&) = delete;
  Codelet& operator=(const Codelet&) = delete;

  [[nodiscard]] starpu_codelet* get() { return &cl_; }
  [[nodiscard]] const char* name() const { return cl_.name; }
  [[nodiscard]] bool variable_buffers() const { return cl_.nbuffers == STARPU_VARIABLE_NBUFFERS; }
  [[nodiscard]] bool has_cuda() const { return cl_.cuda_funcs[0] != nullptr; }

 private:
  starpu_codelet cl_{};
  starpu_perfmodel model_{};
};

// The CPU-only codelet named body's name + suffix that runs body's CPU function, created at its first use: for a body
// that serves several element types, told apart by its buffers' element sizes (vector_elemsize), so that the tasks
// of each kind have a performance model of their own (e.g. "conv2d_fwd_onednn_bf16_bf16out"). Thread-safe.
Codelet& twin(Codelet& body, std::string_view suffix);

struct Access {
  starpu_data_handle_t handle;
  starpu_data_access_mode mode;
};

// How a task shows in traces and schedulers.
struct TaskInfo {
  std::string_view name;  // "<layer>:<pass>", e.g. "conv1:bwd_weights"
  int tile = -1;          // batch tile index, -1 when the task is not per tile
  double flops = 0.0;
  int priority = 0;       // clamped to the scheduler's range
};

// Submits a task with a copy of the argument bytes; throws dtnn::RuntimeError when StarPU refuses it.
void submit_task(Codelet& cl, const TaskInfo& info, std::span<const Access> data, const void* args,
                 std::size_t args_size);

template <class Args>
void submit_task(Codelet& cl, const TaskInfo& info, std::initializer_list<Access> data, const Args& args) {
  static_assert(std::is_trivially_copyable_v<Args>, "task arguments are copied as bytes");
  submit_task(cl, info, std::span<const Access>(data.begin(), data.size()), &args, sizeof(Args));
}

template <class Args>
void submit_task(Codelet& cl, const TaskInfo& info, const std::vector<Access>& data, const Args& args) {
  static_assert(std::is_trivially_copyable_v<Args>, "task arguments are copied as bytes");
  submit_task(cl, info, std::span<const Access>(data), &args, sizeof(Args));
}

// Argument bytes of the running task, for codelet bodies.
template <class Args>
const Args& task_args(void* cl_arg) {
  return *static_cast<const Args*>(cl_arg);
}

inline float* vector_ptr(void* buffer) { return reinterpret_cast<float*>(STARPU_VECTOR_GET_PTR(buffer)); }
// A buffer of another element type (core/dtype.hpp): vector_ptr_as<std::int32_t>(buffers[0]) for token ids.
template <class T>
T* vector_ptr_as(void* buffer) {
  return reinterpret_cast<T*>(STARPU_VECTOR_GET_PTR(buffer));
}
inline std::size_t vector_size(void* buffer) { return STARPU_VECTOR_GET_NX(buffer); }
inline std::size_t vector_elemsize(void* buffer) { return STARPU_VECTOR_GET_ELEMSIZE(buffer); }
// A buffer of bf16 values (core/dtype.hpp's kBFloat16: 16-bit elements), for the bodies that serve fp32 and bf16.
inline bool vector_is_bf16(void* buffer) { return STARPU_VECTOR_GET_ELEMSIZE(buffer) == 2; }
inline std::size_t vector_bytes(void* buffer) {
  return STARPU_VECTOR_GET_NX(buffer) * STARPU_VECTOR_GET_ELEMSIZE(buffer);
}

}  // namespace dtnn::runtime
