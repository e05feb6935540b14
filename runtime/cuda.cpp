// SPDX-License-Identifier: Apache-2.0
#ifdef DTNN_HAVE_CUDA
#include "runtime/cuda.hpp"

#include <starpu.h>
#include <starpu_cublas_v2.h>

#include <algorithm>
#include <array>
#include <string>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dtnn::runtime::cuda {
namespace {

struct WorkerState {
  cudnnHandle_t cudnn = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  unsigned memory_node = 0;
  std::size_t accounted_bytes = 0;  // declared to StarPU's memory manager: max(reserve, workspace_bytes)
  std::string start_error;          // what failed in start_worker, empty when nothing did
};

std::array<WorkerState, STARPU_NMAXWORKERS> g_workers{};

// Job id of the task whose body last cleared this thread's last CUDA error.
thread_local unsigned long t_cleared_job = ~0UL;

void clear_stale_error_once_per_task() {
  starpu_task* task = starpu_task_get_current();
  if (task == nullptr) {
    return;
  }
  const unsigned long job = starpu_task_get_job_id(task);
  if (job != t_cleared_job) {
    static_cast<void>(cudaGetLastError());
    t_cleared_job = job;
  }
}

WorkerState& current_worker(const char* what) {
  const int id = starpu_worker_get_id();
  if (id < 0 || starpu_worker_get_type(id) != STARPU_CUDA_WORKER) {
    throw RuntimeError(fmt::format("{}: called outside a CUDA worker", what));
  }
  clear_stale_error_once_per_task();
  return g_workers[static_cast<std::size_t>(id)];
}

std::string worker_name(int id) {
  char name[128];
  starpu_worker_get_name(id, name, sizeof(name));
  return fmt::format("CUDA worker {} ({}, device {})", id, name, starpu_worker_get_devid(id));
}

// On each CUDA worker's thread. Failures are kept for start_workers to report on the calling thread.
void start_worker(void*) {
  const int id = starpu_worker_get_id_check();
  WorkerState& w = g_workers[static_cast<std::size_t>(id)];
  w = WorkerState{};
  w.memory_node = starpu_worker_get_memory_node(id);
  cudaStream_t s = starpu_cuda_get_local_stream();
  try {
    cudnnHandle_t dnn = nullptr;
    DTNN_CUDNN_CHECK(cudnnCreate(&dnn));
    w.cudnn = dnn;
    DTNN_CUDNN_CHECK(cudnnSetStream(w.cudnn, s));
    // StarPU's starpu_cublas_init ignores what cublasCreate and cublasSetStream return.
    cublasHandle_t blas = starpu_cublas_get_local_handle();
    if (blas == nullptr) {
      w.start_error = "cublasCreate failed (starpu_cublas_init left no handle)";
      return;
    }
    DTNN_CUBLAS_CHECK(cublasSetStream(blas, s));
  } catch (const RuntimeError& e) {
    w.start_error = e.what();
    return;
  }
  // The workspace's share of the GPU, taken from what StarPU may fill with data. A node whose whole budget is
  // smaller (a STARPU_LIMIT_CUDA_MEM of a few hundred MiB) gives a quarter of it.
  const starpu_ssize_t total = starpu_memory_get_total(w.memory_node);
  const std::size_t reserve =
      total < 0 ? kWorkspaceReserve : std::min(kWorkspaceReserve, static_cast<std::size_t>(total) / 4);
  if (starpu_memory_allocate(w.memory_node, reserve, 0) != 0) {
    w.start_error = fmt::format("reserving {} MiB of workspace in StarPU's memory manager failed ({} MiB available)",
                                reserve >> 20, starpu_memory_get_available(w.memory_node) >> 20);
    return;
  }
  w.accounted_bytes = reserve;
}

void stop_worker(void*) {
  WorkerState& w = g_workers[static_cast<std::size_t>(starpu_worker_get_id_check())];
  if (w.workspace != nullptr) {
    cudaStreamSynchronize(starpu_cuda_get_local_stream());
    cudaFree(w.workspace);
  }
  if (w.cudnn != nullptr) {
    cudnnDestroy(w.cudnn);
  }
  if (w.accounted_bytes > 0) {
    starpu_memory_deallocate(w.memory_node, w.accounted_bytes);
  }
  w = WorkerState{};
}

int first_cuda_worker() {
  const int n = static_cast<int>(starpu_worker_get_count());
  for (int id = 0; id < n; ++id) {
    if (starpu_worker_get_type(id) == STARPU_CUDA_WORKER) {
      return id;
    }
  }
  return -1;
}

}  // namespace

cudaStream_t stream() {
  clear_stale_error_once_per_task();
  return starpu_cuda_get_local_stream();
}

cublasHandle_t cublas() {
  clear_stale_error_once_per_task();
  cublasHandle_t h = starpu_cublas_get_local_handle();
  if (h == nullptr) {
    throw RuntimeError("cuBLAS: no handle for this worker (starpu_cublas_init failed at start-up)");
  }
  return h;
}

cudnnHandle_t cudnn() {
  WorkerState& w = current_worker("cuDNN handle");
  if (w.cudnn == nullptr) {
    throw RuntimeError(fmt::format("cuDNN: no handle for CUDA worker {} (cudnnCreate failed at start-up)",
                                   starpu_worker_get_id()));
  }
  return w.cudnn;
}

int device() {
  clear_stale_error_once_per_task();
  return starpu_worker_get_devid(starpu_worker_get_id_check());
}

void* workspace(std::size_t bytes) {
  WorkerState& w = current_worker("CUDA workspace");
  if (bytes <= w.workspace_bytes) {
    return w.workspace;
  }
  const std::size_t grown = std::max(bytes, w.workspace_bytes + w.workspace_bytes / 2);
  cudaStream_t s = stream();
  if (w.workspace != nullptr) {
    DTNN_CUDA_CHECK(cudaFreeAsync(w.workspace, s), "CUDA workspace");
    w.workspace = nullptr;
    w.workspace_bytes = 0;
  }
  // Past the reservation: declared, even beyond StarPU's budget, so that StarPU evicts data to make up for it.
  if (grown > w.accounted_bytes) {
    starpu_memory_allocate(w.memory_node, grown - w.accounted_bytes, STARPU_MEMORY_OVERFLOW);
    w.accounted_bytes = grown;
  }
  DTNN_CUDA_CHECK(cudaMallocAsync(&w.workspace, grown, s), fmt::format("CUDA workspace of {} bytes", grown));
  w.workspace_bytes = grown;
  return w.workspace;
}

void start_workers() {
  const int first = first_cuda_worker();
  if (first < 0) {
    return;
  }
  // Before anything on this thread touches CUDA: without it, the runtime's default device 0 gets this
  // thread's context (page-locked tensors, StarPU's main cuBLAS handle) whichever GPU this rank uses.
  const int devid = starpu_worker_get_devid(first);
  DTNN_CUDA_CHECK(cudaSetDevice(devid), fmt::format("CUDA: device {} on the submitting thread", devid));
  starpu_cublas_init();
  starpu_execute_on_each_worker(start_worker, nullptr, STARPU_CUDA);
  std::string errors;
  const int n = static_cast<int>(starpu_worker_get_count());
  for (int id = 0; id < n; ++id) {
    const WorkerState& w = g_workers[static_cast<std::size_t>(id)];
    if (starpu_worker_get_type(id) == STARPU_CUDA_WORKER && !w.start_error.empty()) {
      errors += fmt::format("{}{}: {}", errors.empty() ? "" : "; ", worker_name(id), w.start_error);
    }
  }
  if (!errors.empty()) {
    stop_workers();
    throw RuntimeError(fmt::format("CUDA start-up: {}", errors));
  }
}

void stop_workers() {
  if (first_cuda_worker() < 0) {
    return;
  }
  starpu_execute_on_each_worker(stop_worker, nullptr, STARPU_CUDA);
  starpu_cublas_shutdown();
}

}  // namespace dtnn::runtime::cuda
#endif  // DTNN_HAVE_CUDA
