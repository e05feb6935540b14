// SPDX-License-Identifier: Apache-2.0
// BatchNorm, pooling and dropout tasks on a CUDA worker against the same tasks on a CPU worker. The CUDA kernels
// reproduce the CPU kernels' arithmetic operation by operation (the same double sums in the same order, no fused
// multiply-adds, the same window rules), so the outputs must be equal bit for bit: a task must not change a result
// by the kind of worker the scheduler gives it.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "codelets/batch_norm.hpp"
#include "codelets/dropout.hpp"
#include "codelets/pooling.hpp"
#include "cuda_test_util.hpp"

namespace dtnn {
namespace {

using testing_cuda::random_tensor;
using testing_cuda::random_values;

// Equal bits, or NaN on both sides (a NaN's payload is not part of the contract: the CPU and the GPU make
// different ones when an operation creates a NaN).
::testing::AssertionResult same_bits(const std::vector<float>& cpu, const std::vector<float>& gpu) {
  if (cpu.size() != gpu.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << cpu.size() << " vs " << gpu.size();
  }
  std::size_t differing = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const bool same = std::bit_cast<std::uint32_t>(cpu[i]) == std::bit_cast<std::uint32_t>(gpu[i]) ||
                      (std::isnan(cpu[i]) && std::isnan(gpu[i]));
    if (!same && differing++ == 0) first = i;
  }
  if (differing > 0) {
    return ::testing::AssertionFailure() << differing << " of " << cpu.size() << " values differ, first at " << first
                                         << ": cpu " << cpu[first] << " (0x" << std::hex
                                         << std::bit_cast<std::uint32_t>(cpu[first]) << "), cuda " << std::dec
                                         << gpu[first] << " (0x" << std::hex
                                         << std::bit_cast<std::uint32_t>(gpu[first]) << ")";
  }
  return ::testing::AssertionSuccess();
}

// testing_cuda::compare_cpu_cuda with bitwise equality: runs `submit` on CPU workers, reads `outputs`, poisons
// them on the GPU, restores them to `reset` (read-write outputs; an empty entry leaves the tensor), runs `submit`
// on CUDA workers, compares.
void compare_bitwise(const std::function<void()>& submit, const std::vector<Tensor*>& outputs,
                     const std::vector<std::vector<float>>& reset = {}) {
  std::vector<std::vector<float>> cpu;
  // An output that no task of a case writes (dgamma and dbeta without affine parameters, a reduction's
  // accumulator that a short chain does not need) must read the same on both sides: it is poisoned on the host
  // before the CPU run as it is on the GPU before the CUDA run.
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (i < reset.size() && !reset[i].empty()) continue;
    outputs[i]->copy_from(std::vector<float>(outputs[i]->to_vector().size(),
                                             std::bit_cast<float>(0x01010101u * testing_cuda::kPoisonByte)));
  }
  testing_cuda::run_on(runtime::Device::kCpu, submit);
  for (Tensor* t : outputs) cpu.push_back(t->to_vector());
  testing_cuda::poison_on_device(outputs);
  for (std::size_t i = 0; i < reset.size() && i < outputs.size(); ++i) {
    if (!reset[i].empty()) outputs[i]->copy_from(reset[i]);
  }
  testing_cuda::run_on(runtime::Device::kCuda, submit);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    EXPECT_TRUE(same_bits(cpu[i], outputs[i]->to_vector())) << "output " << i;
  }
}

// Values on a coarse grid (ties in pooling windows), with a few -0 among them.
std::vector<float> grid_values(std::int64_t n, std::uint32_t seed) {
  std::vector<float> v = random_values(n, seed, -2.0f, 2.0f);
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = std::round(v[i] * 2.0f) / 2.0f;
    if (v[i] == 0.0f && i % 2 == 1) v[i] = -0.0f;
  }
  return v;
}

Tensor tensor_of(Shape shape, int tiles, const std::vector<float>& values) {
  Tensor t(std::move(shape), tiles);
  t.copy_from(values);
  return t;
}

// ---- BatchNorm ----

struct BatchNormCase {
  Shape shape;  // (n, C, H, W) or (n, C)
  int tiles;
  int affine;
};

std::int64_t plane_of(const Shape& s) { return s.size() == 4 ? s[2] * s[3] : 1; }

// Training forward: sums, mean, squared deviations, variance with the running statistics, normalisation. 11 tiles
// make both reductions chains (past StarPU's 8 buffers), the variance's with a middle task and a last task that
// holds no partials.
TEST(CudaBatchNormTest, TrainingForwardMatchesCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  for (const BatchNormCase& k : {BatchNormCase{{23, 5, 7, 9}, 11, 1}, BatchNormCase{{23, 5, 7, 9}, 3, 0},
                                 BatchNormCase{{19, 6}, 8, 1}, BatchNormCase{{4, 3, 2, 2}, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << to_string(k.shape) << ", " << k.tiles << " tiles, affine " << k.affine);
    const std::int64_t n = k.shape[0];
    const int c = static_cast<int>(k.shape[1]);
    const double count = static_cast<double>(n * plane_of(k.shape));
    Tensor x = random_tensor(k.shape, k.tiles, 1, -1.0f, 3.0f);
    Tensor gamma = random_tensor({c}, 1, 2, 0.5f, 1.5f);
    Tensor beta = random_tensor({c}, 1, 3);
    Tensor sums({n, c}, k.tiles), sqdev({n, c}, k.tiles), acc({4 * static_cast<std::int64_t>(c)});
    Tensor stats({2, c}), y(k.shape, k.tiles);
    const std::vector<float> mean0 = random_values(c, 4), var0 = random_values(c, 5, 0.5f, 2.0f), batches0{3.0f};
    Tensor running_mean = tensor_of({c}, 1, mean0), running_var = tensor_of({c}, 1, var0);
    Tensor batches = tensor_of({1}, 1, batches0);
    const codelets::TaskTag tag{"bn"};
    const BatchNormUpdate update{count, 1e-5, 0.1};
    compare_bitwise(
        [&] {
          for (int t = 0; t < x.tiles(); ++t) codelets::submit_batch_norm_sums(tag, c, x, sums, t);
          codelets::submit_batch_norm_mean(tag, count, sums, acc, stats);
          for (int t = 0; t < x.tiles(); ++t) codelets::submit_batch_norm_sqdev_sums(tag, c, x, stats, sqdev, t);
          codelets::submit_batch_norm_var(tag, update, sqdev, acc, stats, running_mean, running_var, batches);
          for (int t = 0; t < x.tiles(); ++t) {
            codelets::submit_batch_norm_fwd(tag, c, x, stats, k.affine ? &gamma : nullptr, k.affine ? &beta : nullptr,
                                            y, t);
          }
        },
        {&sums, &sqdev, &stats, &running_mean, &running_var, &batches, &y, &acc},
        {{}, {}, {}, mean0, var0, batches0});
  }
}

// Training backward: per-sample sums of dy and dy * xhat, their reduction (a chain past 7 tiles) into the gradient
// statistics and dgamma, dbeta, then dx.
TEST(CudaBatchNormTest, TrainingBackwardMatchesCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  for (const BatchNormCase& k : {BatchNormCase{{23, 6, 5, 3}, 9, 1}, BatchNormCase{{23, 6, 5, 3}, 9, 0},
                                 BatchNormCase{{17, 4, 3, 11}, 3, 1}, BatchNormCase{{21, 7}, 10, 1}}) {
    SCOPED_TRACE(::testing::Message() << to_string(k.shape) << ", " << k.tiles << " tiles, affine " << k.affine);
    const std::int64_t n = k.shape[0];
    const int c = static_cast<int>(k.shape[1]);
    const double count = static_cast<double>(n * plane_of(k.shape));
    Tensor x = random_tensor(k.shape, k.tiles, 11, -2.0f, 2.0f);
    Tensor dy = random_tensor(k.shape, k.tiles, 12);
    std::vector<float> stats0 = random_values(c, 13, -0.2f, 0.2f);
    const std::vector<float> invstd = random_values(c, 14, 0.5f, 2.0f);
    stats0.insert(stats0.end(), invstd.begin(), invstd.end());
    Tensor stats = tensor_of({2, c}, 1, stats0);
    Tensor gamma = random_tensor({c}, 1, 15, 0.5f, 1.5f);
    Tensor partials({n, 2 * static_cast<std::int64_t>(c)}, k.tiles), acc({4 * static_cast<std::int64_t>(c)});
    Tensor grad_stats({2, c}), dgamma({c}), dbeta({c}), dx(k.shape, k.tiles);
    const codelets::TaskTag tag{"bn"};
    compare_bitwise(
        [&] {
          for (int t = 0; t < x.tiles(); ++t) codelets::submit_batch_norm_bwd_sums(tag, c, x, dy, stats, partials, t);
          codelets::submit_batch_norm_bwd_reduce(tag, count, partials, acc, grad_stats, k.affine ? &dgamma : nullptr,
                                                 k.affine ? &dbeta : nullptr);
          for (int t = 0; t < x.tiles(); ++t) {
            codelets::submit_batch_norm_bwd_data(tag, c, x, dy, stats, &grad_stats, k.affine ? &gamma : nullptr, dx,
                                                 t);
          }
        },
        {&partials, &grad_stats, &dgamma, &dbeta, &dx, &acc});
  }
}

// Evaluation: the forward pass from the running statistics, and the backward pass of frozen statistics.
TEST(CudaBatchNormTest, EvaluationMatchesCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  for (const BatchNormCase& k : {BatchNormCase{{13, 5, 7, 3}, 4, 1}, BatchNormCase{{13, 5, 7, 3}, 4, 0},
                                 BatchNormCase{{9, 10}, 2, 1}}) {
    SCOPED_TRACE(::testing::Message() << to_string(k.shape) << ", " << k.tiles << " tiles, affine " << k.affine);
    const std::int64_t n = k.shape[0];
    const int c = static_cast<int>(k.shape[1]);
    const double count = static_cast<double>(n * plane_of(k.shape));
    const double eps = 1e-3;
    Tensor x = random_tensor(k.shape, k.tiles, 21, -2.0f, 2.0f);
    Tensor dy = random_tensor(k.shape, k.tiles, 22);
    Tensor running_mean = random_tensor({c}, 1, 23, -0.5f, 0.5f);
    Tensor running_var = random_tensor({c}, 1, 24, 0.1f, 3.0f);
    Tensor gamma = random_tensor({c}, 1, 25, 0.5f, 1.5f);
    Tensor beta = random_tensor({c}, 1, 26);
    Tensor stats({2, c}), partials({n, 2 * static_cast<std::int64_t>(c)}, k.tiles);
    Tensor acc({4 * static_cast<std::int64_t>(c)}), grad_stats({2, c}), dgamma({c}), dbeta({c});
    Tensor y(k.shape, k.tiles), dx(k.shape, k.tiles);
    const Tensor* g = k.affine ? &gamma : nullptr;
    const codelets::TaskTag tag{"bn"};
    compare_bitwise(
        [&] {
          for (int t = 0; t < x.tiles(); ++t) {
            codelets::submit_batch_norm_infer_fwd(tag, c, eps, x, running_mean, running_var, g,
                                                  k.affine ? &beta : nullptr, y, t);
          }
          codelets::submit_batch_norm_frozen_stats(tag, eps, running_mean, running_var, stats);
          for (int t = 0; t < x.tiles(); ++t) codelets::submit_batch_norm_bwd_sums(tag, c, x, dy, stats, partials, t);
          codelets::submit_batch_norm_bwd_reduce(tag, count, partials, acc, grad_stats, k.affine ? &dgamma : nullptr,
                                                 k.affine ? &dbeta : nullptr);
          for (int t = 0; t < x.tiles(); ++t) {
            codelets::submit_batch_norm_bwd_data(tag, c, x, dy, stats, nullptr, g, dx, t);
          }
        },
        {&y, &stats, &partials, &grad_stats, &dgamma, &dbeta, &dx});
  }
}

// The fused passes (models/fusion.hpp): the forward epilogues (ReLU; + residual; + residual and ReLU) in training and
// evaluation, and the backward passes masked by the fused ReLU's output (batch and frozen statistics). The ReLU's
// output has exact zeros and -0, where the mask must drop dy.
TEST(CudaBatchNormTest, FusedEpiloguesAndMaskedBackwardMatchCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  for (const BatchNormCase& k : {BatchNormCase{{23, 5, 7, 9}, 11, 1}, BatchNormCase{{13, 4, 3, 3}, 3, 0},
                                 BatchNormCase{{19, 6}, 8, 1}}) {
    SCOPED_TRACE(::testing::Message() << to_string(k.shape) << ", " << k.tiles << " tiles, affine " << k.affine);
    const std::int64_t n = k.shape[0];
    const int c = static_cast<int>(k.shape[1]);
    const double count = static_cast<double>(n * plane_of(k.shape));
    Tensor x = random_tensor(k.shape, k.tiles, 41, -2.0f, 2.0f);
    Tensor residual = random_tensor(k.shape, k.tiles, 42);
    Tensor relu_y = tensor_of(k.shape, k.tiles, grid_values(numel(k.shape), 43));
    {
      auto a = relu_y.read_write();
      for (float& v : a.data()) v = v < 0.0f ? 0.0f : v;  // a ReLU's output (keeps -0)
    }
    Tensor dy = random_tensor(k.shape, k.tiles, 44);
    std::vector<float> stats0 = random_values(c, 45, -0.2f, 0.2f);
    const std::vector<float> invstd = random_values(c, 46, 0.5f, 2.0f);
    stats0.insert(stats0.end(), invstd.begin(), invstd.end());
    Tensor stats = tensor_of({2, c}, 1, stats0);
    Tensor gamma = random_tensor({c}, 1, 47, -1.5f, 1.5f);
    Tensor beta = random_tensor({c}, 1, 48);
    Tensor running_mean = random_tensor({c}, 1, 49, -0.5f, 0.5f);
    Tensor running_var = random_tensor({c}, 1, 50, 0.1f, 3.0f);
    Tensor partials({n, 2 * static_cast<std::int64_t>(c)}, k.tiles), acc({4 * static_cast<std::int64_t>(c)});
    Tensor grad_stats({2, c}), dgamma({c}), dbeta({c});
    Tensor y_relu(k.shape, k.tiles), y_add(k.shape, k.tiles), y_add_relu(k.shape, k.tiles);
    Tensor e_relu(k.shape, k.tiles), e_add_relu(k.shape, k.tiles), dx(k.shape, k.tiles), dx_frozen(k.shape, k.tiles);
    const Tensor* g = k.affine ? &gamma : nullptr;
    const Tensor* b = k.affine ? &beta : nullptr;
    const codelets::TaskTag tag{"bn"};
    compare_bitwise(
        [&] {
          for (int t = 0; t < x.tiles(); ++t) {
            codelets::submit_batch_norm_fwd(tag, c, x, stats, g, b, y_relu, t, {nullptr, 1});
            codelets::submit_batch_norm_fwd(tag, c, x, stats, g, b, y_add, t, {&residual, 0});
            codelets::submit_batch_norm_fwd(tag, c, x, stats, g, b, y_add_relu, t, {&residual, 1});
            codelets::submit_batch_norm_infer_fwd(tag, c, 1e-5, x, running_mean, running_var, g, b, e_relu, t,
                                                  {nullptr, 1});
            codelets::submit_batch_norm_infer_fwd(tag, c, 1e-5, x, running_mean, running_var, g, b, e_add_relu, t,
                                                  {&residual, 1});
            codelets::submit_batch_norm_bwd_sums(tag, c, x, dy, stats, partials, t, &relu_y);
          }
          codelets::submit_batch_norm_bwd_reduce(tag, count, partials, acc, grad_stats, k.affine ? &dgamma : nullptr,
                                                 k.affine ? &dbeta : nullptr);
          for (int t = 0; t < x.tiles(); ++t) {
            codelets::submit_batch_norm_bwd_data(tag, c, x, dy, stats, &grad_stats, g, dx, t, &relu_y);
            codelets::submit_batch_norm_bwd_data(tag, c, x, dy, stats, nullptr, g, dx_frozen, t, &relu_y);
          }
        },
        {&y_relu, &y_add, &y_add_relu, &e_relu, &e_add_relu, &partials, &grad_stats, &dgamma, &dbeta, &dx,
         &dx_frozen, &acc});
  }
}

// Evaluation forward and frozen-statistics backward over 2 x 3 planes of 2.8 M values: the per-element passes
// take more than one grid.
TEST(CudaBatchNormTest, EvaluationPastOneGridMatchesCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  const Shape shape{2, 3, 2797, 1000};
  ASSERT_GT(numel(shape), testing_cuda::kOneGrid);
  const int c = 3;
  const double count = static_cast<double>(numel(shape) / c);
  const double eps = 1e-5;
  Tensor x = random_tensor(shape, 1, 27, -2.0f, 2.0f);
  Tensor dy = random_tensor(shape, 1, 28);
  Tensor running_mean = random_tensor({c}, 1, 29, -0.5f, 0.5f);
  Tensor running_var = random_tensor({c}, 1, 30, 0.1f, 3.0f);
  Tensor gamma = random_tensor({c}, 1, 31, 0.5f, 1.5f);
  Tensor beta = random_tensor({c}, 1, 32);
  Tensor stats({2, c}), partials({2, 2 * c}, 1), acc({4 * c}), grad_stats({2, c}), dgamma({c}), dbeta({c});
  Tensor y(shape, 1), dx(shape, 1);
  const codelets::TaskTag tag{"bn"};
  compare_bitwise(
      [&] {
        codelets::submit_batch_norm_infer_fwd(tag, c, eps, x, running_mean, running_var, &gamma, &beta, y, 0);
        codelets::submit_batch_norm_frozen_stats(tag, eps, running_mean, running_var, stats);
        codelets::submit_batch_norm_bwd_sums(tag, c, x, dy, stats, partials, 0);
        codelets::submit_batch_norm_bwd_reduce(tag, count, partials, acc, grad_stats, &dgamma, &dbeta);
        codelets::submit_batch_norm_bwd_data(tag, c, x, dy, stats, nullptr, &gamma, dx, 0);
      },
      {&y, &dx, &dgamma, &dbeta});
}

// ---- Pooling ----

Shape output_shape(const Pool2dShape& s, std::int64_t n) { return {n, s.c, s.out_h(), s.out_w()}; }

// Windows: the 2x2 fast path (odd input, trailing row and column outside every window), ceil mode (a partial last
// window), padding, overlapping windows, a non-square kernel with unequal strides.
std::vector<Pool2dShape> pool_shapes(int ceil_mode_allowed) {
  // n, c, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, ceil_mode
  std::vector<Pool2dShape> shapes{{5, 3, 9, 11, 2, 2, 2, 2, 0, 0, 0}, {5, 3, 10, 7, 3, 3, 2, 2, 1, 1, 0},
                                  {5, 2, 6, 5, 3, 3, 1, 1, 1, 1, 0},  {5, 2, 7, 8, 2, 3, 1, 2, 1, 1, 0},
                                  {5, 2, 13, 12, 5, 5, 3, 3, 2, 2, 0}};
  if (ceil_mode_allowed) {
    shapes.push_back({5, 3, 9, 11, 2, 2, 2, 2, 0, 0, 1});
    shapes.push_back({5, 3, 10, 7, 3, 3, 2, 2, 1, 1, 1});
    shapes.push_back({5, 2, 8, 9, 3, 2, 3, 2, 0, 1, 1});
  }
  return shapes;
}

std::string describe(const Pool2dShape& s) {
  return fmt::format("{}x{}x{}x{}, kernel {}x{}, stride {}x{}, padding {}x{}, ceil {}", s.n, s.c, s.h, s.w, s.kh, s.kw,
                     s.stride_h, s.stride_w, s.pad_h, s.pad_w, s.ceil_mode);
}

TEST(CudaMaxPool2dTest, ForwardAndBackwardMatchCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  for (const Pool2dShape& s : pool_shapes(1)) {
    SCOPED_TRACE(describe(s));
    const Shape in{s.n, s.c, s.h, s.w};
    const Shape out = output_shape(s, s.n);
    std::vector<float> xv = grid_values(numel(in), 31);
    // NaNs (the first in a window wins) and -inf (a window of -inf still picks a cell).
    xv[3] = std::numeric_limits<float>::quiet_NaN();
    xv[xv.size() / 2] = std::numeric_limits<float>::quiet_NaN();
    xv[xv.size() / 2 + 1] = std::numeric_limits<float>::quiet_NaN();
    for (std::size_t i = 7; i < xv.size(); i += 29) xv[i] = -std::numeric_limits<float>::infinity();
    Tensor x = tensor_of(in, 3, xv);
    Tensor dy = tensor_of(out, 3, grid_values(numel(out), 32));
    Tensor y(out, 3), dx(in, 3);
    const codelets::TaskTag tag{"maxpool"};
    compare_bitwise(
        [&] {
          for (int t = 0; t < x.tiles(); ++t) {
            codelets::submit_maxpool2d_fwd(tag, s, x, y, t);
            codelets::submit_maxpool2d_bwd_data(tag, s, x, dy, dx, t);
          }
        },
        {&y, &dx});
  }
}

TEST(CudaAvgPool2dTest, ForwardAndBackwardMatchCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  // AvgPool2d has no ceil mode (its layer never sets one).
  for (const Pool2dShape& s : pool_shapes(0)) {
    for (const int count_include_pad : {1, 0}) {
      SCOPED_TRACE(describe(s) + fmt::format(", count_include_pad {}", count_include_pad));
      const Shape in{s.n, s.c, s.h, s.w};
      const Shape out = output_shape(s, s.n);
      Tensor x = random_tensor(in, 3, 41);
      Tensor dy = tensor_of(out, 3, grid_values(numel(out), 42));
      Tensor y(out, 3), dx(in, 3);
      const codelets::TaskTag tag{"avgpool"};
      compare_bitwise(
          [&] {
            for (int t = 0; t < x.tiles(); ++t) {
              codelets::submit_avgpool2d_fwd(tag, s, count_include_pad, x, y, t);
              codelets::submit_avgpool2d_bwd_data(tag, s, count_include_pad, dy, dx, t);
            }
          },
          {&y, &dx});
    }
  }
}

TEST(CudaGlobalAvgPool2dTest, ForwardAndBackwardMatchCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  // Planes with a tail after whole blocks of 8, none, shorter than 8, and of one value.
  for (const Shape& in : {Shape{7, 3, 5, 7}, Shape{5, 4, 16, 16}, Shape{6, 3, 1, 5}, Shape{5, 4, 1, 1}}) {
    SCOPED_TRACE(to_string(in));
    const int c = static_cast<int>(in[1]);
    const Shape out{in[0], c, 1, 1};
    Tensor x = random_tensor(in, 3, 51, -1.0f, 2.0f);
    Tensor dy = random_tensor(out, 3, 52);
    Tensor y(out, 3), dx(in, 3);
    const codelets::TaskTag tag{"gap"};
    compare_bitwise(
        [&] {
          for (int t = 0; t < x.tiles(); ++t) {
            codelets::submit_global_avgpool2d_fwd(tag, c, x, y, t);
            codelets::submit_global_avgpool2d_bwd_data(tag, c, dy, dx, t);
          }
        },
        {&y, &dx});
  }
}

// 2x2 windows over 8 planes of 4098 x 2050: 16.8 M outputs and 67 M inputs, both past one grid (the forward
// launches over outputs, the backward over inputs).
TEST(CudaPoolingTest, PastOneGridMatchesCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  const Pool2dShape s{1, 8, 4098, 2050, 2, 2, 2, 2, 0, 0, 0};
  const Shape in{s.n, s.c, s.h, s.w};
  const Shape out = output_shape(s, s.n);
  ASSERT_GT(numel(out), testing_cuda::kOneGrid);
  Tensor x = tensor_of(in, 1, grid_values(numel(in), 35));
  Tensor dy = tensor_of(out, 1, grid_values(numel(out), 36));
  Tensor y(out, 1), dx(in, 1);
  {
    SCOPED_TRACE("max");
    const codelets::TaskTag tag{"maxpool"};
    compare_bitwise(
        [&] {
          codelets::submit_maxpool2d_fwd(tag, s, x, y, 0);
          codelets::submit_maxpool2d_bwd_data(tag, s, x, dy, dx, 0);
        },
        {&y, &dx});
  }
  {
    SCOPED_TRACE("average");
    const codelets::TaskTag tag{"avgpool"};
    compare_bitwise(
        [&] {
          codelets::submit_avgpool2d_fwd(tag, s, 1, x, y, 0);
          codelets::submit_avgpool2d_bwd_data(tag, s, 1, dy, dx, 0);
        },
        {&y, &dx});
  }
  {
    SCOPED_TRACE("global average");
    const Shape g_out{s.n, s.c, 1, 1};
    Tensor gy(g_out, 1);
    Tensor gdy = random_tensor(g_out, 1, 37);
    const codelets::TaskTag tag{"gap"};
    compare_bitwise(
        [&] {
          codelets::submit_global_avgpool2d_fwd(tag, s.c, x, gy, 0);
          codelets::submit_global_avgpool2d_bwd_data(tag, s.c, gdy, dx, 0);
        },
        {&gy, &dx});
  }
}

// ---- Dropout ----

TEST(CudaDropoutTest, MasksAndGradientsMatchCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  // Rows of an odd number of elements (the last draw uses one half of its hash), of one element, of an even number.
  for (const Shape& shape : {Shape{13, 3, 5, 7}, Shape{9, 1}, Shape{6, 64}}) {
    SCOPED_TRACE(to_string(shape));
    Tensor x = random_tensor(shape, 4, 61);
    Tensor dy = random_tensor(shape, 4, 62);
    Tensor mask(shape, 4), y(shape, 4), dx(shape, 4);
    const codelets::TaskTag tag{"dropout"};
    const codelets::DropoutDraw draw{0x1234abcdULL, 17, 0.3};
    compare_bitwise(
        [&] {
          for (int t = 0; t < x.tiles(); ++t) {
            codelets::submit_dropout_fwd(tag, draw, x, mask, y, t);
            codelets::submit_dropout_bwd_data(tag, mask, dy, dx, t);
          }
        },
        {&mask, &y, &dx});
    // The CUDA mask is that of the CPU's draw function, element by element.
    const std::vector<float> m = mask.to_vector();
    const auto params = kernels::cpu::dropout_params(draw.seed, draw.step, draw.rate);
    const std::int64_t row = shape.size() == 4 ? shape[1] * shape[2] * shape[3] : shape[1];
    for (std::size_t i = 0; i < m.size(); ++i) {
      const auto e = static_cast<std::int64_t>(i);
      const std::uint32_t d =
          kernels::cpu::dropout_draw(draw.seed, draw.step, e / row, static_cast<std::uint64_t>(e % row));
      ASSERT_EQ(m[i], d >= params.threshold ? params.scale : 0.0f) << "element " << i;
    }
  }
}

TEST(CudaDropoutTest, PastOneGridMatchesCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  // Two rows, each of an odd number of elements: the forward launches over pairs of elements, 16.8 M of them.
  const Shape shape{2, testing_cuda::kPastOneGrid};
  Tensor x = random_tensor(shape, 1, 63);
  Tensor dy = random_tensor(shape, 1, 64);
  Tensor mask(shape, 1), y(shape, 1), dx(shape, 1);
  const codelets::TaskTag tag{"dropout"};
  const codelets::DropoutDraw draw{0x5678ef01ULL, 3, 0.5};
  compare_bitwise(
      [&] {
        codelets::submit_dropout_fwd(tag, draw, x, mask, y, 0);
        codelets::submit_dropout_bwd_data(tag, mask, dy, dx, 0);
      },
      {&mask, &y, &dx});
}

}  // namespace
}  // namespace dtnn
