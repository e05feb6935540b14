// SPDX-License-Identifier: Apache-2.0

#include "codelets/cuda/dense.hpp"
#include "codelets/cuda/elementwise.hpp"
#include "codelets/cuda/launch.cuh"
#include "core/cuda_check.hpp"

namespace dtnn::kernels::cuda {
namespace {

// The worker's handle is shared by every codelet of the worker: state that changes results is set on each call
// rather than assumed. The default math mode never lowers fp32 GEMMs to TF32; CUBLAS_TF32_TENSOR_OP_MATH does, for
// --precision tf32.
void prepare(cublasHandle_t cublas, const char* what, bool tf32 = false) {
  DTNN_CUBLAS_CHECK(cublasSetMathMode(cublas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), what);
  DTNN_CUBLAS_CHECK(cublasSetPointerMode(cublas, CUBLAS_POINTER_MODE_HOST), what);
}

// Column-major C(m x n) = op(A) * op(B), beta = 0 (C overwritten). Row-major matrices are their transposes.
void sgemm(cublasHandle_t cublas, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* a,
           int lda, const float* b, int ldb, float* c, int ldc, const char* what) {
  const float alpha = 1.0f;
  const float beta = 0.0f;
  DTNN_CUBLAS_CHECK(cublasSgemm(cublas, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc), what);
}

void zero(float* p, std::size_t count, cudaStream_t stream, const char* what) {
  DTNN_CUDA_CHECK(cudaMemsetAsync(p, 0, count * sizeof(float), stream), what);
}

// db[j] = ((0 + dy[0, j]) + dy[1, j]) + ...: one thread per column, rows in order, in fp32 — the CPU's order, so
// the result is the CPU's bit for bit.
__global__ void column_sums_kernel(int n, int out, const float* __restrict__ dy, float* __restrict__ db) {
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= out) {
    return;
  }
  float acc = 0.0f;
  for (int i = 0; i < n; ++i) {
    acc += dy[static_cast<std::size_t>(i) * static_cast<std::size_t>(out) + static_cast<std::size_t>(j)];
  }
  db[j] = acc;
}

// db[j] = ((db[j] or 0) + dy[0, j]) + dy[1, j] + ...: column_sums_kernel onto what the tiles before left.
__global__ void column_sums_onto_kernel(int n, int out, const float* __restrict__ dy, int accumulate,
                                        float* __restrict__ db) {
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= out) {
    return;
  }
  float acc = accumulate != 0 ? db[j] : 0.0f;
  for (int i = 0; i < n; ++i) {
    acc += dy[static_cast<std::size_t>(i) * static_cast<std::size_t>(out) + static_cast<std::size_t>(j)];
  }
  db[j] = acc;
}

}  // namespace

void dense_fwd(int n, int in, int out, const float* x, const float* w, const float* b, int relu, float* y,
               cublasHandle_t cublas, cudaStream_t stream, bool tf32) {
  if (n <= 0 || out <= 0) {
    return;
  }
  if (in <= 0) {
    zero(y, static_cast<std::size_t>(n) * static_cast<std::size_t>(out), stream, "dense_fwd");
  } else {
    prepare(cublas, "dense_fwd", tf32);
    // y^T (out x n) = w (out x in; w^T as stored) * x^T (in x n; as stored)
    sgemm(cublas, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, w, in, x, in, y, out, "dense_fwd");
  }
  // The bias and the fused ReLU in one pass (nothing when neither).
  bias_add_fwd(n, out, 1, b, relu, y, stream);
}

void dense_bwd_data(int n, int in, int out, const float* dy, const float* w, float* dx, cublasHandle_t cublas,
                    cudaStream_t stream, bool tf32) {
  if (n <= 0 || in <= 0) {
    return;
  }
  if (out <= 0) {
    zero(dx, static_cast<std::size_t>(n) * static_cast<std::size_t>(in), stream, "dense_bwd_data");
    return;
  }
  prepare(cublas, "dense_bwd_data", tf32);
  // dx^T (in x n) = w^T (in x out; as stored) * dy^T (out x n; as stored)
  sgemm(cublas, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, w, in, dy, out, dx, in, "dense_bwd_data");
}

void dense_bwd_weights(int n, int in, int out, const float* x, const float* dy, float* dw, float* db,
                       cublasHandle_t cublas, cudaStream_t stream, bool tf32) {
  if (out <= 0) {
    return;
  }
  if (in > 0) {
    if (n <= 0) {
      zero(dw, static_cast<std::size_t>(out) * static_cast<std::size_t>(in), stream, "dense_bwd_weights");
    } else {
      prepare(cublas, "dense_bwd_weights", tf32);
      // dw^T (in x out) = x^T (in x n; as stored) * dy (n x out; dy^T as stored, transposed)
      sgemm(cublas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, x, in, dy, out, dw, in, "dense_bwd_weights");
    }
  }
  if (db != nullptr) {
    const unsigned blocks = static_cast<unsigned>((out + kThreads - 1) / kThreads);
    column_sums_kernel<<<blocks, kThreads, 0, stream>>>(n < 0 ? 0 : n, out, dy, db);
  }
}

void dense_bwd_weights_in_order(int groups, int rows, int in, int out, const float* x, const float* dy, int accumulate,
                                float* dw, float* db, cublasHandle_t cublas, cudaStream_t stream) {
  if (out <= 0) {
    return;
  }
  const int all_rows = (groups > 0 ? groups : 0) * (rows > 0 ? rows : 0);
  if (db != nullptr) {
    const unsigned blocks = static_cast<unsigned>((out + kThreads - 1) / kThreads);
    column_sums_onto_kernel<<<blocks, kThreads, 0, stream>>>(all_rows, out, dy, accumulate, db);
  }
  if (in <= 0) {
    return;
  }
  const std::size_t weights = static_cast<std::size_t>(out) * static_cast<std::size_t>(in);
  if (accumulate == 0) {
    zero(dw, weights, stream, "dense_bwd_weights_in_order");
  }
  if (rows <= 0 || groups <= 0) {
    return;
  }
  prepare(cublas, "dense_bwd_weights_in_order");
  const float alpha = 1.0f;
  const float beta = 1.0f;
  // One GEMM per group onto what the ones before left, as the CPU: dw^T (in x out) += x_g^T (in x rows; as stored)
  // * dy_g (rows x out; dy_g^T as stored, transposed). Every call has one group's shape whatever the tile holding
  // it, so the bits depend on the groups' order only, provided cuBLAS's choice of kernel does not depend on the
  // tiles either: it may on the operands' alignment, which a group keeps for any split when rows x in and rows x
  // out are multiples of 4 (every zoo model's). cuBLAS's order of the products is not BLIS's: the CPU's result to
  // fp32 rounding.
  for (int g = 0; g < groups; ++g) {
    const std::size_t first = static_cast<std::size_t>(g) * static_cast<std::size_t>(rows);
    DTNN_CUBLAS_CHECK(cublasSgemm(cublas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, &alpha,
                                  x + first * static_cast<std::size_t>(in), in,
                                  dy + first * static_cast<std::size_t>(out), out, &beta, dw, in),
                      "dense_bwd_weights_in_order");
  }
}

}  // namespace dtnn::kernels::cuda
