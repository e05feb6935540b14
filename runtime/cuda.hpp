// SPDX-License-Identifier: Apache-2.0
// What a CUDA codelet body needs from the runtime: the worker's stream and library handles (bound to that
// stream), a per-worker device workspace, and error checks that throw (runtime::guarded turns the exception
// into a recorded task failure). Only compiled with DTNN_HAVE_CUDA. Bodies only enqueue work on stream():
// no cudaDeviceSynchronize, no cudaMalloc/cudaFree, no host waits.
#pragma once

#ifdef DTNN_HAVE_CUDA

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>

namespace dtnn::runtime::cuda {

// The running CUDA worker's stream (StarPU's), cuBLAS and cuDNN handles, and CUDA device id.
[[nodiscard]] cudaStream_t stream();
[[nodiscard]] cublasHandle_t cublas();
[[nodiscard]] cudnnHandle_t cudnn();
[[nodiscard]] int device();

// A device buffer of at least `bytes` private to the running worker, valid until the worker's next call.
// Growing it is stream-ordered (cudaFreeAsync / cudaMallocAsync on stream()): no device-wide synchronisation.
[[nodiscard]] void* workspace(std::size_t bytes);

// Throw dtnn::RuntimeError "<what>: <library error string>" on failure.
void check(cudaError_t status, const char* what);
void check(cublasStatus_t status, const char* what);
void check(cudnnStatus_t status, const char* what);
// After a kernel launch: cudaGetLastError (does not synchronise).
void check_launch(const char* what);

// Engine hooks: create and destroy the per-worker handles on every CUDA worker (called by Engine).
void start_workers();
void stop_workers();

}  // namespace dtnn::runtime::cuda

#endif  // DTNN_HAVE_CUDA
