// SPDX-License-Identifier: Apache-2.0
// Conv2d (cuDNN) and dense (cuBLAS) CUDA codelets against their CPU versions: forward, backward-data and
// backward-weights (with the bias gradient) on several batch tiles, then twice on CUDA for bitwise equality.
//
// Tolerance: 1e-4 relative to the largest magnitude of each CPU output. Every output element is a fp32 sum of
// at most a few thousand products of values in [-1, 1], computed by CPU and GPU in different orders: the
// differences are rounding, ~1e-6 of the output's scale; a wrong index or a missed term is O(1) of it.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "codelets/conv2d.hpp"
#include "codelets/dense.hpp"
#include "cuda_test_util.hpp"

namespace dtnn {
namespace {

using testing_cuda::all_close;
using testing_cuda::random_tensor;

constexpr double kRelTol = 1e-4;

std::vector<std::vector<float>> run_on(runtime::Device device, const std::function<void()>& submit,
                                       const std::vector<Tensor*>& outputs) {
  // Poison in every output first, where the tasks will write it, so that an element a codelet leaves unwritten
  // cannot hold a matching value: NaN on the host for the CPU, testing_cuda's poison on the GPU for CUDA.
  if (device == runtime::Device::kCuda) {
    testing_cuda::poison_on_device(outputs);
  } else {
    for (Tensor* t : outputs) {
      t->copy_from(std::vector<float>(static_cast<std::size_t>(t->numel()), std::numeric_limits<float>::quiet_NaN()));
    }
  }
  testing_cuda::run_on(device, submit);
  std::vector<std::vector<float>> values;
  for (Tensor* t : outputs) values.push_back(t->to_vector());
  return values;
}

// CPU, then CUDA, compared with a tolerance scaled to each output; then CUDA again, which must repeat itself
// bit for bit (deterministic algorithms and reductions only).
void compare_cpu_cuda_scaled(const std::function<void()>& submit, const std::vector<Tensor*>& outputs,
                             const std::vector<std::string>& names, double rel_tol = kRelTol) {
  const auto cpu = run_on(runtime::Device::kCpu, submit, outputs);
  const auto gpu = run_on(runtime::Device::kCuda, submit, outputs);
  const auto again = run_on(runtime::Device::kCuda, submit, outputs);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    double scale = 0.0;
    for (float v : cpu[i]) scale = std::max(scale, static_cast<double>(std::abs(v)));
    EXPECT_TRUE(all_close(cpu[i], gpu[i], rel_tol, rel_tol * scale + 1e-7)) << names[i] << " (scale " << scale << ")";
    EXPECT_TRUE(all_close(gpu[i], again[i], 0.0, 0.0)) << names[i] << ": two CUDA runs differ";
  }
}

// ---- Conv2d ----

struct ConvCase {
  const char* name;
  int batch;
  int tiles;
  Conv2dShape shape;  // n is the batch
  int bias;
  int relu;
  codelets::ConvAlgorithm algorithm;  // of the CPU run; the CUDA body is the same for both codelets
};

void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

Conv2dShape geometry(int c, int h, int w, int k, int r, int s, int stride_h, int stride_w, int pad_top, int pad_bottom,
                     int pad_left, int pad_right, int dil_h, int dil_w, int groups) {
  Conv2dShape sh;
  sh.c = c;
  sh.h = h;
  sh.w = w;
  sh.k = k;
  sh.r = r;
  sh.s = s;
  sh.stride_h = stride_h;
  sh.stride_w = stride_w;
  sh.pad_top = pad_top;
  sh.pad_bottom = pad_bottom;
  sh.pad_left = pad_left;
  sh.pad_right = pad_right;
  sh.dil_h = dil_h;
  sh.dil_w = dil_w;
  sh.groups = groups;
  return sh;
}

constexpr auto kConvgemm = codelets::ConvAlgorithm::kConvgemm;
constexpr auto kIm2col = codelets::ConvAlgorithm::kIm2col;

const ConvCase kConvCases[] = {
    //                                    c   h   w   k  r  s sh sw pt pb pl pr dh dw  g   bias relu
    {"Same3x3", 5, 2, geometry(3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), 1, 0, kConvgemm},
    {"Same3x3Relu", 5, 2, geometry(3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), 1, 1, kIm2col},
    {"Stride2Pad1OddSize", 6, 3, geometry(3, 11, 9, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1), 1, 1, kConvgemm},
    {"NoPaddingNoBias", 4, 2, geometry(4, 7, 6, 3, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1), 0, 0, kIm2col},
    {"NoPaddingNoBiasRelu", 4, 2, geometry(4, 7, 6, 3, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1), 0, 1, kConvgemm},
    {"Pointwise", 7, 3, geometry(5, 7, 6, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1), 1, 0, kConvgemm},
    {"PointwiseStride2", 5, 2, geometry(4, 9, 7, 3, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1), 0, 0, kIm2col},
    {"AsymmetricPadding", 4, 2, geometry(2, 6, 7, 3, 3, 4, 1, 1, 0, 2, 3, 1, 1, 1, 1), 1, 1, kConvgemm},
    {"AsymmetricPaddingStride2", 3, 3, geometry(3, 9, 10, 2, 3, 3, 2, 2, 1, 0, 0, 1, 1, 1, 1), 1, 0, kIm2col},
    {"TfSameStride2EvenInput", 5, 2, geometry(3, 8, 8, 4, 3, 3, 2, 2, 0, 1, 0, 1, 1, 1, 1), 1, 0, kConvgemm},
    {"Dilation2", 3, 2, geometry(3, 12, 10, 2, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1), 1, 0, kConvgemm},
    {"MixedStrideDilationAsymmetric", 4, 2, geometry(2, 11, 9, 3, 3, 2, 2, 1, 1, 3, 0, 2, 1, 2, 1), 0, 0, kIm2col},
    {"Groups2", 5, 2, geometry(4, 7, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2), 1, 1, kConvgemm},
    {"Groups2Stride2Dilation2Asymmetric", 3, 3, geometry(4, 13, 11, 4, 3, 3, 2, 2, 2, 1, 1, 2, 2, 2, 2), 1, 0,
     kIm2col},
    {"Depthwise", 5, 2, geometry(6, 9, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6), 1, 1, kConvgemm},
    {"DepthwiseStride2", 4, 2, geometry(8, 12, 12, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 8), 0, 0, kConvgemm},
    {"DepthwiseMultiplier2", 3, 2, geometry(3, 7, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3), 1, 0, kIm2col},
    {"Stem7x7Stride2", 3, 2, geometry(3, 17, 15, 4, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1), 1, 1, kConvgemm},
    {"PaddingWiderThanKernel", 2, 2, geometry(2, 5, 5, 2, 3, 3, 1, 1, 3, 3, 3, 3, 1, 1, 1), 1, 0, kIm2col},
    {"Stride3SkipsInputs", 3, 2, geometry(2, 10, 11, 3, 2, 2, 3, 3, 0, 0, 0, 0, 1, 1, 1), 1, 0, kConvgemm},
    {"ResNetLike", 8, 3, geometry(32, 14, 14, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), 1, 1, kConvgemm},
    {"LargePlaneBias", 4, 2, geometry(8, 32, 32, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), 1, 0, kIm2col},
};

class CudaConv2dTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(CudaConv2dTest, AllPassesMatchCpu) {
  DTNN_REQUIRE_CUDA();
  const ConvCase& cc = GetParam();
  Conv2dShape s = cc.shape;
  s.n = cc.batch;
  const std::int64_t n = s.n, c = s.c, h = s.h, w = s.w, k = s.k, cg = s.c / s.groups;
  const std::int64_t oh = s.out_h(), ow = s.out_w();
  ASSERT_GT(oh, 0);
  ASSERT_GT(ow, 0);
  const int tiles = cc.tiles;
  Tensor x = random_tensor({n, c, h, w}, tiles, 11);
  Tensor weights = random_tensor({k, cg, s.r, s.s}, 1, 12);
  Tensor bias = random_tensor({k}, 1, 13);
  Tensor dy = random_tensor({n, k, oh, ow}, tiles, 14);
  Tensor y({n, k, oh, ow}, tiles);
  Tensor dx({n, c, h, w}, tiles);
  Tensor dw_tiles({tiles, k, cg, s.r, s.s}, tiles);
  Tensor db_tiles({tiles, k}, tiles);
  ASSERT_EQ(x.tiles(), tiles);
  const codelets::TaskTag tag{cc.name};
  std::vector<Tensor*> outputs{&y, &dx, &dw_tiles};
  std::vector<std::string> names{"y", "dx", "dw"};
  if (cc.bias) {
    outputs.push_back(&db_tiles);
    names.emplace_back("db");
  }
  compare_cpu_cuda_scaled(
      [&] {
        for (int t = 0; t < tiles; ++t) {
          codelets::submit_conv2d_fwd(tag, cc.algorithm, s, x, weights, cc.bias ? &bias : nullptr, cc.relu, y, t);
          codelets::submit_conv2d_bwd_data(tag, cc.algorithm, s, dy, weights, dx, t);
          codelets::submit_conv2d_bwd_weights(tag, cc.algorithm, s, x, dy, dw_tiles, cc.bias ? &db_tiles : nullptr,
                                              t);
        }
      },
      outputs, names);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaConv2dTest, ::testing::ValuesIn(kConvCases),
                         [](const ::testing::TestParamInfo<ConvCase>& info) { return std::string(info.param.name); });

// ---- Dense ----

struct DenseCase {
  const char* name;
  int batch;
  int tiles;
  int in;
  int out;
  int bias;
  int relu = 0;  // a ReLU fused into the forward task
};

void PrintTo(const DenseCase& c, std::ostream* os) { *os << c.name; }

const DenseCase kDenseCases[] = {
    {"OddSizes", 37, 3, 29, 13, 1},
    {"NoBias", 10, 2, 17, 5, 0},
    {"SingleUnit", 7, 2, 1, 1, 1},
    {"OneRowPerTile", 3, 3, 8, 6, 1},
    {"Wide", 64, 4, 300, 257, 1},
    {"ClassifierHead", 50, 2, 512, 10, 1},
    {"FusedRelu", 37, 3, 29, 13, 1, 1},
    {"FusedReluNoBias", 10, 2, 17, 5, 0, 1},
};

class CudaDenseTest : public ::testing::TestWithParam<DenseCase> {};

TEST_P(CudaDenseTest, AllPassesMatchCpu) {
  DTNN_REQUIRE_CUDA();
  const DenseCase& dc = GetParam();
  const int tiles = dc.tiles;
  Tensor x = random_tensor({dc.batch, dc.in}, tiles, 21);
  Tensor weights = random_tensor({dc.out, dc.in}, 1, 22);
  Tensor bias = random_tensor({dc.out}, 1, 23);
  Tensor dy = random_tensor({dc.batch, dc.out}, tiles, 24);
  Tensor y({dc.batch, dc.out}, tiles);
  Tensor dx({dc.batch, dc.in}, tiles);
  Tensor dw_tiles({tiles, dc.out, dc.in}, tiles);
  Tensor db_tiles({tiles, dc.out}, tiles);
  ASSERT_EQ(x.tiles(), tiles);
  const codelets::TaskTag tag{dc.name};
  std::vector<Tensor*> outputs{&y, &dx, &dw_tiles};
  std::vector<std::string> names{"y", "dx", "dw"};
  if (dc.bias) {
    outputs.push_back(&db_tiles);
    names.emplace_back("db");
  }
  compare_cpu_cuda_scaled(
      [&] {
        for (int t = 0; t < tiles; ++t) {
          codelets::submit_dense_fwd(tag, x, weights, dc.bias ? &bias : nullptr, y, t, dc.relu);
          codelets::submit_dense_bwd_data(tag, dy, weights, dx, t);
          codelets::submit_dense_bwd_weights(tag, x, dy, dw_tiles, dc.bias ? &db_tiles : nullptr, t);
        }
      },
      outputs, names);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaDenseTest, ::testing::ValuesIn(kDenseCases),
                         [](const ::testing::TestParamInfo<DenseCase>& info) { return std::string(info.param.name); });

// --precision tf32's codelets (cuDNN's and cuBLAS's TF32 math on the GPU, fp32 on the CPU): every pass within TF32's
// rounding of the CPU's fp32 (inputs rounded to a 10-bit significand, 2^-11 relative each, sums in fp32: 5e-3 of the
// output's scale leaves room for sums of a few hundred products, and is still far below a wrong index's O(1)), and
// bitwise repeatable on the GPU.
constexpr double kTf32RelTol = 5e-3;

TEST(CudaTf32Test, ConvolutionPassesAreFp32sToTf32Rounding) {
  DTNN_REQUIRE_CUDA();
  Conv2dShape s = geometry(32, 14, 14, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  s.n = 8;
  const int tiles = 2;
  Tensor x = random_tensor({s.n, s.c, s.h, s.w}, tiles, 31);
  Tensor weights = random_tensor({s.k, s.c, s.r, s.s}, 1, 32);
  Tensor bias = random_tensor({s.k}, 1, 33);
  Tensor dy = random_tensor({s.n, s.k, s.out_h(), s.out_w()}, tiles, 34);
  Tensor y({s.n, s.k, s.out_h(), s.out_w()}, tiles);
  Tensor dx({s.n, s.c, s.h, s.w}, tiles);
  Tensor dw_tiles({tiles, s.k, s.c, s.r, s.s}, tiles);
  Tensor db_tiles({tiles, s.k}, tiles);
  const codelets::TaskTag tag{"tf32"};
  const auto tf32 = codelets::Precision::kTf32;
  compare_cpu_cuda_scaled(
      [&] {
        for (int t = 0; t < tiles; ++t) {
          codelets::submit_conv2d_fwd(tag, kConvgemm, s, x, weights, &bias, 1, y, t, tf32);
          codelets::submit_conv2d_bwd_data(tag, kConvgemm, s, dy, weights, dx, t, tf32);
          codelets::submit_conv2d_bwd_weights(tag, kConvgemm, s, x, dy, dw_tiles, &db_tiles, t, tf32);
        }
      },
      {&y, &dx, &dw_tiles, &db_tiles}, {"y", "dx", "dw", "db"}, kTf32RelTol);
}

TEST(CudaTf32Test, DensePassesAreFp32sToTf32Rounding) {
  DTNN_REQUIRE_CUDA();
  const int batch = 64, tiles = 4, in = 300, out = 257;
  Tensor x = random_tensor({batch, in}, tiles, 41);
  Tensor weights = random_tensor({out, in}, 1, 42);
  Tensor bias = random_tensor({out}, 1, 43);
  Tensor dy = random_tensor({batch, out}, tiles, 44);
  Tensor y({batch, out}, tiles);
  Tensor dx({batch, in}, tiles);
  Tensor dw_tiles({tiles, out, in}, tiles);
  Tensor db_tiles({tiles, out}, tiles);
  const codelets::TaskTag tag{"tf32"};
  compare_cpu_cuda_scaled(
      [&] {
        for (int t = 0; t < tiles; ++t) {
          codelets::submit_dense_fwd(tag, x, weights, &bias, y, t, 1, true);
          codelets::submit_dense_bwd_data(tag, dy, weights, dx, t, true);
          codelets::submit_dense_bwd_weights(tag, x, dy, dw_tiles, &db_tiles, t, true);
        }
      },
      {&y, &dx, &dw_tiles, &db_tiles}, {"y", "dx", "dw", "db"}, kTf32RelTol);
}

}  // namespace
}  // namespace dtnn
