// SPDX-License-Identifier: Apache-2.0
#ifdef DTNN_HAVE_CUDA
#include "runtime/cuda.hpp"

#include <starpu.h>
#include <starpu_cublas_v2.h>

#include <array>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dtnn::runtime::cuda {
namespace {

struct WorkerState {
  cudnnHandle_t cudnn = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

std::array<WorkerState, STARPU_NMAXWORKERS> g_workers{};

WorkerState& current_worker(const char* what) {
  const int id = starpu_worker_get_id();
  if (id < 0 || starpu_worker_get_type(id) != STARPU_CUDA_WORKER) {
    throw RuntimeError(fmt::format("{}: called outside a CUDA worker", what));
  }
  return g_workers[static_cast<std::size_t>(id)];
}

void start_worker(void*) {
  WorkerState& w = g_workers[static_cast<std::size_t>(starpu_worker_get_id_check())];
  if (cudnnCreate(&w.cudnn) != CUDNN_STATUS_SUCCESS) {
    w.cudnn = nullptr;
    return;
  }
  cudnnSetStream(w.cudnn, starpu_cuda_get_local_stream());
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
  w = WorkerState{};
}

}  // namespace

cudaStream_t stream() { return starpu_cuda_get_local_stream(); }

cublasHandle_t cublas() {
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

int device() { return starpu_worker_get_devid(starpu_worker_get_id_check()); }

void* workspace(std::size_t bytes) {
  WorkerState& w = current_worker("CUDA workspace");
  if (bytes <= w.workspace_bytes) {
    return w.workspace;
  }
  const std::size_t grown = std::max(bytes, w.workspace_bytes + w.workspace_bytes / 2);
  cudaStream_t s = stream();
  if (w.workspace != nullptr) {
    check(cudaFreeAsync(w.workspace, s), "CUDA workspace: cudaFreeAsync");
    w.workspace = nullptr;
    w.workspace_bytes = 0;
  }
  check(cudaMallocAsync(&w.workspace, grown, s),
        fmt::format("CUDA workspace: cudaMallocAsync of {} bytes", grown).c_str());
  w.workspace_bytes = grown;
  return w.workspace;
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw RuntimeError(fmt::format("{}: {} ({})", what, cudaGetErrorString(status), cudaGetErrorName(status)));
  }
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw RuntimeError(fmt::format("{}: {}", what, cublasGetStatusString(status)));
  }
}

void check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS) {
    throw RuntimeError(fmt::format("{}: {}", what, cudnnGetErrorString(status)));
  }
}

void check_launch(const char* what) { check(cudaGetLastError(), what); }

void start_workers() {
  if (starpu_cuda_worker_get_count() == 0) {
    return;
  }
  starpu_cublas_init();
  starpu_execute_on_each_worker(start_worker, nullptr, STARPU_CUDA);
}

void stop_workers() {
  if (starpu_cuda_worker_get_count() == 0) {
    return;
  }
  starpu_execute_on_each_worker(stop_worker, nullptr, STARPU_CUDA);
  starpu_cublas_shutdown();
}

}  // namespace dtnn::runtime::cuda
#endif  // DTNN_HAVE_CUDA
