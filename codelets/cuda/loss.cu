// SPDX-License-Identifier: Apache-2.0
// Losses after codelets/cpu/loss.cpp, operation for operation. Where a sum runs in a tree rather than in the CPU's
// order, the terms are still those of the CPU; __dmul_rn keeps nvcc from fusing a product into the following
// addition where the host (no FMA in the x86-64 baseline) rounds twice.
#include "codelets/cuda/launch.cuh"
#include "codelets/cuda/loss.hpp"
#include "core/loss_stats.hpp"

namespace dtnn::kernels::cuda {
namespace {

using std::size_t;

// One block per row; each row's metrics go to scratch [n, kLossStats] in double, then one thread per metric adds
// the rows in row order, as the CPU does.
constexpr int kRowThreads = 128;

// Running argmax with the CPU's rule "z[j] > z[arg]" from arg = 0: the first index of the largest non-NaN value,
// or 0 whenever z[0] is NaN (no comparison with a NaN holds). Candidates of one thread come in increasing index.
struct ArgMax {
  float v;
  int i;  // -1: no candidate
};

__device__ inline void consider(ArgMax& a, float v, int j) {
  if (!isnan(v) && (a.i < 0 || v > a.v)) {
    a.v = v;
    a.i = j;
  }
}

// Larger value first, the lower index on ties (-0 == +0 counts as a tie, as in the CPU's comparison).
__device__ inline ArgMax pick(ArgMax a, ArgMax b) {
  if (b.i < 0) return a;
  if (a.i < 0) return b;
  return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
}

// The argmax of a row of `cols` values (cols >= 1) and of a second row, from every thread's candidates.
__device__ void block_argmax2(ArgMax& a, ArgMax& b, ArgMax* sa, ArgMax* sb) {
  const int tid = static_cast<int>(threadIdx.x);
  sa[tid] = a;
  sb[tid] = b;
  __syncthreads();
  for (int s = kRowThreads / 2; s > 0; s >>= 1) {
    if (tid < s) {
      sa[tid] = pick(sa[tid], sa[tid + s]);
      sb[tid] = pick(sb[tid], sb[tid + s]);
    }
    __syncthreads();
  }
  a = sa[0];
  b = sb[0];
  __syncthreads();
}

// Sums each of K values over the block in a fixed tree; every thread gets the totals.
template <int K>
__device__ void block_sums(double (&v)[K], double (*buf)[kRowThreads]) {
  const int tid = static_cast<int>(threadIdx.x);
  for (int k = 0; k < K; ++k) buf[k][tid] = v[k];
  __syncthreads();
  for (int s = kRowThreads / 2; s > 0; s >>= 1) {
    if (tid < s) {
      for (int k = 0; k < K; ++k) buf[k][tid] += buf[k][tid + s];
    }
    __syncthreads();
  }
  for (int k = 0; k < K; ++k) v[k] = buf[k][0];
  __syncthreads();
}

constexpr int kStats = kLossStats;

// argmax(z) and argmax(t) of one row as the CPU's hits() finds them.
__device__ void row_argmaxes(const float* z, const float* t, int cols, ArgMax* sz, ArgMax* st, int& arg_z,
                             int& arg_t) {
  ArgMax bz{0.0f, -1};
  ArgMax bt{0.0f, -1};
  for (int j = static_cast<int>(threadIdx.x); j < cols; j += kRowThreads) {
    consider(bz, z[j], j);
    consider(bt, t[j], j);
  }
  block_argmax2(bz, bt, sz, st);
  arg_z = isnan(z[0]) ? 0 : bz.i;
  arg_t = isnan(t[0]) ? 0 : bt.i;
}

// dlogits may alias logits: each value of dz is written by the thread that last reads that logit, after the
// barriers that follow every read of another thread's logits (z[0], z[arg_z], z[arg_t]).
__global__ void softmax_xent_rows(int n, int cols, const float* logits, const float* __restrict__ targets,
                                  float grad_scale, float* dlogits, double* __restrict__ rows) {
  __shared__ ArgMax sz[kRowThreads];
  __shared__ ArgMax st[kRowThreads];
  __shared__ double buf[4][kRowThreads];
  const int tid = static_cast<int>(threadIdx.x);
  for (int i = static_cast<int>(blockIdx.x); i < n; i += static_cast<int>(gridDim.x)) {
    const float* z = logits + static_cast<size_t>(i) * cols;
    const float* t = targets + static_cast<size_t>(i) * cols;
    float* dz = dlogits + static_cast<size_t>(i) * cols;
    int arg_z = 0;
    int arg_t = 0;
    row_argmaxes(z, t, cols, sz, st, arg_z, arg_t);
    const float shift = z[arg_z];
    const float target_logit = z[arg_t];

    // above, target_sum, target_dot = sum t * (z - shift), denom
    double s[4] = {0.0, 0.0, 0.0, 0.0};
    for (int j = tid; j < cols; j += kRowThreads) {
      const float zj = z[j];
      const float tj = t[j];
      s[0] += zj > target_logit ? 1.0 : 0.0;
      const float shifted = zj - shift;
      s[1] += static_cast<double>(tj);
      s[2] += static_cast<double>(tj) * static_cast<double>(shifted);
      s[3] += static_cast<double>(expf(shifted));
    }
    block_sums<4>(s, buf);
    const double denom = s[3];
    const double loss = __dmul_rn(s[1], log(denom)) - s[2];
    const double inv_denom = 1.0 / denom;

    double e[2] = {0.0, 0.0};  // squared, absolute
    for (int j = tid; j < cols; j += kRowThreads) {
      const double p = __dmul_rn(static_cast<double>(expf(z[j] - shift)), inv_denom);
      const double diff = p - static_cast<double>(t[j]);
      e[0] += __dmul_rn(diff, diff);
      e[1] += fabs(diff);
      dz[j] = static_cast<float>(diff * static_cast<double>(grad_scale));
    }
    block_sums<2>(e, buf);
    if (tid == 0) {
      double* r = rows + static_cast<size_t>(i) * kStats;
      r[kLossSum] = loss;
      r[kCorrect] = arg_z == arg_t ? 1.0 : 0.0;
      r[kTop5Correct] = s[0] < 5.0 ? 1.0 : 0.0;
      r[kSquaredError] = e[0] / static_cast<double>(cols);
      r[kAbsoluteError] = e[1] / static_cast<double>(cols);
    }
  }
}

__global__ void sigmoid_bce_rows(int n, int cols, const float* logits, const float* __restrict__ targets,
                                 double scale, float* dlogits, double* __restrict__ rows) {
  __shared__ ArgMax sz[kRowThreads];
  __shared__ ArgMax st[kRowThreads];
  __shared__ double buf[4][kRowThreads];
  const int tid = static_cast<int>(threadIdx.x);
  for (int i = static_cast<int>(blockIdx.x); i < n; i += static_cast<int>(gridDim.x)) {
    const float* z = logits + static_cast<size_t>(i) * cols;
    const float* t = targets + static_cast<size_t>(i) * cols;
    float* dz = dlogits + static_cast<size_t>(i) * cols;
    int arg_z = 0;
    int arg_t = 0;
    row_argmaxes(z, t, cols, sz, st, arg_z, arg_t);
    const float target_logit = z[arg_t];
    // Every thread holds target_logit before any dz is written (dz may alias z).
    __syncthreads();

    double s[4] = {0.0, 0.0, 0.0, 0.0};  // above, row loss, squared, absolute
    for (int j = tid; j < cols; j += kRowThreads) {
      const float zj = z[j];
      s[0] += zj > target_logit ? 1.0 : 0.0;
      const double x = zj;
      const double y = t[j];
      // std::max(x, 0.0) is "x < 0 ? 0 : x", which keeps a NaN (fmax would drop it).
      const double relu = x < 0.0 ? 0.0 : x;
      s[1] += relu - __dmul_rn(x, y) + log1p(exp(-fabs(x)));
      const double p = x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
      const double diff = p - y;
      s[2] += __dmul_rn(diff, diff);
      s[3] += fabs(diff);
      dz[j] = static_cast<float>(diff * scale);
    }
    block_sums<4>(s, buf);
    if (tid == 0) {
      double* r = rows + static_cast<size_t>(i) * kStats;
      r[kLossSum] = s[1] / static_cast<double>(cols);
      r[kCorrect] = arg_z == arg_t ? 1.0 : 0.0;
      r[kTop5Correct] = s[0] < 5.0 ? 1.0 : 0.0;
      r[kSquaredError] = s[2] / static_cast<double>(cols);
      r[kAbsoluteError] = s[3] / static_cast<double>(cols);
    }
  }
}

// The argmax of a row of `cols` values from every thread's candidates (cols >= 1).
__device__ ArgMax block_argmax(ArgMax a, ArgMax* sa) {
  const int tid = static_cast<int>(threadIdx.x);
  sa[tid] = a;
  __syncthreads();
  for (int s = kRowThreads / 2; s > 0; s >>= 1) {
    if (tid < s) sa[tid] = pick(sa[tid], sa[tid + s]);
    __syncthreads();
  }
  a = sa[0];
  __syncthreads();
  return a;
}

constexpr int kTokenStats = kTokenLossStats;

// codelets/cpu/loss.cpp's token_xent_fwd_bwd, a block per row. An ignored row gets a zero gradient and adds nothing;
// a target outside [0, cols) cannot throw here: its row counts with a NaN loss and a NaN gradient, which the step's
// finiteness check reports. dlogits may alias logits, as in softmax_xent_rows: each dz[j] is written by the thread
// that reads z[j], after the barriers that follow every read of another thread's logits (z[y], z[arg_z]).
__global__ void token_xent_rows(int n, int cols, const float* logits, const std::int32_t* __restrict__ targets,
                                TokenXentParams p, double spread, float grad_scale, float* dlogits,
                                double* __restrict__ rows) {
  __shared__ ArgMax sz[kRowThreads];
  __shared__ double buf[3][kRowThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const double smoothing = p.label_smoothing;
  for (int i = static_cast<int>(blockIdx.x); i < n; i += static_cast<int>(gridDim.x)) {
    const float* z = logits + static_cast<size_t>(i) * cols;
    float* dz = dlogits + static_cast<size_t>(i) * cols;
    double* r = rows + static_cast<size_t>(i) * kTokenStats;
    const std::int32_t target = targets[i];
    if (target == p.ignore_index || target < 0 || target >= cols) {
      const bool ignored = target == p.ignore_index;
      for (int j = tid; j < cols; j += kRowThreads) dz[j] = ignored ? 0.0f : NAN;
      if (tid == 0) {
        for (int k = 0; k < kTokenStats; ++k) r[k] = 0.0;
        if (!ignored) {
          r[kLossSum] = NAN;
          r[kCounted] = 1.0;
        }
      }
      continue;
    }
    const int y = target;
    const float target_logit = z[y];
    ArgMax bz{0.0f, -1};
    double above = 0.0;
    for (int j = tid; j < cols; j += kRowThreads) {
      const float zj = z[j];
      consider(bz, zj, j);
      above += zj > target_logit ? 1.0 : 0.0;
    }
    bz = block_argmax(bz, sz);
    const int arg_z = isnan(z[0]) ? 0 : bz.i;
    const float shift = z[arg_z];
    const float target_shifted = target_logit - shift;

    double s[2] = {0.0, 0.0};  // sum of (z - shift), denom
    for (int j = tid; j < cols; j += kRowThreads) {
      const float shifted = z[j] - shift;
      s[0] += static_cast<double>(shifted);
      s[1] += static_cast<double>(expf(shifted));
    }
    block_sums<2>(s, buf);
    const double loss = log(s[1]) - __dmul_rn(1.0 - smoothing, static_cast<double>(target_shifted)) -
                        __dmul_rn(spread, s[0]);
    const double inv_denom = 1.0 / s[1];

    double e[3] = {0.0, 0.0, above};  // squared, absolute, and the logits above the target's
    for (int j = tid; j < cols; j += kRowThreads) {
      const double t = spread + (j == y ? 1.0 - smoothing : 0.0);
      const double diff = __dmul_rn(static_cast<double>(expf(z[j] - shift)), inv_denom) - t;
      e[0] += __dmul_rn(diff, diff);
      e[1] += fabs(diff);
      dz[j] = static_cast<float>(diff * static_cast<double>(grad_scale));
    }
    block_sums<3>(e, buf);
    if (tid == 0) {
      r[kLossSum] = loss;
      r[kCorrect] = arg_z == y ? 1.0 : 0.0;
      r[kTop5Correct] = e[2] < 5.0 ? 1.0 : 0.0;
      r[kSquaredError] = e[0] / static_cast<double>(cols);
      r[kAbsoluteError] = e[1] / static_cast<double>(cols);
      r[kCounted] = 1.0;
    }
  }
}

// stats[k] = the rows' metric k added in row order (0 for no rows), rounded once to float; K metrics a row.
template <int K>
__global__ void loss_stats_sum(int n, const double* __restrict__ rows, float* __restrict__ stats) {
  const int k = static_cast<int>(threadIdx.x);
  if (k >= K) return;
  double acc = 0.0;
  for (int i = 0; i < n; ++i) acc += rows[static_cast<size_t>(i) * K + k];
  stats[k] = static_cast<float>(acc);
}

unsigned row_blocks(int n) { return static_cast<unsigned>(n < static_cast<int>(kMaxBlocks) ? n : kMaxBlocks); }

}  // namespace

std::size_t loss_scratch_bytes(int n) { return static_cast<size_t>(n > 0 ? n : 1) * kStats * sizeof(double); }

std::size_t token_loss_scratch_bytes(int n) {
  return static_cast<size_t>(n > 0 ? n : 1) * kTokenStats * sizeof(double);
}

void softmax_xent_fwd_bwd(int n, int classes, const float* logits, const float* targets, float grad_scale,
                          float* dlogits, float* stats, void* scratch, cudaStream_t stream) {
  auto* rows = static_cast<double*>(scratch);
  const int used = classes > 0 && n > 0 ? n : 0;
  if (used > 0) {
    softmax_xent_rows<<<row_blocks(used), kRowThreads, 0, stream>>>(used, classes, logits, targets, grad_scale,
                                                                     dlogits, rows);
  }
  loss_stats_sum<kStats><<<1, 32, 0, stream>>>(used, rows, stats);
}

void sigmoid_bce_fwd_bwd(int n, int classes, const float* logits, const float* targets, float grad_scale,
                         float* dlogits, float* stats, void* scratch, cudaStream_t stream) {
  auto* rows = static_cast<double*>(scratch);
  const int used = classes > 0 && n > 0 ? n : 0;
  // As the CPU: grad_scale / classes in double.
  const double scale = static_cast<double>(grad_scale) / static_cast<double>(classes > 0 ? classes : 1);
  if (used > 0) {
    sigmoid_bce_rows<<<row_blocks(used), kRowThreads, 0, stream>>>(used, classes, logits, targets, scale, dlogits,
                                                                    rows);
  }
  loss_stats_sum<kStats><<<1, 32, 0, stream>>>(used, rows, stats);
}

void token_xent_fwd_bwd(int n, int classes, const float* logits, const std::int32_t* targets,
                        const TokenXentParams& p, float grad_scale, float* dlogits, float* stats, void* scratch,
                        cudaStream_t stream) {
  auto* rows = static_cast<double*>(scratch);
  const int used = classes > 0 && n > 0 ? n : 0;
  // As the CPU: label_smoothing / classes in double.
  const double spread = classes > 0 ? static_cast<double>(p.label_smoothing) / static_cast<double>(classes) : 0.0;
  if (used > 0) {
    token_xent_rows<<<row_blocks(used), kRowThreads, 0, stream>>>(used, classes, logits, targets, p, spread,
                                                                   grad_scale, dlogits, rows);
  }
  loss_stats_sum<kTokenStats><<<1, 32, 0, stream>>>(used, rows, stats);
}

}  // namespace dtnn::kernels::cuda
