// SPDX-License-Identifier: Apache-2.0
// convgemm against direct convolution in double precision and against the im2col kernels, on hand-made
// geometries (odd sizes, strides 1-3, padding 0-3 and asymmetric, dilation, groups, depthwise, 1x1, sizes that
// cross every GEMM block) and on every distinct convolution of AlexNet-CIFAR, VGG16-CIFAR, ResNet-18 and
// ResNet-50 (CIFAR and ImageNet inputs, batch 2).
// Tolerance: 1e-4 relative to the largest reference magnitude among the compared elements, for references and
// for the im2col kernels alike (fp32 GEMM sums of up to 25088 products of values in [-1, 1]). Large layers are
// compared with the reference on a seeded subset of elements, and scanned entirely for unwritten (NaN) ones.
// Backward-data and backward-weights must be bitwise identical run after run, and on another thread.
#include <blis.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "codelets/cpu/convgemm.hpp"
#include "codelets/cpu/kernels.hpp"
#include "conv_reference.hpp"
#include "kernel_test_util.hpp"
#include "core/blis_arch.hpp"
#include "core/cpu_features.hpp"
#include "core/errors.hpp"

namespace dtnn::kernels::cpu {
namespace {

using test::all_close;
using test::checked_elements;
using test::matches_at;
using test::reference_dw;
using test::reference_dx;
using test::reference_y;
using test::w_size;
using test::x_size;
using test::y_size;
using test::conv_shape;
using test::bitwise_equal;
using test::concat;
using test::nan_vector;
using test::random_vector;

constexpr double kRtol = 1e-4;

// The engine chooses BLIS's configuration before BLIS's first use (core/blis_arch.hpp: skx on AVX-512 CPUs, an AVX2
// one under DTNN_MAX_CPU_ISA=avx2, ...); do the same before any test runs, so that the kernel production uses is
// the one tested. A BLIS_ARCH_TYPE already in the environment wins: BLIS_ARCH_TYPE=3 tests haswell's 6x16.
// The ctest entries kernels_blis_<arch> run these tests under each x86-64 BLIS configuration the engine can meet
// (skx, zen3, haswell); a configuration whose kernels this CPU cannot run (or may not, under DTNN_MAX_CPU_ISA)
// skips the entry (exit code 77).
[[maybe_unused]] const bool kBlisArchChosen = [] {
  try {
    configure_blis_arch();
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "test_kernels: %s\n", e.what());
    std::_Exit(1);
  }
  const char* env = std::getenv("BLIS_ARCH_TYPE");
  const auto is = [&](arch_t arch) { return env != nullptr && env == std::to_string(static_cast<int>(arch)); };
  const bool runs = is(BLIS_ARCH_SKX) ? cpu_has_avx512()
                    : is(BLIS_ARCH_HASWELL) || is(BLIS_ARCH_ZEN3) ? cpu_has_avx2_fma()
                                                                   : true;
  if (!runs) {
    std::fprintf(stderr, "test_kernels: BLIS_ARCH_TYPE=%s needs AVX-512 (skx) or AVX2 (haswell, zen3), which this "
                 "CPU lacks or DTNN_MAX_CPU_ISA caps: skipped\n", env);
    std::_Exit(77);
  }
  return true;
}();

struct ConvCase {
  std::string name;
  Conv2dShape shape;
  // convgemm's micro-kernel: "auto" (its selection), or one forced (convgemm_force_ukernel).
  std::string ukernel = "auto";
};

void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name << " (" << c.ukernel << ")"; }


// Square input and kernel, symmetric padding, no dilation or groups: the layers of the model zoo.
Conv2dShape square(int n, int c, int hw, int k, int rs, int stride, int pad) {
  return conv_shape(n, c, hw, hw, k, rs, rs, stride, stride, pad, pad, pad, pad, 1, 1, 1);
}

std::vector<ConvCase> geometry_cases() {
  return {
      //                           n  c   h   w  k  r  s sh sw pt pb pl pr dh dw g
      {"Same3x3", conv_shape(2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1)},
      {"Pointwise", conv_shape(3, 5, 7, 6, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1)},
      {"PointwiseStride2", conv_shape(2, 4, 9, 7, 3, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1)},
      {"PointwisePadded", conv_shape(1, 3, 5, 4, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)},
      {"PointwiseGrouped", conv_shape(2, 6, 5, 5, 9, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 3)},
      {"Stride2OddSize", conv_shape(2, 3, 11, 9, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1)},
      {"Stride3SkipsInputs", conv_shape(1, 2, 10, 11, 3, 2, 2, 3, 3, 0, 0, 0, 0, 1, 1, 1)},
      {"Stride3Padded", conv_shape(3, 2, 13, 12, 2, 3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1)},
      {"Stride3Pad3", conv_shape(2, 5, 14, 13, 7, 5, 5, 3, 3, 3, 3, 3, 3, 1, 1, 1)},
      {"AsymmetricPadding", conv_shape(2, 2, 6, 7, 3, 3, 4, 1, 1, 0, 2, 3, 1, 1, 1, 1)},
      // 'Same' output size with asymmetric padding and dilation: the shifted-plane packing path.
      {"SameAsymmetricPadding", conv_shape(2, 3, 9, 8, 5, 3, 4, 1, 1, 2, 0, 1, 2, 1, 1, 1)},
      {"SameDilation2Asymmetric", conv_shape(2, 4, 7, 9, 3, 3, 3, 1, 1, 1, 3, 3, 1, 2, 2, 1)},
      {"AsymmetricPaddingStride2", conv_shape(1, 3, 9, 10, 2, 3, 3, 2, 2, 1, 0, 0, 1, 1, 1, 1)},
      {"Dilation2", conv_shape(1, 3, 12, 10, 2, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1)},
      {"MixedStrideDilation", conv_shape(2, 2, 11, 9, 3, 3, 2, 2, 1, 1, 3, 0, 2, 1, 2, 1)},
      {"Groups2", conv_shape(2, 4, 7, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2)},
      {"Groups2Stride2Dilation2", conv_shape(3, 4, 13, 11, 4, 3, 3, 2, 2, 2, 1, 1, 2, 2, 2, 2)},
      {"Groups4Wide", conv_shape(2, 32, 10, 9, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4)},
      {"Depthwise", conv_shape(3, 6, 9, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6)},
      {"DepthwiseStride2Dilation2", conv_shape(2, 5, 11, 12, 5, 3, 3, 2, 2, 2, 2, 3, 1, 2, 2, 5)},
      {"DepthwiseMultiplier2", conv_shape(1, 3, 7, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3)},
      {"DepthwisePointwise", conv_shape(2, 4, 5, 6, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 4)},
      {"SingleInputChannel", conv_shape(2, 1, 12, 11, 20, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1)},
      {"PaddingWiderThanKernel", conv_shape(1, 2, 5, 5, 2, 3, 3, 1, 1, 3, 3, 3, 3, 1, 1, 1)},
      {"Stem7x7Stride2", conv_shape(1, 3, 17, 15, 4, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1)},
      {"KernelCoversInput", conv_shape(2, 3, 5, 4, 2, 5, 4, 1, 1, 0, 0, 0, 0, 1, 1, 1)},
      {"Wide5x5Groups2", conv_shape(3, 4, 9, 9, 4, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1, 2)},
      {"RowsOfWindowsEntirelyInPadding", conv_shape(2, 2, 2, 3, 3, 2, 2, 2, 2, 3, 0, 0, 3, 3, 1, 1)},
      {"SingleChannelSinglePixelOut", conv_shape(1, 1, 3, 3, 1, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1)},
      // Sizes crossing the cache blocks of both BLIS configurations (KC 256/384, MC 168/480, NC 3072/4080) and
      // leaving partial micro-tiles in every dimension; 520 output channels shrink backward-data's MC and NC.
      {"CrossesEveryBlock", conv_shape(2, 67, 47, 45, 37, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1)},
      {"ManyOutputChannels", conv_shape(1, 13, 9, 10, 520, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1)},
      {"PointwiseManyPixels", conv_shape(3, 40, 41, 43, 29, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1)},
      {"Plane1Pixel", conv_shape(7, 50, 3, 3, 33, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1)},
      // Backward-data as the forward convolution by flipped weights (equal channel counts of 32 to 64, planes of
      // 256 pixels and more): dilation, asymmetric padding, groups.
      {"DualForwardDilatedAsymmetric", conv_shape(2, 32, 17, 18, 32, 3, 3, 1, 1, 3, 1, 0, 4, 2, 2, 1)},
      {"DualForwardGroups2", conv_shape(1, 64, 16, 17, 64, 3, 2, 1, 1, 1, 1, 1, 0, 1, 1, 2)},
  };
}

// Every distinct convolution of the networks at batch 2 (a shape shared by several networks is kept once, under
// the first name). AlexNet-CIFAR is the usual CIFAR-10 adaptation: 3x3 kernels, a stride-2 stem, 64-192-384-256-
// 256 channels. ResNet layers follow torchvision (stride in the 3x3 convolution of ResNet-50's bottlenecks); the
// CIFAR variants have a 3x3 stride-1 stem and no max-pool.
std::vector<ConvCase> network_cases() {
  std::vector<ConvCase> cases;
  std::set<std::tuple<int, int, int, int, int, int>> seen;
  const auto add = [&](const std::string& net, int c, int hw, int k, int rs, int stride, int pad) {
    if (seen.emplace(c, hw, k, rs, stride, pad).second) {
      cases.push_back({concat(net, "_", c, "to", k, "_", rs, "x", rs, "s", stride, "_in", hw),
                       square(2, c, hw, k, rs, stride, pad)});
    }
  };
  add("AlexNetCifar", 3, 32, 64, 3, 2, 1);
  add("AlexNetCifar", 64, 8, 192, 3, 1, 1);
  add("AlexNetCifar", 192, 4, 384, 3, 1, 1);
  add("AlexNetCifar", 384, 4, 256, 3, 1, 1);
  add("AlexNetCifar", 256, 4, 256, 3, 1, 1);

  const int vgg[][3] = {{3, 64, 32},   {64, 64, 32},  {64, 128, 16}, {128, 128, 16}, {128, 256, 8},
                        {256, 256, 8}, {256, 512, 4}, {512, 512, 4}, {512, 512, 2}};
  for (const auto& l : vgg) {
    add("Vgg16Cifar", l[0], l[2], l[1], 3, 1, 1);
  }

  // stages: (input size of the stage, channels); the first block of stages 2-4 halves the size.
  for (const bool imagenet : {false, true}) {
    const std::string suffix = imagenet ? "ImageNet" : "Cifar";
    const int s0 = imagenet ? 56 : 32;
    if (imagenet) {
      add("ResNet18" + suffix, 3, 224, 64, 7, 2, 3);
    } else {
      add("ResNet18" + suffix, 3, 32, 64, 3, 1, 1);
    }
    int in = 64;
    for (int stage = 0; stage < 4; ++stage) {
      const int ch = 64 << stage;
      const int size = s0 >> stage;
      const int stride = stage == 0 ? 1 : 2;
      const int in_size = size * stride;
      add("ResNet18" + suffix, in, in_size, ch, 3, stride, 1);
      add("ResNet18" + suffix, ch, size, ch, 3, 1, 1);
      if (stride != 1) {
        add("ResNet18" + suffix, in, in_size, ch, 1, stride, 0);
      }
      in = ch;
    }
    if (imagenet) {
      add("ResNet50" + suffix, 3, 224, 64, 7, 2, 3);
    } else {
      add("ResNet50" + suffix, 3, 32, 64, 3, 1, 1);
    }
    in = 64;
    for (int stage = 0; stage < 4; ++stage) {
      const int width = 64 << stage;
      const int out = width * 4;
      const int size = s0 >> stage;
      const int stride = stage == 0 ? 1 : 2;
      const int in_size = size * stride;
      add("ResNet50" + suffix, in, in_size, width, 1, 1, 0);
      add("ResNet50" + suffix, width, in_size, width, 3, stride, 1);
      add("ResNet50" + suffix, width, size, out, 1, 1, 0);
      add("ResNet50" + suffix, in, in_size, out, 1, stride, 0);
      add("ResNet50" + suffix, out, size, width, 1, 1, 0);
      add("ResNet50" + suffix, width, size, width, 3, 1, 1);
      in = out;
    }
  }
  return cases;
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Forces the case's micro-kernel for the test, or skips it where the CPU cannot run it.
class ConvgemmKernelTest : public ::testing::TestWithParam<ConvCase> {
 protected:
  void SetUp() override {
    const std::string& name = GetParam().ukernel;
    const auto runs = convgemm_ukernels();
    if (std::find(runs.begin(), runs.end(), name) == runs.end() && name != "auto") {
      GTEST_SKIP() << "micro-kernel " << name << " needs an instruction set this CPU lacks";
    }
    convgemm_force_ukernel(name);
  }
  void TearDown() override { convgemm_force_ukernel("auto"); }
};

TEST_P(ConvgemmKernelTest, ForwardMatchesDirectConvolutionWithAndWithoutBiasAndRelu) {
  const Conv2dShape& sh = GetParam().shape;
  ASSERT_GT(sh.out_h(), 0);
  ASSERT_GT(sh.out_w(), 0);
  const auto x = random_vector(x_size(sh), 1);
  const auto w = random_vector(w_size(sh), 2);
  const auto b = random_vector(static_cast<std::size_t>(sh.k), 3);
  const std::size_t plane = static_cast<std::size_t>(sh.out_h()) * sh.out_w();
  const auto idx = checked_elements(y_size(sh), static_cast<double>(w_size(sh)) / sh.k, 4);
  std::vector<double> conv(idx.size());
  for (std::size_t j = 0; j < idx.size(); ++j) {
    conv[j] = reference_y(sh, x, w, idx[j]);
  }
  for (const bool with_bias : {false, true}) {
    for (const int relu : {0, 1}) {
      std::vector<double> ref(idx.size());
      for (std::size_t j = 0; j < idx.size(); ++j) {
        const double v = conv[j] + (with_bias ? b[idx[j] / plane % sh.k] : 0.0);
        ref[j] = relu != 0 ? std::max(v, 0.0) : v;
      }
      auto y = nan_vector(y_size(sh));
      conv2d_fwd_convgemm(sh, x.data(), w.data(), with_bias ? b.data() : nullptr, relu, y.data());
      EXPECT_TRUE(matches_at(y, idx, ref, kRtol)) << "bias " << with_bias << ", relu " << relu;
    }
  }
}

TEST_P(ConvgemmKernelTest, BackwardDataOverwritesDxWithTransposedConvolution) {
  const Conv2dShape& sh = GetParam().shape;
  const auto dy = random_vector(y_size(sh), 5);
  const auto w = random_vector(w_size(sh), 6);
  const double macs = static_cast<double>(sh.k / sh.groups) * sh.r * sh.s;
  const auto idx = checked_elements(x_size(sh), macs, 7);
  std::vector<double> ref(idx.size());
  for (std::size_t j = 0; j < idx.size(); ++j) {
    ref[j] = reference_dx(sh, dy, w, idx[j]);
  }
  auto dx = nan_vector(x_size(sh));
  conv2d_bwd_data_convgemm(sh, dy.data(), w.data(), dx.data());
  EXPECT_TRUE(matches_at(dx, idx, ref, kRtol));
}

TEST_P(ConvgemmKernelTest, BackwardWeightsOverwritesDwAndDbWithSumsOverSamples) {
  const Conv2dShape& sh = GetParam().shape;
  const auto x = random_vector(x_size(sh), 8);
  const auto dy = random_vector(y_size(sh), 9);
  const double macs = static_cast<double>(sh.n) * sh.out_h() * sh.out_w();
  const auto idx = checked_elements(w_size(sh), macs, 10);
  std::vector<double> ref(idx.size());
  for (std::size_t j = 0; j < idx.size(); ++j) {
    ref[j] = reference_dw(sh, x, dy, idx[j]);
  }
  std::vector<double> ref_db(static_cast<std::size_t>(sh.k), 0.0);
  const std::size_t plane = static_cast<std::size_t>(sh.out_h()) * sh.out_w();
  for (std::size_t yi = 0; yi < dy.size(); ++yi) {
    ref_db[yi / plane % sh.k] += dy[yi];
  }
  auto dw = nan_vector(w_size(sh));
  auto db = nan_vector(static_cast<std::size_t>(sh.k));
  conv2d_bwd_weights_convgemm(sh, x.data(), dy.data(), dw.data(), db.data());
  EXPECT_TRUE(matches_at(dw, idx, ref, kRtol));
  EXPECT_TRUE(all_close(db, ref_db, kRtol));

  auto dw_without_db = nan_vector(w_size(sh));
  conv2d_bwd_weights_convgemm(sh, x.data(), dy.data(), dw_without_db.data(), nullptr);
  EXPECT_TRUE(bitwise_equal(dw_without_db, dw));
}

TEST_P(ConvgemmKernelTest, AgreesWithIm2colKernels) {
  const Conv2dShape& sh = GetParam().shape;
  const auto x = random_vector(x_size(sh), 11);
  const auto w = random_vector(w_size(sh), 12);
  const auto b = random_vector(static_cast<std::size_t>(sh.k), 13);
  const auto dy = random_vector(y_size(sh), 14);

  auto y = nan_vector(y_size(sh));
  auto y_im2col = nan_vector(y_size(sh));
  conv2d_fwd_convgemm(sh, x.data(), w.data(), b.data(), 0, y.data());
  conv2d_fwd_im2col(sh, x.data(), w.data(), b.data(), y_im2col.data());
  EXPECT_TRUE(all_close(y, to_double(y_im2col), kRtol)) << "forward";

  auto dx = nan_vector(x_size(sh));
  auto dx_im2col = nan_vector(x_size(sh));
  conv2d_bwd_data_convgemm(sh, dy.data(), w.data(), dx.data());
  conv2d_bwd_data_im2col(sh, dy.data(), w.data(), dx_im2col.data());
  EXPECT_TRUE(all_close(dx, to_double(dx_im2col), kRtol)) << "backward-data";

  auto dw = nan_vector(w_size(sh));
  auto dw_im2col = nan_vector(w_size(sh));
  conv2d_bwd_weights_convgemm(sh, x.data(), dy.data(), dw.data(), nullptr);
  conv2d_bwd_weights_im2col(sh, x.data(), dy.data(), dw_im2col.data(), nullptr);
  EXPECT_TRUE(all_close(dw, to_double(dw_im2col), kRtol)) << "backward-weights";
}

// Five runs, with calls of other shapes in between (which resize and refill the thread-local packing buffers),
// and one more on a fresh thread: all bitwise identical.
TEST_P(ConvgemmKernelTest, BackwardPassesAreBitwiseReproducible) {
  const Conv2dShape& sh = GetParam().shape;
  const auto x = random_vector(x_size(sh), 15);
  const auto w = random_vector(w_size(sh), 16);
  const auto dy = random_vector(y_size(sh), 17);
  Conv2dShape other = sh;
  other.h += 3;
  other.w += 5;
  other.n = 1;
  const auto x_other = random_vector(x_size(other), 18);
  const auto w_other = random_vector(w_size(other), 19);
  const auto dy_other = random_vector(y_size(other), 20);

  const auto run = [&](std::vector<float>& dx, std::vector<float>& dw) {
    conv2d_bwd_data_convgemm(sh, dy.data(), w.data(), dx.data());
    conv2d_bwd_weights_convgemm(sh, x.data(), dy.data(), dw.data(), nullptr);
  };
  auto first_dx = nan_vector(x_size(sh));
  auto first_dw = nan_vector(w_size(sh));
  run(first_dx, first_dw);
  for (int rep = 1; rep < 5; ++rep) {
    auto dx_other = nan_vector(x_size(other));
    auto dw_other = nan_vector(w_size(other));
    conv2d_bwd_data_convgemm(other, dy_other.data(), w_other.data(), dx_other.data());
    conv2d_bwd_weights_convgemm(other, x_other.data(), dy_other.data(), dw_other.data(), nullptr);
    auto dx = nan_vector(x_size(sh));
    auto dw = nan_vector(w_size(sh));
    run(dx, dw);
    ASSERT_TRUE(bitwise_equal(dx, first_dx)) << "backward-data, run " << rep + 1;
    ASSERT_TRUE(bitwise_equal(dw, first_dw)) << "backward-weights, run " << rep + 1;
  }
  auto dx = nan_vector(x_size(sh));
  auto dw = nan_vector(w_size(sh));
  std::thread(run, std::ref(dx), std::ref(dw)).join();
  EXPECT_TRUE(bitwise_equal(dx, first_dx)) << "backward-data on another thread";
  EXPECT_TRUE(bitwise_equal(dw, first_dw)) << "backward-weights on another thread";
}

const auto kCaseName = [](const ::testing::TestParamInfo<ConvCase>& info) {
  return info.param.ukernel == "auto" ? info.param.name : info.param.name + "_" + info.param.ukernel;
};
INSTANTIATE_TEST_SUITE_P(Geometry, ConvgemmKernelTest, ::testing::ValuesIn(geometry_cases()), kCaseName);
INSTANTIATE_TEST_SUITE_P(Networks, ConvgemmKernelTest, ::testing::ValuesIn(network_cases()), kCaseName);

// Every micro-kernel of convgemm's own, forced on every case (the selection picks them for some shapes only),
// whether this CPU runs it or not: those it cannot run are skipped with a message.
std::vector<ConvCase> own_ukernel_cases() {
  std::vector<ConvCase> cases;
  for (const std::string& ukernel : convgemm_own_ukernels()) {
    for (auto list : {geometry_cases(), network_cases()}) {
      for (ConvCase c : list) {
        c.ukernel = ukernel;
        cases.push_back(c);
      }
    }
  }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(OwnUkernels, ConvgemmKernelTest, ::testing::ValuesIn(own_ukernel_cases()), kCaseName);

TEST(ConvgemmKernelTest, UnknownMicroKernelIsRejectedWithTheKnownOnes) {
  try {
    convgemm_force_ukernel("avx1024_64x64");
    FAIL() << "expected dtnn::InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'avx1024_64x64'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("blis"), std::string::npos) << e.what();
  }
  EXPECT_EQ(convgemm_ukernel(square(2, 64, 8, 64, 3, 1, 1), ConvPass::kFwd) != "", true);
}

// The selection picks only kernels this CPU runs, and BLIS's for backward-data.
TEST(ConvgemmKernelTest, SelectionPicksKernelsThisCpuRuns) {
  const auto runs = convgemm_ukernels();
  for (const ConvCase& c : network_cases()) {
    for (const ConvPass pass : {ConvPass::kFwd, ConvPass::kBwdData, ConvPass::kBwdWeights}) {
      const std::string name = convgemm_ukernel(c.shape, pass);
      EXPECT_NE(std::find(runs.begin(), runs.end(), name), runs.end()) << c.name << ": " << name;
      if (pass == ConvPass::kBwdData) {
        EXPECT_EQ(name, "blis") << c.name;
      }
    }
  }
}

TEST(ConvgemmKernelTest, BlockingIsTheOneOfBlisSgemm) {
  cntx_t* cntx = bli_gks_query_cntx();
  const GemmBlocking b = convgemm_blocking();
  EXPECT_EQ(b.mr, bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_MR, cntx));
  EXPECT_EQ(b.nr, bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_NR, cntx));
  EXPECT_EQ(b.kc, bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_KC, cntx));
  EXPECT_EQ(b.mc, bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_MC, cntx));
  EXPECT_EQ(b.nc, bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_NC, cntx));
  if (cpu_has_avx512() && std::getenv("BLIS_ARCH_TYPE") == std::to_string(static_cast<int>(BLIS_ARCH_SKX))) {
    EXPECT_EQ(b.mr, 32);
    EXPECT_EQ(b.nr, 12);
  }
}

TEST(ConvgemmKernelTest, EmptyBatchWritesZeroGradientsAndNothingElse) {
  const Conv2dShape sh = square(0, 4, 6, 5, 3, 1, 1);
  std::vector<float> none;
  auto dw = nan_vector(w_size(sh));
  auto db = nan_vector(static_cast<std::size_t>(sh.k));
  conv2d_fwd_convgemm(sh, none.data(), none.data(), none.data(), 1, none.data());
  conv2d_bwd_data_convgemm(sh, none.data(), none.data(), none.data());
  conv2d_bwd_weights_convgemm(sh, none.data(), none.data(), dw.data(), db.data());
  EXPECT_TRUE(bitwise_equal(dw, std::vector<float>(w_size(sh), 0.0f)));
  EXPECT_TRUE(bitwise_equal(db, std::vector<float>(static_cast<std::size_t>(sh.k), 0.0f)));
}

TEST(ConvgemmKernelTest, WorkspaceIsBoundedByTheCacheBlocksWhateverTheBatch) {
  const Conv2dShape sh = square(64, 64, 32, 64, 3, 1, 1);
  const GemmBlocking b = convgemm_blocking();
  const std::size_t blocks =
      (static_cast<std::size_t>(b.mc) * b.kc + static_cast<std::size_t>(b.kc) * b.nc + b.mr * b.nr) * sizeof(float);
  EXPECT_GT(convgemm_workspace_bytes(sh), 0u);
  EXPECT_LE(convgemm_workspace_bytes(sh), blocks);
  Conv2dShape big = sh;
  big.n = 1024;
  EXPECT_EQ(convgemm_workspace_bytes(big), convgemm_workspace_bytes(sh));
  // The im2col variant holds a sample's im2col matrix on top of its packing buffers.
  EXPECT_GE(im2col_workspace_bytes(sh), static_cast<std::size_t>(64) * 9 * 32 * 32 * sizeof(float));
}

}  // namespace
}  // namespace dtnn::kernels::cpu
