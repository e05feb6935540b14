// SPDX-License-Identifier: Apache-2.0
// What a CUDA codelet body needs from the runtime: the worker's stream and library handles (bound to that stream), a
// per-worker device workspace, and the error checks that throw (core/cuda_check.hpp: DTNN_CUDA_CHECK and the others;
// runtime::guarded turns the exception into a recorded task failure). Only compiled with DTNN_HAVE_CUDA. Bodies only
// enqueue work on stream(): no cudaDeviceSynchronize, no cudaMalloc/cudaFree, no host waits. Errors that kernels hit
// while they execute are not seen here: StarPU's driver aborts the process on them (docs/gpus.md, "CUDA errors").
#pragma once

#ifdef DTNN_HAVE_CUDA

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>

#include "core/cuda_check.hpp"

namespace dtnn::runtime::cuda {

// The running CUDA worker's stream (StarPU's), cuBLAS and cuDNN handles, and CUDA device id. The first of
// these (or workspace()) that a task's body calls also clears the thread's last CUDA error, which StarPU's
// driver can leave set (it retries a cudaMalloc that failed for want of memory after evicting its cache), so
// that the check after a body's kernel launches, DTNN_CUDA_CHECK(cudaGetLastError(), "<codelet>"), reports the
// body's own launches only: launch errors (a bad configuration, too many resources), not those of the kernels'
// execution (cudaGetLastError does not synchronise).
[[nodiscard]] cudaStream_t stream();
[[nodiscard]] cublasHandle_t cublas();
[[nodiscard]] cudnnHandle_t cudnn();
[[nodiscard]] int device();

// A device buffer of at least `bytes` private to the running worker, valid until the worker's next call.
// Growing it is stream-ordered (cudaFreeAsync / cudaMallocAsync on stream()): no device-wide synchronisation.
// It lies outside StarPU's data, so each worker reserves kWorkspaceReserve in StarPU's memory manager at
// start-up (StarPU caches data up to 90% of the GPU, and would otherwise leave too little for it), and
// declares what it grows past that.
[[nodiscard]] void* workspace(std::size_t bytes);
// cuDNN's algorithms are capped at 512 MiB of workspace (codelets/cuda/conv2d_cudnn.cpp).
inline constexpr std::size_t kWorkspaceReserve = std::size_t{512} << 20;

// Engine hooks (called by Engine right after starpu_init, and before starpu_shutdown). start_workers makes
// the calling thread use the first CUDA worker's device (so that pinning host memory and StarPU's cuBLAS
// handle of that thread do not create a context on GPU 0 in every rank), creates the per-worker handles
// and reserves the workspaces; it throws dtnn::RuntimeError naming the worker when one of them fails, after
// undoing what it did.
void start_workers();
void stop_workers();

}  // namespace dtnn::runtime::cuda

#endif  // DTNN_HAVE_CUDA
