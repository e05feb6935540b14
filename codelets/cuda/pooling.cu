// SPDX-License-Identifier: Apache-2.0
// Mirrors codelets/cpu/pooling.cpp operation by operation, their 2x2 fast paths
// included (they round differently: a float sum, a plain store), so that a task writes the same bits on a CPU and a
// CUDA worker.
#include <cmath>

#include "codelets/cuda/launch.cuh"
#include "codelets/cuda/plane_sums.cuh"
#include "codelets/cuda/pooling.hpp"

namespace dtnn::kernels::cuda {
namespace {

using std::size_t;

size_t planes_of(const Pool2dGeometry& g) {
  return static_cast<size_t>(g.n > 0 ? g.n : 0) * static_cast<size_t>(g.c > 0 ? g.c : 0);
}

size_t in_plane_of(const Pool2dGeometry& g) {
  return static_cast<size_t>(g.h > 0 ? g.h : 0) * static_cast<size_t>(g.w > 0 ? g.w : 0);
}

size_t out_plane_of(const Pool2dGeometry& g) {
  return static_cast<size_t>(g.out_h > 0 ? g.out_h : 0) * static_cast<size_t>(g.out_w > 0 ? g.out_w : 0);
}

// The windows [lo, hi] along one axis that contain input cell i: o * stride - pad <= i < o * stride - pad + kernel,
// 0 <= o < out. Empty when lo > hi.
struct WindowRange {
  int lo, hi;
};

__device__ inline WindowRange windows_containing(int i, int kernel, int stride, int pad, int out) {
  const int first = i + pad - kernel + 1;
  const int lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  const int last = (i + pad) / stride;
  return WindowRange{lo, last < out - 1 ? last : out - 1};
}

// ---- Max pooling ----

// The CPU's for_each_window_argmax for one window: the index within the plane of its winner, -1 when the window
// lies wholly in padding. Strict ">" keeps the first maximum in row-major order; "best < 0" lets a window of -inf
// values pick a real cell; the first NaN wins and stays.
__device__ long long window_argmax(const Pool2dGeometry& g, const float* plane, int oy, int ox) {
  const PoolSpan r = pool_span(oy, g.h, g.kh, g.stride_h, g.pad_h);
  const PoolSpan c = pool_span(ox, g.w, g.kw, g.stride_w, g.pad_w);
  long long best = -1;
  float best_value = -INFINITY;
  for (int iy = r.lo; iy < r.hi; ++iy) {
    const float* row = plane + static_cast<size_t>(iy) * static_cast<size_t>(g.w);
    for (int ix = c.lo; ix < c.hi; ++ix) {
      const float v = row[ix];
      if (best < 0 || v > best_value || (isnan(v) && !isnan(best_value))) {
        best_value = v;
        best = static_cast<long long>(iy) * g.w + ix;
      }
    }
  }
  return best;
}

__global__ void maxpool2d_fwd_kernel(Pool2dGeometry g, size_t count, size_t in_plane, size_t out_plane,
                                     const float* __restrict__ x, float* __restrict__ y) {
  DTNN_GRID_STRIDE(e, count) {
    const size_t p = e / out_plane;
    const int o = static_cast<int>(e - p * out_plane);
    const int oy = o / g.out_w;
    const int ox = o - oy * g.out_w;
    const float* xp = x + p * in_plane;
    const long long best = window_argmax(g, xp, oy, ox);
    y[e] = best < 0 ? -INFINITY : xp[best];
  }
}

// One thread per input cell: the gradients of the windows whose winner it is, added in output order from 0 as
// the CPU adds them; with disjoint 2x2 windows the CPU stores the one gradient instead (which keeps a -0).
__global__ void maxpool2d_bwd_data_kernel(Pool2dGeometry g, int plain, size_t count, size_t in_plane,
                                          size_t out_plane, const float* __restrict__ x,
                                          const float* __restrict__ dy, float* __restrict__ dx) {
  DTNN_GRID_STRIDE(e, count) {
    const size_t p = e / in_plane;
    const int cell = static_cast<int>(e - p * in_plane);
    const int iy = cell / g.w;
    const int ix = cell - iy * g.w;
    const float* xp = x + p * in_plane;
    const float* dyp = dy + p * out_plane;
    const WindowRange rows = windows_containing(iy, g.kh, g.stride_h, g.pad_h, g.out_h);
    const WindowRange cols = windows_containing(ix, g.kw, g.stride_w, g.pad_w, g.out_w);
    float acc = 0.0f;
    for (int oy = rows.lo; oy <= rows.hi; ++oy) {
      for (int ox = cols.lo; ox <= cols.hi; ++ox) {
        if (window_argmax(g, xp, oy, ox) == cell) {
          const float d = dyp[static_cast<size_t>(oy) * static_cast<size_t>(g.out_w) + static_cast<size_t>(ox)];
          acc = plain ? d : __fadd_rn(acc, d);
        }
      }
    }
    dx[e] = acc;
  }
}

// ---- Average pooling ----

// The CPU's Span: a window's cells inside the input and its divisor's count along one axis.
struct Span {
  int lo, hi, counted;
};

__device__ inline Span span_of(int o, int in, int kernel, int stride, int pad, int count_include_pad) {
  const PoolSpan w = pool_span(o, in, kernel, stride, pad);
  return Span{w.lo, w.hi, count_include_pad ? w.padded : w.hi - w.lo};
}

__device__ inline double divisor(const Span& r, const Span& c) {
  const int cells = r.counted * c.counted;
  return static_cast<double>(cells > 1 ? cells : 1);
}

__global__ void avgpool2d_fwd_kernel(Pool2dGeometry g, int count_include_pad, int plain, size_t count,
                                     size_t in_plane, size_t out_plane, const float* __restrict__ x,
                                     float* __restrict__ y) {
  DTNN_GRID_STRIDE(e, count) {
    const size_t p = e / out_plane;
    const int o = static_cast<int>(e - p * out_plane);
    const int oy = o / g.out_w;
    const int ox = o - oy * g.out_w;
    const float* xp = x + p * in_plane;
    if (plain) {
      const float* r0 = xp + static_cast<size_t>(2 * oy) * static_cast<size_t>(g.w) + 2 * ox;
      const float* r1 = r0 + g.w;
      y[e] = __fmul_rn(__fadd_rn(__fadd_rn(r0[0], r0[1]), __fadd_rn(r1[0], r1[1])), 0.25f);
      continue;
    }
    const Span r = span_of(oy, g.h, g.kh, g.stride_h, g.pad_h, count_include_pad);
    const Span c = span_of(ox, g.w, g.kw, g.stride_w, g.pad_w, count_include_pad);
    double acc = 0.0;
    for (int iy = r.lo; iy < r.hi; ++iy) {
      const float* row = xp + static_cast<size_t>(iy) * static_cast<size_t>(g.w);
      for (int ix = c.lo; ix < c.hi; ++ix) {
        acc = __dadd_rn(acc, static_cast<double>(row[ix]));
      }
    }
    y[e] = __double2float_rn(__ddiv_rn(acc, divisor(r, c)));
  }
}

__global__ void avgpool2d_bwd_data_kernel(Pool2dGeometry g, int count_include_pad, int plain, size_t count,
                                          size_t in_plane, size_t out_plane, const float* __restrict__ dy,
                                          float* __restrict__ dx) {
  DTNN_GRID_STRIDE(e, count) {
    const size_t p = e / in_plane;
    const int cell = static_cast<int>(e - p * in_plane);
    const int iy = cell / g.w;
    const int ix = cell - iy * g.w;
    const float* dyp = dy + p * out_plane;
    if (plain) {
      // Disjoint windows: the CPU stores dy / 4 in each cell of a window and 0 in the odd trailing row and column.
      dx[e] = iy < 2 * g.out_h && ix < 2 * g.out_w
                  ? __fmul_rn(dyp[static_cast<size_t>(iy / 2) * static_cast<size_t>(g.out_w) + ix / 2], 0.25f)
                  : 0.0f;
      continue;
    }
    const WindowRange rows = windows_containing(iy, g.kh, g.stride_h, g.pad_h, g.out_h);
    const WindowRange cols = windows_containing(ix, g.kw, g.stride_w, g.pad_w, g.out_w);
    float acc = 0.0f;
    for (int oy = rows.lo; oy <= rows.hi; ++oy) {
      const Span r = span_of(oy, g.h, g.kh, g.stride_h, g.pad_h, count_include_pad);
      for (int ox = cols.lo; ox <= cols.hi; ++ox) {
        const Span c = span_of(ox, g.w, g.kw, g.stride_w, g.pad_w, count_include_pad);
        const double d = static_cast<double>(
            dyp[static_cast<size_t>(oy) * static_cast<size_t>(g.out_w) + static_cast<size_t>(ox)]);
        acc = __fadd_rn(acc, __double2float_rn(__ddiv_rn(d, divisor(r, c))));
      }
    }
    dx[e] = acc;
  }
}

// ---- Global average pooling ----

__global__ void global_avgpool2d_fwd_kernel(size_t planes, size_t plane, double inv, const float* __restrict__ x,
                                            float* __restrict__ y) {
  detail::for_each_group(planes, [&](size_t p, bool active) {
    const float* xp = x + p * plane;
    double s[1];
    detail::group_plane_sums<1>(plane, active, [xp](size_t j, double(&t)[1]) { t[0] = static_cast<double>(xp[j]); },
                                s);
    if (active && threadIdx.x % detail::kSumLanes == 0) y[p] = __double2float_rn(__dmul_rn(s[0], inv));
  });
}

__global__ void global_avgpool2d_bwd_data_kernel(size_t count, size_t plane, const float* __restrict__ dy,
                                                 float* __restrict__ dx) {
  DTNN_GRID_STRIDE(e, count) {
    dx[e] = __double2float_rn(__ddiv_rn(static_cast<double>(dy[e / plane]), static_cast<double>(plane)));
  }
}

}  // namespace

void maxpool2d_fwd(const Pool2dGeometry& g, const float* x, float* y, cudaStream_t stream) {
  const size_t count = planes_of(g) * out_plane_of(g);
  if (count == 0 || g.out_h <= 0 || g.out_w <= 0) return;
  maxpool2d_fwd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(g, count, in_plane_of(g), out_plane_of(g), x, y);
}

void maxpool2d_bwd_data(const Pool2dGeometry& g, const float* x, const float* dy, float* dx, cudaStream_t stream) {
  const size_t count = planes_of(g) * in_plane_of(g);
  if (count == 0) return;
  const int plain = g.plain_2x2 && g.out_h > 0 && g.out_w > 0 ? 1 : 0;
  maxpool2d_bwd_data_kernel<<<blocks_for(count), kThreads, 0, stream>>>(g, plain, count, in_plane_of(g),
                                                                        out_plane_of(g), x, dy, dx);
}

void avgpool2d_fwd(const Pool2dGeometry& g, int count_include_pad, const float* x, float* y, cudaStream_t stream) {
  const size_t count = planes_of(g) * out_plane_of(g);
  if (count == 0 || g.out_h <= 0 || g.out_w <= 0) return;
  avgpool2d_fwd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(g, count_include_pad, g.plain_2x2,
                                                                   count, in_plane_of(g), out_plane_of(g), x, y);
}

void avgpool2d_bwd_data(const Pool2dGeometry& g, int count_include_pad, const float* dy, float* dx,
                        cudaStream_t stream) {
  const size_t count = planes_of(g) * in_plane_of(g);
  if (count == 0) return;
  // Without windows (out_h or out_w <= 0) every cell gathers nothing and gets 0, as the CPU zeroes dx.
  avgpool2d_bwd_data_kernel<<<blocks_for(count), kThreads, 0, stream>>>(
      g, count_include_pad, g.plain_2x2, count, in_plane_of(g), out_plane_of(g), dy, dx);
}

void global_avgpool2d_fwd(int n, int c, size_t plane, const float* x, float* y, cudaStream_t stream) {
  const size_t planes = static_cast<size_t>(n > 0 ? n : 0) * static_cast<size_t>(c > 0 ? c : 0);
  if (planes == 0) return;
  // As the CPU: the mean is the sum times 1 / plane, both in double.
  const double inv = plane > 0 ? 1.0 / static_cast<double>(plane) : 0.0;
  global_avgpool2d_fwd_kernel<<<blocks_for(detail::group_threads(planes)), kThreads, 0, stream>>>(planes, plane, inv,
                                                                                                 x, y);
}

void global_avgpool2d_bwd_data(int n, int c, size_t plane, const float* dy, float* dx, cudaStream_t stream) {
  const size_t count = static_cast<size_t>(n > 0 ? n : 0) * static_cast<size_t>(c > 0 ? c : 0) * plane;
  if (count == 0) return;
  global_avgpool2d_bwd_data_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, plane, dy, dx);
}

}  // namespace dtnn::kernels::cuda
