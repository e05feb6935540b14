// SPDX-License-Identifier: Apache-2.0
// core/cuda_check.hpp: what a failed CUDA, cuDNN, cuBLAS or NCCL call throws. The libraries' error strings need no
// GPU, so these cases run in every CUDA build; a build without CUDA skips them.
#include <gtest/gtest.h>

#include <string>

#include "core/errors.hpp"
#ifdef DTNN_HAVE_CUDA
#include "core/cuda_check.hpp"
#endif

namespace dtnn {
namespace {

#ifdef DTNN_HAVE_CUDA
// Stand-ins for calls that fail, so that the checks see a library's error without a GPU.
cudaError_t cuda_call_that_fails(int) { return cudaErrorInvalidValue; }
cudnnStatus_t cudnn_call_that_fails() { return CUDNN_STATUS_BAD_PARAM; }
cublasStatus_t cublas_call_that_fails() { return CUBLAS_STATUS_INVALID_VALUE; }
ncclResult_t nccl_call_that_fails() { return ncclInvalidArgument; }

// The message of what `check` throws, "" where it throws nothing, or "not a RuntimeError".
template <typename Check>
std::string message_of(Check&& check) {
  try {
    check();
  } catch (const RuntimeError& e) {
    return e.what();
  } catch (...) {
    return "not a RuntimeError";
  }
  return "";
}
#endif

TEST(CudaCheckTest, FailureNamesTheCallTheLibrarysErrorAndWhere) {
#ifndef DTNN_HAVE_CUDA
  GTEST_SKIP() << "build without CUDA";
#else
  const int line = __LINE__ + 1;
  const std::string cuda = message_of([] { DTNN_CUDA_CHECK(cuda_call_that_fails(7)); });
  EXPECT_EQ(cuda, std::string("cuda_call_that_fails(7) failed: ") + cudaGetErrorString(cudaErrorInvalidValue) +
                      " (cudaErrorInvalidValue) (tests/cuda/test_cuda_check.cpp:" + std::to_string(line) + ")");

  const std::string cudnn = message_of([] { DTNN_CUDNN_CHECK(cudnn_call_that_fails(), "conv2d [n=2]"); });
  EXPECT_EQ(cudnn.find("conv2d [n=2]: cudnn_call_that_fails() failed: "), 0u) << cudnn;
  EXPECT_NE(cudnn.find(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM)), std::string::npos) << cudnn;

  const std::string cublas =
      message_of([] { DTNN_CUBLAS_CHECK(cublas_call_that_fails(), std::string("dense_fwd")); });
  EXPECT_EQ(cublas.find("dense_fwd: cublas_call_that_fails() failed: "), 0u) << cublas;
  EXPECT_NE(cublas.find(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE)), std::string::npos) << cublas;

  const std::string nccl = message_of([] { DTNN_NCCL_CHECK(nccl_call_that_fails(), "NCCL gradients"); });
  EXPECT_EQ(nccl.find("NCCL gradients: nccl_call_that_fails() failed: NCCL "), 0u) << nccl;
  EXPECT_NE(nccl.find(ncclGetErrorString(ncclInvalidArgument)), std::string::npos) << nccl;
  EXPECT_NE(nccl.find("(tests/cuda/test_cuda_check.cpp:"), std::string::npos) << nccl;
#endif
}

TEST(CudaCheckTest, SuccessThrowsNothingAndBuildsNoContext) {
#ifndef DTNN_HAVE_CUDA
  GTEST_SKIP() << "build without CUDA";
#else
  int contexts = 0;
  const auto context = [&] {
    ++contexts;
    return std::string("never built");
  };
  EXPECT_EQ(message_of([&] { DTNN_CUDA_CHECK(cudaSuccess, context()); }), "");
  EXPECT_EQ(message_of([&] { DTNN_CUDNN_CHECK(CUDNN_STATUS_SUCCESS, context()); }), "");
  EXPECT_EQ(message_of([&] { DTNN_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS, context()); }), "");
  EXPECT_EQ(message_of([&] { DTNN_NCCL_CHECK(ncclSuccess, context()); }), "");
  EXPECT_EQ(contexts, 0);
#endif
}

}  // namespace
}  // namespace dtnn
