// SPDX-License-Identifier: Apache-2.0
// CUDA convolution on cuDNN's convolution API: fp32 NCHW, groups, stride, dilation, any padding. Same contracts
// as the CPU convolution kernels (codelets/cpu/kernels.hpp, convgemm.hpp): x[n,c,h,w], w[k,c/groups,r,s],
// y[n,k,oh,ow]; every output is overwritten. No StarPU here.
//
// - Numerics: FMA math only (CUDNN_FMA_MATH), never TF32, so that results match the CPU's to fp32 rounding (unless
//   the context asks for TF32, --precision tf32: then CUDNN_DEFAULT_MATH and tensor-core algorithms, PyTorch's
//   allow_tf32; inputs rounded to TF32's 10-bit significand inside cuDNN, sums in fp32); only
//   algorithms that cuDNN reports as deterministic are used, so that results are bitwise reproducible on a given
//   GPU model and cuDNN version; and only direct sums (no FFT or Winograd transforms, whose larger rounding
//   errors BatchNorm's backward amplifies) unless DTNN_CUDNN_ALGORITHMS=all.
// - Algorithms: chosen once per (device, shape, pass) from cuDNN's heuristics (no trial runs, no synchronisation)
//   and cached process-wide; descriptors are cached per thread and shape (each CUDA worker has its own thread and
//   cuDNN handle).
// - Asymmetric padding, which cuDNN descriptors cannot express: cuDNN pads min(top, bottom) and min(left, right)
//   itself, and the remainder comes from a zero-padded copy of x (forward, backward-weights) or a padded dx that
//   is cropped afterwards (backward-data), kept in the workspace.
// - Calls only enqueue work on the stream of `cudnn` and return; a failing library call throws dtnn::RuntimeError.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>

#include "core/shapes.hpp"

namespace dtnn::kernels::cuda {

enum class ConvPass { kFwd = 0, kBwdData = 1, kBwdWeights = 2 };

// What every call needs from the worker: its cuDNN handle, the stream the handle is bound to, and its device id
// (part of the key of the algorithm cache).
struct CudnnContext {
  cudnnHandle_t cudnn;
  cudaStream_t stream;
  int device;
  bool tf32 = false;  // TF32 tensor-core math allowed (descriptors and algorithm choices of their own)
};

// Bytes of device workspace that `pass` needs for this shape (the chosen algorithm's, plus the padded copy for an
// asymmetric padding). The first call for a (device, shape, pass) asks cuDNN's heuristics.
std::size_t conv2d_workspace_bytes(const Conv2dShape& sh, ConvPass pass, const CudnnContext& ctx);

// y = conv(x, w) + b (b nullable), then ReLU ("x < 0 ? 0 : x") when relu != 0.
void conv2d_fwd(const Conv2dShape& sh, const float* x, const float* w, const float* b, int relu, float* y,
                void* workspace, std::size_t workspace_bytes, const CudnnContext& ctx);
// dx = transposed convolution of dy.
void conv2d_bwd_data(const Conv2dShape& sh, const float* dy, const float* w, float* dx, void* workspace,
                     std::size_t workspace_bytes, const CudnnContext& ctx);
// dw = sum over the n samples; db (nullable) = sum of dy over n and the plane, in double (bias_bwd_weights).
void conv2d_bwd_weights(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db,
                        void* workspace, std::size_t workspace_bytes, const CudnnContext& ctx);

}  // namespace dtnn::kernels::cuda
