// SPDX-License-Identifier: Apache-2.0
// Return-code checks of CUDA, cuDNN, cuBLAS and NCCL calls: on failure, a dtnn::RuntimeError
//   "[<context>: ]<call as written> failed: <the library's error string> (<file>:<line>)"
// where the optional context is what the caller knows (layer, shape, size), built only on failure:
//   DTNN_CUDA_CHECK(cudaMemsetAsync(dx, 0, bytes, stream));
//   DTNN_CUDNN_CHECK(cudnnConvolutionForward(...), "conv2d " + describe(shape));
//   DTNN_CUDA_CHECK(cudaGetLastError(), "relu_fwd");  // after kernel launches
// One header for the CUDA kernels (codelets/cuda) and the runtime (runtime/cuda.cpp, runtime/nccl_transport.cpp):
// free of StarPU; in core/ so that arrows only point down. Only CUDA builds include it (it needs the CUDA,
// cuDNN, cuBLAS and NCCL headers, all of dtnn::cuda_libs). The .cu files are C++17: no __VA_OPT__ here.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include <cstring>
#include <string>

#include "core/errors.hpp"

namespace dtnn::cuda_check {

inline std::string error_string(cudaError_t s) {
  return std::string(cudaGetErrorString(s)) + " (" + cudaGetErrorName(s) + ")";
}
inline std::string error_string(cudnnStatus_t s) { return cudnnGetErrorString(s); }
inline std::string error_string(cublasStatus_t s) { return cublasGetStatusString(s); }
inline std::string error_string(ncclResult_t s) { return std::string("NCCL ") + ncclGetErrorString(s); }

// `file` from the project's top folder on ("codelets/cuda/dense.cu"): CMake compiles by absolute path, and this
// header's own path says where the top folder is.
inline const char* source_path(const char* file) {
  static const std::string top = [] {
    const std::string self = __FILE__;
    const std::size_t at = self.rfind("core/cuda_check.hpp");
    return at == std::string::npos ? std::string() : self.substr(0, at);
  }();
  return !top.empty() && std::strncmp(file, top.c_str(), top.size()) == 0 ? file + top.size() : file;
}

// Throws the error of a failed call; for code that must look at the status first (cudaEventQuery's
// cudaErrorNotReady is no failure), with the call named by hand.
template <typename Status>
[[noreturn]] void fail(const char* call, Status status, const char* file, int line, const std::string& context) {
  throw RuntimeError((context.empty() ? std::string() : context + ": ") + call + " failed: " + error_string(status) +
                     " (" + source_path(file) + ":" + std::to_string(line) + ")");
}

}  // namespace dtnn::cuda_check

// The optional second argument is the context (anything a std::string is built from).
#define DTNN_CUDA_CHECK(call, ...) DTNN_CHECK_STATUS_(cudaError_t, cudaSuccess, call, #call, __VA_ARGS__)
#define DTNN_CUDNN_CHECK(call, ...) DTNN_CHECK_STATUS_(cudnnStatus_t, CUDNN_STATUS_SUCCESS, call, #call, __VA_ARGS__)
#define DTNN_CUBLAS_CHECK(call, ...) \
  DTNN_CHECK_STATUS_(cublasStatus_t, CUBLAS_STATUS_SUCCESS, call, #call, __VA_ARGS__)
#define DTNN_NCCL_CHECK(call, ...) DTNN_CHECK_STATUS_(ncclResult_t, ncclSuccess, call, #call, __VA_ARGS__)

#define DTNN_CHECK_STATUS_(Status, ok, call, text, ...)                                                          \
  do {                                                                                                          \
    const Status dtnn_check_status_ = (call);                                                                   \
    if (dtnn_check_status_ != (ok)) {                                                                           \
      ::dtnn::cuda_check::fail(text, dtnn_check_status_, __FILE__, __LINE__, std::string{__VA_ARGS__});         \
    }                                                                                                           \
  } while (false)
