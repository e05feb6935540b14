// SPDX-License-Identifier: Apache-2.0
// Every floating-point operation below is written as the CPU kernel (codelets/cpu/batch_norm.cpp) evaluates it,
// with the _rn intrinsics where nvcc would otherwise fuse a multiply and an add: the CPU build has no FMA.
#include "codelets/cuda/batch_norm.hpp"
#include "codelets/cuda/launch.cuh"
#include "codelets/cuda/plane_sums.cuh"

namespace dtnn::kernels::cuda {
namespace {

using std::size_t;

// ---- Per-sample plane sums: one group of detail::kSumLanes threads per (sample, channel) ----

__global__ void sums_kernel(size_t planes, size_t plane, const float* __restrict__ x, float* __restrict__ partials) {
  detail::for_each_group(planes, [&](size_t g, bool active) {
    const float* xp = x + g * plane;
    double s[1];
    detail::group_plane_sums<1>(plane, active, [xp](size_t j, double(&t)[1]) { t[0] = static_cast<double>(xp[j]); },
                                s);
    if (active && threadIdx.x % detail::kSumLanes == 0) partials[g] = __double2float_rn(s[0]);
  });
}

__global__ void sqdev_sums_kernel(size_t planes, int c, size_t plane, const float* __restrict__ x,
                                  const float* __restrict__ mean, float* __restrict__ partials) {
  detail::for_each_group(planes, [&](size_t g, bool active) {
    const float* xp = x + g * plane;
    const double m = active ? static_cast<double>(mean[g % static_cast<size_t>(c)]) : 0.0;
    double s[1];
    detail::group_plane_sums<1>(
        plane, active,
        [xp, m](size_t j, double(&t)[1]) {
          const double d = __dsub_rn(static_cast<double>(xp[j]), m);
          t[0] = __dmul_rn(d, d);
        },
        s);
    if (active && threadIdx.x % detail::kSumLanes == 0) partials[g] = __double2float_rn(s[0]);
  });
}

// relu_y not null: the gradient is dy masked by relu_y > 0 (kernels::cpu::batch_norm_bwd_sums_masked).
__global__ void bwd_sums_kernel(size_t planes, int c, size_t plane, const float* __restrict__ x,
                                const float* __restrict__ relu_y, const float* __restrict__ dy,
                                const float* __restrict__ mean, const float* __restrict__ invstd,
                                float* __restrict__ partials) {
  detail::for_each_group(planes, [&](size_t g, bool active) {
    const size_t cs = static_cast<size_t>(c);
    const size_t ch = g % cs;
    const float* xp = x + g * plane;
    const float* gp = dy + g * plane;
    const float* yp = relu_y != nullptr ? relu_y + g * plane : nullptr;
    const float m = active ? mean[ch] : 0.0f;
    const float is = active ? invstd[ch] : 0.0f;
    double s[2];
    // xhat in float exactly as the forward pass forms it (see the CPU kernel).
    detail::group_plane_sums<2>(
        plane, active,
        [xp, gp, yp, m, is](size_t j, double(&t)[2]) {
          const float gj = yp == nullptr || yp[j] > 0.0f ? gp[j] : 0.0f;
          const double d = static_cast<double>(gj);
          t[0] = d;
          t[1] = __dmul_rn(d, static_cast<double>(__fmul_rn(__fsub_rn(xp[j], m), is)));
        },
        s);
    if (active && threadIdx.x % detail::kSumLanes == 0) {
      // Row g / c of the [n, 2c] partials: g + (g / c) * c = (g / c) * 2c + ch.
      float* row_ch = partials + g + (g / cs) * cs;
      row_ch[0] = __double2float_rn(s[0]);
      row_ch[cs] = __double2float_rn(s[1]);
    }
  });
}

// ---- Sample-order reduction ----

// The accumulator holds doubles bit-copied into a float buffer (little-endian on host and device alike): double k
// is the 32-bit words 2k (low) and 2k + 1 (high). Word accesses need no 8-byte alignment of the buffer.
__device__ double load_double(const float* acc, size_t k) {
  const auto* w = reinterpret_cast<const unsigned*>(acc);
  return __hiloint2double(static_cast<int>(w[2 * k + 1]), static_cast<int>(w[2 * k]));
}

__device__ void store_double(float* acc, size_t k, double v) {
  auto* w = reinterpret_cast<unsigned*>(acc);
  w[2 * k] = static_cast<unsigned>(__double2loint(v));
  w[2 * k + 1] = static_cast<unsigned>(__double2hiint(v));
}

// One thread per channel: it adds the columns ch, ch + channels, ... (width is channels or 2 * channels) over every
// row in sample order, as kernels::cpu::batch_norm_accumulate, then computes that channel's finish.
__global__ void reduce_kernel(BatchNormReduce r) {
  const size_t channels = static_cast<size_t>(r.channels);
  const size_t width = static_cast<size_t>(r.width);
  DTNN_GRID_STRIDE(ch, channels) {
    double sum[2] = {0.0, 0.0};
    int column = 0;
    for (size_t j = ch; j < width; j += channels, ++column) {
      double s = r.acc_in != nullptr ? load_double(r.acc_in, j) : 0.0;
      for (int src = 0; src < r.nsrc; ++src) {
        const float* p = r.sources[src] + j;
        const int rows = r.rows[src];
        for (int row = 0; row < rows; ++row) {
          s = __dadd_rn(s, static_cast<double>(p[static_cast<size_t>(row) * width]));
        }
      }
      if (r.acc_out != nullptr) store_double(r.acc_out, j, s);
      if (column < 2) sum[column] = s;
    }
    if (r.acc_out != nullptr) continue;
    switch (r.finish) {
      case BatchNormFinish::kMean:
        r.out[0][ch] = __double2float_rn(__ddiv_rn(sum[0], r.count));
        break;
      case BatchNormFinish::kVar: {
        // kernels::cpu::batch_norm_finish_var
        float* stats = r.out[0];
        float* running_mean = r.out[1];
        float* running_var = r.out[2];
        const double m = r.momentum;
        const double keep = __dsub_rn(1.0, m);
        const double bessel = __ddiv_rn(r.count, __dsub_rn(r.count, 1.0));
        const double var = __ddiv_rn(sum[0], r.count);
        stats[channels + ch] = __double2float_rn(__ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(var, r.eps))));
        running_mean[ch] = __double2float_rn(__dadd_rn(__dmul_rn(keep, static_cast<double>(running_mean[ch])),
                                                       __dmul_rn(m, static_cast<double>(stats[ch]))));
        running_var[ch] = __double2float_rn(__dadd_rn(__dmul_rn(keep, static_cast<double>(running_var[ch])),
                                                      __dmul_rn(__dmul_rn(m, var), bessel)));
        if (ch == 0) r.out[3][0] = __fadd_rn(r.out[3][0], 1.0f);
        break;
      }
      case BatchNormFinish::kBwd: {
        // kernels::cpu::batch_norm_finish_bwd
        const double sdy = sum[0];
        const double sdyx = sum[1];
        r.out[0][ch] = __double2float_rn(__ddiv_rn(sdy, r.count));
        r.out[0][channels + ch] = __double2float_rn(__ddiv_rn(sdyx, r.count));
        if (r.out[1] != nullptr) r.out[1][ch] = __double2float_rn(sdyx);
        if (r.out[2] != nullptr) r.out[2][ch] = __double2float_rn(sdy);
        break;
      }
      default:
        break;
    }
  }
}

// ---- Per-element passes ----

__device__ inline int channel_of(size_t e, size_t plane, int c) {
  return static_cast<int>((e / plane) % static_cast<size_t>(c));
}

// The epilogue of kernels::cpu::batch_norm_fwd_fused: + residual (nullable), then ReLU when relu != 0.
__device__ inline float epilogue(float v, const float* __restrict__ residual, int relu, size_t e) {
  if (residual != nullptr) v = __fadd_rn(v, residual[e]);
  if (relu != 0) v = v < 0.0f ? 0.0f : v;
  return v;
}

__global__ void fwd_kernel(size_t count, size_t plane, int c, const float* __restrict__ x,
                           const float* __restrict__ mean, const float* __restrict__ invstd,
                           const float* __restrict__ gamma, const float* __restrict__ beta,
                           const float* __restrict__ residual, int relu, float* __restrict__ y) {
  DTNN_GRID_STRIDE(e, count) {
    const int ch = channel_of(e, plane, c);
    const float s = gamma != nullptr ? __fmul_rn(invstd[ch], gamma[ch]) : invstd[ch];
    const float b = beta != nullptr ? beta[ch] : 0.0f;
    y[e] = epilogue(__fadd_rn(__fmul_rn(__fsub_rn(x[e], mean[ch]), s), b), residual, relu, e);
  }
}

// kernels::cpu::batch_norm_scale_shift: scale_shift[0, c) = scale, [c, 2c) = shift.
__global__ void scale_shift_kernel(int c, double eps, const float* __restrict__ mean, const float* __restrict__ var,
                                   const float* __restrict__ gamma, const float* __restrict__ beta,
                                   float* __restrict__ scale_shift) {
  DTNN_GRID_STRIDE(ch, static_cast<size_t>(c)) {
    const double g = gamma != nullptr ? static_cast<double>(gamma[ch]) : 1.0;
    const double b = beta != nullptr ? static_cast<double>(beta[ch]) : 0.0;
    const double s = __ddiv_rn(g, __dsqrt_rn(__dadd_rn(static_cast<double>(var[ch]), eps)));
    scale_shift[ch] = __double2float_rn(s);
    const double shift = __dsub_rn(b, __dmul_rn(static_cast<double>(mean[ch]), s));
    scale_shift[static_cast<size_t>(c) + ch] = __double2float_rn(shift);
  }
}

__global__ void infer_fwd_kernel(size_t count, size_t plane, int c, const float* __restrict__ x,
                                 const float* __restrict__ scale_shift, const float* __restrict__ residual, int relu,
                                 float* __restrict__ y) {
  DTNN_GRID_STRIDE(e, count) {
    const int ch = channel_of(e, plane, c);
    y[e] = epilogue(__fadd_rn(__fmul_rn(x[e], scale_shift[ch]), scale_shift[c + ch]), residual, relu, e);
  }
}

__global__ void frozen_stats_kernel(int c, double eps, const float* __restrict__ mean, const float* __restrict__ var,
                                    float* __restrict__ stats) {
  DTNN_GRID_STRIDE(ch, static_cast<size_t>(c)) {
    stats[ch] = mean[ch];
    stats[static_cast<size_t>(c) + ch] =
        __double2float_rn(__ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(static_cast<double>(var[ch]), eps))));
  }
}

__global__ void bwd_data_kernel(size_t count, size_t plane, int c, const float* __restrict__ x,
                                const float* __restrict__ relu_y, const float* __restrict__ dy,
                                const float* __restrict__ mean,
                                const float* __restrict__ invstd, const float* __restrict__ gamma,
                                const float* __restrict__ mean_dy, const float* __restrict__ mean_dy_xhat,
                                float* __restrict__ dx) {
  DTNN_GRID_STRIDE(e, count) {
    const int ch = channel_of(e, plane, c);
    const float is = invstd[ch];
    const float k = gamma != nullptr ? __fmul_rn(gamma[ch], is) : is;
    const float g = relu_y == nullptr || relu_y[e] > 0.0f ? dy[e] : 0.0f;
    if (mean_dy == nullptr) {
      dx[e] = __fmul_rn(k, g);
    } else {
      const float xhat = __fmul_rn(__fsub_rn(x[e], mean[ch]), is);
      dx[e] = __fmul_rn(k, __fsub_rn(__fsub_rn(g, mean_dy[ch]), __fmul_rn(xhat, mean_dy_xhat[ch])));
    }
  }
}

size_t planes_of(int n, int c) {
  return static_cast<size_t>(n > 0 ? n : 0) * static_cast<size_t>(c > 0 ? c : 0);
}

}  // namespace

void batch_norm_sums(int n, int c, size_t plane, const float* x, float* partials, cudaStream_t stream) {
  const size_t planes = planes_of(n, c);
  if (planes == 0) return;
  sums_kernel<<<blocks_for(detail::group_threads(planes)), kThreads, 0, stream>>>(planes, plane, x, partials);
}

void batch_norm_sqdev_sums(int n, int c, size_t plane, const float* x, const float* mean, float* partials,
                           cudaStream_t stream) {
  const size_t planes = planes_of(n, c);
  if (planes == 0) return;
  sqdev_sums_kernel<<<blocks_for(detail::group_threads(planes)), kThreads, 0, stream>>>(planes, c, plane, x, mean,
                                                                                        partials);
}

void batch_norm_reduce(const BatchNormReduce& r, cudaStream_t stream) {
  if (r.channels <= 0) return;
  reduce_kernel<<<blocks_for(static_cast<size_t>(r.channels)), kThreads, 0, stream>>>(r);
}

void batch_norm_fwd(int n, int c, size_t plane, const float* x, const float* mean, const float* invstd,
                    const float* gamma, const float* beta, float* y, cudaStream_t stream) {
  batch_norm_fwd_fused(n, c, plane, x, mean, invstd, gamma, beta, nullptr, 0, y, stream);
}

void batch_norm_fwd_fused(int n, int c, size_t plane, const float* x, const float* mean, const float* invstd,
                          const float* gamma, const float* beta, const float* residual, int relu, float* y,
                          cudaStream_t stream) {
  const size_t count = planes_of(n, c) * plane;
  if (count == 0) return;
  fwd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, plane, c, x, mean, invstd, gamma, beta, residual,
                                                         relu, y);
}

void batch_norm_infer_fwd(int n, int c, size_t plane, double eps, const float* x, const float* mean,
                          const float* var, const float* gamma, const float* beta, float* scale_shift, float* y,
                          cudaStream_t stream) {
  batch_norm_infer_fwd_fused(n, c, plane, eps, x, mean, var, gamma, beta, nullptr, 0, scale_shift, y, stream);
}

void batch_norm_infer_fwd_fused(int n, int c, size_t plane, double eps, const float* x, const float* mean,
                                const float* var, const float* gamma, const float* beta, const float* residual,
                                int relu, float* scale_shift, float* y, cudaStream_t stream) {
  const size_t count = planes_of(n, c) * plane;
  if (count == 0) return;
  scale_shift_kernel<<<blocks_for(static_cast<size_t>(c)), kThreads, 0, stream>>>(c, eps, mean, var, gamma, beta,
                                                                                  scale_shift);
  infer_fwd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, plane, c, x, scale_shift, residual, relu, y);
}

void batch_norm_frozen_stats(int c, double eps, const float* mean, const float* var, float* stats,
                             cudaStream_t stream) {
  if (c <= 0) return;
  frozen_stats_kernel<<<blocks_for(static_cast<size_t>(c)), kThreads, 0, stream>>>(c, eps, mean, var, stats);
}

void batch_norm_bwd_sums(int n, int c, size_t plane, const float* x, const float* dy, const float* mean,
                         const float* invstd, float* partials, cudaStream_t stream) {
  batch_norm_bwd_sums_masked(n, c, plane, x, nullptr, dy, mean, invstd, partials, stream);
}

void batch_norm_bwd_sums_masked(int n, int c, size_t plane, const float* x, const float* relu_y, const float* dy,
                                const float* mean, const float* invstd, float* partials, cudaStream_t stream) {
  const size_t planes = planes_of(n, c);
  if (planes == 0) return;
  bwd_sums_kernel<<<blocks_for(detail::group_threads(planes)), kThreads, 0, stream>>>(planes, c, plane, x, relu_y, dy,
                                                                                      mean, invstd, partials);
}

void batch_norm_bwd_data(int n, int c, size_t plane, const float* x, const float* dy, const float* mean,
                         const float* invstd, const float* gamma, const float* mean_dy, const float* mean_dy_xhat,
                         float* dx, cudaStream_t stream) {
  batch_norm_bwd_data_masked(n, c, plane, x, nullptr, dy, mean, invstd, gamma, mean_dy, mean_dy_xhat, dx, stream);
}

void batch_norm_bwd_data_masked(int n, int c, size_t plane, const float* x, const float* relu_y, const float* dy,
                                const float* mean, const float* invstd, const float* gamma, const float* mean_dy,
                                const float* mean_dy_xhat, float* dx, cudaStream_t stream) {
  const size_t count = planes_of(n, c) * plane;
  if (count == 0) return;
  bwd_data_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, plane, c, x, relu_y, dy, mean, invstd, gamma,
                                                              mean_dy, mean_dy_xhat, dx);
}

}  // namespace dtnn::kernels::cuda
