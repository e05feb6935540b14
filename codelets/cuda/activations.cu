// SPDX-License-Identifier: Apache-2.0
// The formulas of codelets/cpu/activations.cpp, operation for operation. nvcc contracts a * b + c into one fused
// multiply-add where the host compiler (no FMA in the x86-64 baseline) rounds twice; __fmul_rn is never
// contracted, so the arithmetic rounds as on the CPU and only the libm functions differ.
#include "codelets/cuda/activations.hpp"
#include "codelets/cuda/launch.cuh"

namespace dtnn::kernels::cuda {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kGeluCubic = 0.044715f;

// Not fusable: gelu_bwd_data adds x * pdf to it.
__device__ inline float normal_cdf(float x) { return __fmul_rn(0.5f, erfcf(-x * kInvSqrt2)); }

__global__ void sigmoid_fwd_kernel(std::size_t count, const float* __restrict__ x, float* __restrict__ y) {
  DTNN_GRID_STRIDE(i, count) {
    const float v = x[i];
    if (v >= 0.0f) {
      y[i] = 1.0f / (1.0f + expf(-v));
    } else {
      const float e = expf(v);
      y[i] = e / (1.0f + e);
    }
  }
}

__global__ void sigmoid_bwd_data_kernel(std::size_t count, const float* __restrict__ y, const float* __restrict__ dy,
                                        float* __restrict__ dx) {
  DTNN_GRID_STRIDE(i, count) { dx[i] = dy[i] * y[i] * (1.0f - y[i]); }
}

__global__ void tanh_fwd_kernel(std::size_t count, const float* __restrict__ x, float* __restrict__ y) {
  DTNN_GRID_STRIDE(i, count) { y[i] = tanhf(x[i]); }
}

__global__ void tanh_bwd_data_kernel(std::size_t count, const float* __restrict__ y, const float* __restrict__ dy,
                                     float* __restrict__ dx) {
  DTNN_GRID_STRIDE(i, count) {
    const float v = y[i];
    dx[i] = dy[i] * (1.0f - __fmul_rn(v, v));
  }
}

__global__ void leaky_relu_fwd_kernel(std::size_t count, float slope, const float* __restrict__ x,
                                      float* __restrict__ y) {
  DTNN_GRID_STRIDE(i, count) {
    const float v = x[i];
    y[i] = v > 0.0f ? v : v * slope;
  }
}

__global__ void leaky_relu_bwd_data_kernel(std::size_t count, float slope, const float* __restrict__ x,
                                           const float* __restrict__ dy, float* __restrict__ dx) {
  DTNN_GRID_STRIDE(i, count) {
    const float g = dy[i];
    dx[i] = x[i] > 0.0f ? g : g * slope;
  }
}

__global__ void elu_fwd_kernel(std::size_t count, float alpha, const float* __restrict__ x, float* __restrict__ y) {
  DTNN_GRID_STRIDE(i, count) {
    const float v = x[i];
    y[i] = v > 0.0f ? v : alpha * expm1f(v);
  }
}

__global__ void elu_bwd_data_kernel(std::size_t count, float alpha, const float* __restrict__ x,
                                    const float* __restrict__ dy, float* __restrict__ dx) {
  DTNN_GRID_STRIDE(i, count) {
    const float v = x[i];
    const float g = dy[i];
    dx[i] = v > 0.0f ? g : g * alpha * expf(v);
  }
}

__global__ void gelu_fwd_kernel(std::size_t count, const float* __restrict__ x, float* __restrict__ y) {
  DTNN_GRID_STRIDE(i, count) {
    const float v = x[i];
    y[i] = v * normal_cdf(v);
  }
}

__global__ void gelu_bwd_data_kernel(std::size_t count, const float* __restrict__ x, const float* __restrict__ dy,
                                     float* __restrict__ dx) {
  DTNN_GRID_STRIDE(i, count) {
    const float v = x[i];
    const float pdf = kInvSqrt2Pi * expf(-0.5f * v * v);
    dx[i] = dy[i] * (normal_cdf(v) + __fmul_rn(v, pdf));
  }
}

// The CPU's form (codelets/cpu/vector_math_impl.hpp): 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)), so y = x / (1 + e)
// and d/dx = s + 2 x s (1 - s) sqrt(2 / pi) (1 + 3 * 0.044715 x^2) with s = 1 / (1 + e), 1 - s = e s; expf's
// rounding and the fused products are what differ from the CPU (whose exp clamps its argument below at -87.33).
__device__ __forceinline__ float gelu_tanh_exp(float v) {
  const float u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
  return expf(fmaxf(-2.0f * u, -87.33f));
}

__global__ void gelu_tanh_fwd_kernel(std::size_t count, const float* __restrict__ x, float* __restrict__ y) {
  DTNN_GRID_STRIDE(i, count) {
    const float v = x[i];
    y[i] = v / (1.0f + gelu_tanh_exp(v));
  }
}

__global__ void gelu_tanh_bwd_data_kernel(std::size_t count, const float* __restrict__ x,
                                          const float* __restrict__ dy, float* __restrict__ dx) {
  DTNN_GRID_STRIDE(i, count) {
    const float v = x[i];
    const float e = gelu_tanh_exp(v);
    const float s = 1.0f / (1.0f + e);
    const float inner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] = dy[i] * (s + 2.0f * v * s * (e * s) * inner);
  }
}

}  // namespace

void sigmoid_fwd(std::size_t count, const float* x, float* y, cudaStream_t stream) {
  if (count == 0) return;
  sigmoid_fwd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, x, y);
}

void sigmoid_bwd_data(std::size_t count, const float* y, const float* dy, float* dx, cudaStream_t stream) {
  if (count == 0) return;
  sigmoid_bwd_data_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, y, dy, dx);
}

void tanh_fwd(std::size_t count, const float* x, float* y, cudaStream_t stream) {
  if (count == 0) return;
  tanh_fwd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, x, y);
}

void tanh_bwd_data(std::size_t count, const float* y, const float* dy, float* dx, cudaStream_t stream) {
  if (count == 0) return;
  tanh_bwd_data_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, y, dy, dx);
}

void leaky_relu_fwd(std::size_t count, float slope, const float* x, float* y, cudaStream_t stream) {
  if (count == 0) return;
  leaky_relu_fwd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, slope, x, y);
}

void leaky_relu_bwd_data(std::size_t count, float slope, const float* x, const float* dy, float* dx,
                         cudaStream_t stream) {
  if (count == 0) return;
  leaky_relu_bwd_data_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, slope, x, dy, dx);
}

void elu_fwd(std::size_t count, float alpha, const float* x, float* y, cudaStream_t stream) {
  if (count == 0) return;
  elu_fwd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, alpha, x, y);
}

void elu_bwd_data(std::size_t count, float alpha, const float* x, const float* dy, float* dx, cudaStream_t stream) {
  if (count == 0) return;
  elu_bwd_data_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, alpha, x, dy, dx);
}

void gelu_fwd(std::size_t count, const float* x, float* y, cudaStream_t stream) {
  if (count == 0) return;
  gelu_fwd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, x, y);
}

void gelu_bwd_data(std::size_t count, const float* x, const float* dy, float* dx, cudaStream_t stream) {
  if (count == 0) return;
  gelu_bwd_data_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, x, dy, dx);
}

void gelu_tanh_fwd(std::size_t count, const float* x, float* y, cudaStream_t stream) {
  if (count == 0) return;
  gelu_tanh_fwd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, x, y);
}

void gelu_tanh_bwd_data(std::size_t count, const float* x, const float* dy, float* dx, cudaStream_t stream) {
  if (count == 0) return;
  gelu_tanh_bwd_data_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, x, dy, dx);
}

}  // namespace dtnn::kernels::cuda
