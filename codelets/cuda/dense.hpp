// SPDX-License-Identifier: Apache-2.0
// CUDA dense (fully connected) kernels on cuBLAS (the bias they add is codelets/cuda/elementwise.hpp's). Same
// contracts as kernels::cpu::dense_* (codelets/cpu/kernels.hpp): row-major fp32, outputs overwritten. Launchers only
// enqueue on `stream` (the stream the cuBLAS handle is bound to) and return; they throw dtnn::RuntimeError when a
// library call fails. cuBLAS runs in its default math mode, which never trades
// fp32 for TF32, so results match the CPU's to fp32 rounding; with tf32 (--precision tf32) in
// CUBLAS_TF32_TENSOR_OP_MATH (PyTorch's allow_tf32 for matmuls). No StarPU here.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace dtnn::kernels::cuda {

// y[n, out] = x[n, in] * w[out, in]^T + b[out] (b nullable), then ReLU when relu != 0.
void dense_fwd(int n, int in, int out, const float* x, const float* w, const float* b, int relu, float* y,
               cublasHandle_t cublas, cudaStream_t stream, bool tf32 = false);
// dx[n, in] = dy[n, out] * w[out, in]
void dense_bwd_data(int n, int in, int out, const float* dy, const float* w, float* dx, cublasHandle_t cublas,
                    cudaStream_t stream, bool tf32 = false);
// dw[out, in] = dy^T * x; db[out] (nullable) = sum over the n rows of dy, added in row order in fp32 as on the CPU.
void dense_bwd_weights(int n, int in, int out, const float* x, const float* dy, float* dw, float* db,
                       cublasHandle_t cublas, cudaStream_t stream, bool tf32 = false);
// kernels::cpu::dense_bwd_weights_in_order: dw[out, in] (+)= dy_g^T x_g for the groups of `rows` rows one after
// the other, onto zeros when accumulate == 0; db (nullable) likewise, the rows added in order in fp32, the CPU's
// bits. dw: the CPU's to fp32 rounding (cuBLAS), the same bits for any split of the groups into calls (dense.cu says
// on what condition).
void dense_bwd_weights_in_order(int groups, int rows, int in, int out, const float* x, const float* dy, int accumulate,
                                float* dw, float* db, cublasHandle_t cublas, cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
