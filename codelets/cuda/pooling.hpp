// SPDX-License-Identifier: Apache-2.0
// CUDA pooling kernels: launchers that enqueue on a stream and return (no StarPU here, as in codelets/cpu/).
// Same contracts and bits as the CPU kernels (codelets/cpu/pooling.cpp): the same windows (pool_span in
// core/shapes.hpp), the same window scan, tie and NaN rules, the same sums in the same order. Backward passes gather: one thread per input cell adds the gradients
// of the windows that contain it in output order, as the CPU's scatter adds them, with no atomics. cuDNN pooling is
// not used: its output size has no ceil mode, and neither its tie and NaN rules nor its summation order are the
// CPU's, so its results would depend on the kind of worker that ran the task.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/shapes.hpp"

namespace dtnn::kernels::cuda {

// Pool2dShape with what the host works out once per call: the output size (floor or ceil mode) and whether the
// windows are the disjoint 2x2 ones of the CPU's fast paths (Pool2dShape::plain_2x2).
struct Pool2dGeometry {
  int n = 1, c = 1, h = 1, w = 1;
  int kh = 2, kw = 2;
  int stride_h = 2, stride_w = 2;
  int pad_h = 0, pad_w = 0;
  int out_h = 1, out_w = 1;
  int plain_2x2 = 0;
};

inline Pool2dGeometry pool_geometry(const Pool2dShape& s) {
  return Pool2dGeometry{s.n, s.c, s.h, s.w, s.kh, s.kw, s.stride_h, s.stride_w, s.pad_h, s.pad_w,
                        s.out_h(), s.out_w(), s.plain_2x2() ? 1 : 0};
}

// y = maximum of each window: the first maximum in row-major order, padded cells skipped, the first NaN wins;
// -inf for a window wholly in padding.
void maxpool2d_fwd(const Pool2dGeometry& g, const float* x, float* y, cudaStream_t stream);
// dx (overwritten) = dy routed to each window's winner, as the forward pass chose it.
void maxpool2d_bwd_data(const Pool2dGeometry& g, const float* x, const float* dy, float* dx, cudaStream_t stream);
// count_include_pad as kernels::cpu::avgpool2d_fwd.
void avgpool2d_fwd(const Pool2dGeometry& g, int count_include_pad, const float* x, float* y, cudaStream_t stream);
void avgpool2d_bwd_data(const Pool2dGeometry& g, int count_include_pad, const float* dy, float* dx,
                        cudaStream_t stream);
// y[i, c] = mean of the plane x[i, c, :] (double sum in the CPU's lane order)
void global_avgpool2d_fwd(int n, int c, std::size_t plane, const float* x, float* y, cudaStream_t stream);
// dx[i, c, :] = dy[i, c] / plane
void global_avgpool2d_bwd_data(int n, int c, std::size_t plane, const float* dy, float* dx, cudaStream_t stream);

}  // namespace dtnn::kernels::cuda
