// SPDX-License-Identifier: Apache-2.0
// Every arithmetic step below is written with the round-to-nearest intrinsics (__fmul_rn, __fadd_rn, __fsub_rn,
// __fdiv_rn, __fsqrt_rn) in exactly the association of the CPU expression it mirrors (shown in the comment
// above it): nvcc contracts a plain "a * b + c" into an FMA, which the CPU build does not, and the intrinsics
// are never contracted. Scalars the CPU kernels derive from the params (1 - beta, ...) are derived on the host
// here too, with the same fp32 operation.
#include "codelets/cuda/launch.cuh"
#include "codelets/cuda/optimizers.hpp"

namespace dtnn::kernels::cuda {
namespace {

enum SgdVariant : int { kSgdPlain = 0, kSgdMomentum = 1, kSgdNesterov = 2 };

template <int kVariant>
__global__ void sgd_update_kernel(std::size_t count, float lr, float mu, float wd, float* __restrict__ w,
                                  const float* __restrict__ g, float* __restrict__ v) {
  DTNN_GRID_STRIDE(i, count) {
    // grad = g + wd * w
    const float grad = __fadd_rn(g[i], __fmul_rn(wd, w[i]));
    if constexpr (kVariant == kSgdPlain) {
      // w -= lr * grad
      w[i] = __fsub_rn(w[i], __fmul_rn(lr, grad));
    } else {
      // vel = mu * v + grad
      const float vel = __fadd_rn(__fmul_rn(mu, v[i]), grad);
      v[i] = vel;
      if constexpr (kVariant == kSgdNesterov) {
        // w -= lr * (grad + mu * vel)
        w[i] = __fsub_rn(w[i], __fmul_rn(lr, __fadd_rn(grad, __fmul_rn(mu, vel))));
      } else {
        // w -= lr * vel
        w[i] = __fsub_rn(w[i], __fmul_rn(lr, vel));
      }
    }
  }
}

struct RmspropScalars {
  float lr, alpha, one_minus_alpha, eps, wd, mu;
};

template <int kCentered, int kMomentum>
__global__ void rmsprop_update_kernel(std::size_t count, RmspropScalars p, float* __restrict__ w,
                                      const float* __restrict__ g, float* __restrict__ sq, float* __restrict__ buf,
                                      float* __restrict__ ga) {
  DTNN_GRID_STRIDE(i, count) {
    // grad = g + wd * w
    const float grad = __fadd_rn(g[i], __fmul_rn(p.wd, w[i]));
    // s = alpha * sq + one_minus_alpha * grad * grad, the last product as (one_minus_alpha * grad) * grad
    const float s = __fadd_rn(__fmul_rn(p.alpha, sq[i]), __fmul_rn(__fmul_rn(p.one_minus_alpha, grad), grad));
    sq[i] = s;
    float denom;
    if constexpr (kCentered != 0) {
      // a = alpha * ga + one_minus_alpha * grad
      const float a = __fadd_rn(__fmul_rn(p.alpha, ga[i]), __fmul_rn(p.one_minus_alpha, grad));
      ga[i] = a;
      // denom = sqrt(std::max(s - a * a, 0)) + eps; std::max(x, 0) is "x < 0 ? 0 : x", which keeps a NaN
      // (fmaxf would turn it into 0)
      const float var = __fsub_rn(s, __fmul_rn(a, a));
      denom = __fadd_rn(__fsqrt_rn(var < 0.0f ? 0.0f : var), p.eps);
    } else {
      // denom = sqrt(s) + eps
      denom = __fadd_rn(__fsqrt_rn(s), p.eps);
    }
    if constexpr (kMomentum != 0) {
      // b = mu * buf + grad / denom; w -= lr * b
      const float b = __fadd_rn(__fmul_rn(p.mu, buf[i]), __fdiv_rn(grad, denom));
      buf[i] = b;
      w[i] = __fsub_rn(w[i], __fmul_rn(p.lr, b));
    } else {
      // w -= lr * grad / denom, i.e. (lr * grad) / denom
      w[i] = __fsub_rn(w[i], __fdiv_rn(__fmul_rn(p.lr, grad), denom));
    }
  }
}

// The moment updates that Adam and NAdam share:
// grad = g + wd * w; m = beta1 * m + one_minus_beta1 * grad; v = beta2 * v + (one_minus_beta2 * grad) * grad;
// returns sqrt(v) * inv_bc2 + eps, and grad and m through the references.
struct MomentScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, inv_bc2, eps, wd;
};

__device__ __forceinline__ float update_moments(const MomentScalars& p, float w, float g, float* exp_avg,
                                                float* exp_avg_sq, float& grad, float& m) {
  grad = __fadd_rn(g, __fmul_rn(p.wd, w));
  m = __fadd_rn(__fmul_rn(p.beta1, *exp_avg), __fmul_rn(p.one_minus_beta1, grad));
  const float v = __fadd_rn(__fmul_rn(p.beta2, *exp_avg_sq), __fmul_rn(__fmul_rn(p.one_minus_beta2, grad), grad));
  *exp_avg = m;
  *exp_avg_sq = v;
  return __fadd_rn(__fmul_rn(__fsqrt_rn(v), p.inv_bc2), p.eps);
}

MomentScalars moment_scalars(float beta1, float beta2, float inv_bc2, float eps, float wd) {
  return MomentScalars{beta1, 1.0f - beta1, beta2, 1.0f - beta2, inv_bc2, eps, wd};
}

__global__ void adam_update_kernel(std::size_t count, MomentScalars p, float step_size, float decay,
                                   float* __restrict__ w, const float* __restrict__ g, float* __restrict__ exp_avg,
                                   float* __restrict__ exp_avg_sq) {
  DTNN_GRID_STRIDE(i, count) {
    const float w0 = w[i];
    float grad, m;
    const float denom = update_moments(p, w0, g[i], exp_avg + i, exp_avg_sq + i, grad, m);
    // w = w * decay - step_size * m / denom, the quotient as (step_size * m) / denom
    w[i] = __fsub_rn(__fmul_rn(w0, decay), __fdiv_rn(__fmul_rn(step_size, m), denom));
  }
}

__global__ void nadam_update_kernel(std::size_t count, MomentScalars p, float grad_coef, float momentum_coef,
                                    float* __restrict__ w, const float* __restrict__ g,
                                    float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq) {
  DTNN_GRID_STRIDE(i, count) {
    const float w0 = w[i];
    float grad, m;
    const float denom = update_moments(p, w0, g[i], exp_avg + i, exp_avg_sq + i, grad, m);
    // w -= (grad_coef * grad + momentum_coef * m) / denom
    w[i] = __fsub_rn(w0, __fdiv_rn(__fadd_rn(__fmul_rn(grad_coef, grad), __fmul_rn(momentum_coef, m)), denom));
  }
}

// ---- Gradient clipping ----

// The grid of the first pass, fixed whatever the count or the device, so that the tree (hence the bits) is too.
constexpr int kSumBlocks = 256;
constexpr int kSumThreads = 256;

// Sums v over the block in a fixed tree; the total is valid in thread 0.
__device__ double block_sum(double v, double* buf) {
  const int tid = static_cast<int>(threadIdx.x);
  buf[tid] = v;
  __syncthreads();
  for (int s = kSumThreads / 2; s > 0; s >>= 1) {
    if (tid < s) buf[tid] += buf[tid + s];
    __syncthreads();
  }
  return buf[0];
}

// A float's square is exact in double, so fused or not the additions round alike.
__global__ void squares_kernel(std::size_t count, const float* __restrict__ g, double* __restrict__ partials) {
  __shared__ double buf[kSumThreads];
  double s = 0.0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * kSumThreads + threadIdx.x; i < count;
       i += static_cast<std::size_t>(kSumBlocks) * kSumThreads) {
    const double v = g[i];
    s += v * v;
  }
  const double total = block_sum(s, buf);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void partials_kernel(const double* __restrict__ partials, int first, double* __restrict__ acc) {
  __shared__ double buf[kSumThreads];
  double s = 0.0;
  for (int b = static_cast<int>(threadIdx.x); b < kSumBlocks; b += kSumThreads) s += partials[b];
  const double total = block_sum(s, buf);
  if (threadIdx.x == 0) *acc = (first != 0 ? 0.0 : *acc) + total;
}

// kernels::cpu::clip_coefficient and scale_in_place: every thread works the factor out from the accumulator.
__global__ void clip_kernel(std::size_t count, float max_norm, const double* __restrict__ acc, float* __restrict__ g) {
  const double coefficient = static_cast<double>(max_norm) / (sqrt(*acc) + 1e-6);
  const float factor = coefficient < 1.0 ? static_cast<float>(coefficient) : 1.0f;
  if (!(factor < 1.0f)) return;
  DTNN_GRID_STRIDE(i, count) { g[i] *= factor; }
}

}  // namespace

void sgd_update(std::size_t count, const SgdParams& p, float* w, const float* g, float* v,
                cudaStream_t stream) {
  if (count == 0) return;
  const unsigned blocks = blocks_for(count);
  if (v == nullptr) {
    sgd_update_kernel<kSgdPlain><<<blocks, kThreads, 0, stream>>>(count, p.lr, p.momentum, p.weight_decay, w, g, v);
  } else if (p.nesterov != 0) {
    sgd_update_kernel<kSgdNesterov>
        <<<blocks, kThreads, 0, stream>>>(count, p.lr, p.momentum, p.weight_decay, w, g, v);
  } else {
    sgd_update_kernel<kSgdMomentum>
        <<<blocks, kThreads, 0, stream>>>(count, p.lr, p.momentum, p.weight_decay, w, g, v);
  }
}

void rmsprop_update(std::size_t count, const RmspropParams& p, float* w, const float* g, float* square_avg,
                    float* momentum_buf, float* grad_avg, cudaStream_t stream) {
  if (count == 0) return;
  const RmspropScalars s{p.lr, p.alpha, 1.0f - p.alpha, p.eps, p.weight_decay, p.momentum};
  const unsigned blocks = blocks_for(count);
  const int momentum = p.momentum != 0.0f ? 1 : 0;
  const int centered = p.centered != 0 ? 1 : 0;
  switch (centered * 2 + momentum) {
    case 0:
      rmsprop_update_kernel<0, 0><<<blocks, kThreads, 0, stream>>>(count, s, w, g, square_avg, nullptr, nullptr);
      break;
    case 1:
      rmsprop_update_kernel<0, 1>
          <<<blocks, kThreads, 0, stream>>>(count, s, w, g, square_avg, momentum_buf, nullptr);
      break;
    case 2:
      rmsprop_update_kernel<1, 0><<<blocks, kThreads, 0, stream>>>(count, s, w, g, square_avg, nullptr, grad_avg);
      break;
    default:
      rmsprop_update_kernel<1, 1>
          <<<blocks, kThreads, 0, stream>>>(count, s, w, g, square_avg, momentum_buf, grad_avg);
      break;
  }
}

void adam_update(std::size_t count, const AdamParams& p, float* w, const float* g, float* exp_avg,
                 float* exp_avg_sq, cudaStream_t stream) {
  if (count == 0) return;
  const MomentScalars s = moment_scalars(p.beta1, p.beta2, p.inv_sqrt_bias_correction2, p.eps, p.weight_decay);
  adam_update_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, s, p.step_size, p.decay_factor, w, g,
                                                                 exp_avg, exp_avg_sq);
}

void nadam_update(std::size_t count, const NadamParams& p, float* w, const float* g, float* exp_avg,
                  float* exp_avg_sq, cudaStream_t stream) {
  if (count == 0) return;
  const MomentScalars s = moment_scalars(p.beta1, p.beta2, p.inv_sqrt_bias_correction2, p.eps, p.weight_decay);
  nadam_update_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, s, p.grad_coef, p.momentum_coef, w, g,
                                                                  exp_avg, exp_avg_sq);
}

std::size_t sum_of_squares_scratch_bytes() { return kSumBlocks * sizeof(double); }

void sum_of_squares(std::size_t count, const float* g, int first, double* acc, void* scratch, cudaStream_t stream) {
  auto* partials = static_cast<double*>(scratch);
  squares_kernel<<<kSumBlocks, kSumThreads, 0, stream>>>(count, g, partials);
  partials_kernel<<<1, kSumThreads, 0, stream>>>(partials, first, acc);
}

void clip_grad(std::size_t count, float max_norm, const double* acc, float* g, cudaStream_t stream) {
  if (count == 0) return;
  clip_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, max_norm, acc, g);
}

}  // namespace dtnn::kernels::cuda
