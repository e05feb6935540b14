// SPDX-License-Identifier: Apache-2.0
// What runtime/cuda.cpp sets up on the CUDA workers, and how it checks launches.
#include <algorithm>
#include <atomic>
#include <exception>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "cuda_test_util.hpp"
#ifdef DTNN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "runtime/cuda.hpp"
#endif

namespace dtnn {
namespace {

#ifdef DTNN_HAVE_CUDA
std::vector<int> cuda_workers() {
  std::vector<int> ids;
  for (int w = 0; w < static_cast<int>(starpu_worker_get_count()); ++w) {
    if (starpu_worker_get_type(w) == STARPU_CUDA_WORKER) ids.push_back(w);
  }
  return ids;
}

// Runs `body` as the only buffer-writing task on CUDA worker `worker`, with `tile` as its buffer (which orders
// the tasks that share it).
void run_on_worker(starpu_codelet& cl, int worker, starpu_data_handle_t tile) {
  starpu_task* task = starpu_task_create();
  task->cl = &cl;
  task->handles[0] = tile;
  task->execute_on_a_specific_worker = 1;
  task->workerid = static_cast<unsigned>(worker);
  ASSERT_EQ(starpu_task_submit(task), 0);
}

starpu_codelet cuda_only(starpu_cuda_func_t body, const char* name) {
  starpu_codelet c{};
  c.where = STARPU_CUDA;
  c.cuda_funcs[0] = body;
  c.cuda_flags[0] = STARPU_CUDA_ASYNC;
  c.nbuffers = 1;
  c.modes[0] = STARPU_W;
  c.name = name;
  return c;
}

// A runtime call that fails on the worker's thread and is not read: what StarPU's driver does when a cudaMalloc
// finds no memory (it evicts cached data and tries again, leaving the error behind).
std::atomic<int> g_left_error{0};
void leave_an_error(void**, void*) {
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, std::size_t{1} << 62);
  g_left_error = static_cast<int>(status == cudaSuccess ? cudaSuccess : cudaPeekAtLastError());
  if (status == cudaSuccess) cudaFree(p);
}

void memset_then_check(void** buffers, void*) {
  const std::size_t bytes = STARPU_VECTOR_GET_NX(buffers[0]) * sizeof(float);
  DTNN_CUDA_CHECK(
      cudaMemsetAsync(reinterpret_cast<void*>(STARPU_VECTOR_GET_PTR(buffers[0])), 0, bytes, runtime::cuda::stream()));
  DTNN_CUDA_CHECK(cudaGetLastError(), "memset_then_check");
}

// The body's own failing call, after its first runtime::cuda call: the launch check must still see it.
void fail_then_check(void** buffers, void*) {
  cudaStream_t s = runtime::cuda::stream();
  static_cast<void>(s);
  static_cast<void>(buffers);
  void* p = nullptr;
  if (cudaMalloc(&p, std::size_t{1} << 62) == cudaSuccess) cudaFree(p);
  DTNN_CUDA_CHECK(cudaGetLastError(), "fail_then_check");
}

starpu_codelet cl_leave_an_error = cuda_only(leave_an_error, "test_leave_an_error");
starpu_codelet cl_memset_then_check = cuda_only(runtime::guarded<memset_then_check>, "test_memset_then_check");
starpu_codelet cl_fail_then_check = cuda_only(runtime::guarded<fail_then_check>, "test_fail_then_check");
#endif

// Strict when the suite runs on its own (bench/gpu_check.sh runs each suite in a process of its own): then no
// data has been on the GPU yet, and all that StarPU counts as used on a worker's memory node is reservations.
TEST(CudaRuntimeTest, EachWorkerReservesItsWorkspaceInStarpusMemoryManager) {
  DTNN_REQUIRE_CUDA();
#ifdef DTNN_HAVE_CUDA
  for (const int w : cuda_workers()) {
    const unsigned node = starpu_worker_get_memory_node(w);
    const starpu_ssize_t total = starpu_memory_get_total(node);
    ASSERT_GT(total, 0) << "worker " << w;
    const std::size_t reserve = std::min(runtime::cuda::kWorkspaceReserve, static_cast<std::size_t>(total) / 4);
    EXPECT_GE(static_cast<std::size_t>(total - starpu_memory_get_available(node)), reserve) << "worker " << w;
  }
#endif
}

TEST(CudaRuntimeTest, EveryCudaWorkerHasHandlesOnItsStream) {
  DTNN_REQUIRE_CUDA();
#ifdef DTNN_HAVE_CUDA
  static std::vector<std::string> problems;
  problems.clear();
  starpu_execute_on_each_worker(
      [](void*) {
        const int w = starpu_worker_get_id_check();
        try {
          cudaStream_t s = runtime::cuda::stream();
          cudaStream_t blas = nullptr;
          cudaStream_t dnn = nullptr;
          DTNN_CUBLAS_CHECK(cublasGetStream(runtime::cuda::cublas(), &blas));
          DTNN_CUDNN_CHECK(cudnnGetStream(runtime::cuda::cudnn(), &dnn));
          if (blas != s || dnn != s) problems.push_back("worker " + std::to_string(w) + ": a handle on another stream");
        } catch (const std::exception& e) {
          problems.push_back("worker " + std::to_string(w) + ": " + e.what());
        }
      },
      nullptr, STARPU_CUDA);
  EXPECT_TRUE(problems.empty()) << problems.front();
#endif
}

TEST(CudaRuntimeTest, LaunchCheckIgnoresAnErrorLeftBeforeTheBody) {
  DTNN_REQUIRE_CUDA();
#ifdef DTNN_HAVE_CUDA
  Tensor t({1, 1000});
  for (const int w : cuda_workers()) {
    g_left_error = 0;
    run_on_worker(cl_leave_an_error, w, t.tile(0));
    run_on_worker(cl_memset_then_check, w, t.tile(0));
    EXPECT_NO_THROW(runtime::Engine::current()->wait_all()) << "worker " << w;
    EXPECT_NE(g_left_error.load(), static_cast<int>(cudaSuccess)) << "the set-up left no error on worker " << w;
  }
#endif
}

TEST(CudaRuntimeTest, LaunchCheckReportsAnErrorOfTheBody) {
  DTNN_REQUIRE_CUDA();
#ifdef DTNN_HAVE_CUDA
  Tensor t({1, 1000});
  run_on_worker(cl_fail_then_check, cuda_workers().front(), t.tile(0));
  try {
    runtime::Engine::current()->wait_all();
    ADD_FAILURE() << "no failure recorded";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("fail_then_check"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cudaGetLastError() failed: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(tests/cuda/test_cuda_runtime.cpp:"), std::string::npos) << e.what();
  }
#endif
}

}  // namespace
}  // namespace dtnn
