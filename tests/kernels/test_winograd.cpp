// SPDX-License-Identifier: Apache-2.0
// Winograd F(2x2, 3x3) against direct convolution in double precision (conv_reference.hpp), forward (with and
// without bias and ReLU) and backward-data, with every micro-kernel this CPU runs forced in turn: odd and even
// output sizes, paddings 0-2 and asymmetric, 1 to 512 channels (partial MR and NR panels, the transformed weights
// of large layers in blocks of output channels), tiles that cross chunks and rows of tiles that cross panels, and
// every 3x3 stride-1 convolution of VGG16 and ResNet-18/50 (CIFAR).
// Tolerance 1e-4 of the largest reference magnitude, as for convgemm: the transforms add a few additions per
// product (measured errors 1e-7 to 4e-7). Results are bitwise identical run after run, on another thread, and for
// a sample whatever the samples beside it (how the batch is split into tiles changes nothing).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "codelets/cpu/convgemm.hpp"
#include "codelets/cpu/winograd.hpp"
#include "conv_reference.hpp"
#include "core/cpu_features.hpp"
#include "core/errors.hpp"
#include "kernel_test_util.hpp"

namespace dtnn::kernels::cpu {
namespace {

using test::all_close;
using test::bitwise_equal;
using test::checked_elements;
using test::concat;
using test::conv_shape;
using test::matches_at;
using test::nan_vector;
using test::random_vector;
using test::reference_dx;
using test::reference_y;
using test::w_size;
using test::x_size;
using test::y_size;

constexpr double kRtol = 1e-4;

struct WinogradCase {
  std::string name;
  Conv2dShape shape;
  std::string ukernel;
};

void PrintTo(const WinogradCase& c, std::ostream* os) { *os << c.name << " (" << c.ukernel << ")"; }

std::vector<WinogradCase> shapes() {
  std::vector<WinogradCase> cases = {
      //                              n  c   h   w  k  r  s sh sw pt pb pl pr dh dw g
      {"Same3x3", conv_shape(2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), ""},
      {"OddOutput", conv_shape(2, 5, 7, 9, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), ""},
      {"Valid", conv_shape(3, 33, 9, 6, 17, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1), ""},
      {"AsymmetricPadding", conv_shape(3, 7, 9, 6, 5, 3, 3, 1, 1, 0, 2, 1, 2, 1, 1, 1), ""},
      {"Padding2", conv_shape(2, 8, 5, 5, 40, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1, 1), ""},
      {"SingleInputChannel", conv_shape(2, 1, 12, 11, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), ""},
      {"OnePixel", conv_shape(5, 6, 1, 1, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), ""},
      {"WideRows", conv_shape(1, 4, 3, 75, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), ""},
      // 70 output channels: a partial NR panel; 200 channels over 40x40: several chunks.
      {"PartialPanels", conv_shape(2, 3, 11, 13, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), ""},
      {"SeveralChunks", conv_shape(2, 200, 40, 40, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), ""},
      // 512 x 136 channels: the transformed weights in blocks of output channels (the last partial; backward-data's
      // 136 x 512 too); forward's 300 tiles in two chunks, each transforming the blocks again.
      {"WeightBlocksSeveralChunks", conv_shape(3, 512, 20, 20, 136, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), ""},
  };
  const int layers[][3] = {{3, 32, 64},   {64, 32, 64},  {64, 16, 128}, {128, 16, 128}, {128, 8, 256},
                           {256, 8, 256}, {256, 4, 512}, {512, 4, 512}, {512, 2, 512}};
  for (const auto& l : layers) {
    cases.push_back({concat("Net_", l[0], "to", l[2], "_in", l[1]),
                     conv_shape(2, l[0], l[1], l[1], l[2], 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), ""});
  }
  std::vector<WinogradCase> all;
  for (const std::string& k : {std::string("avx512_32x8"), std::string("avx2_24x4")}) {
    for (WinogradCase c : cases) {
      c.ukernel = k;
      all.push_back(c);
    }
  }
  return all;
}

class WinogradKernelTest : public ::testing::TestWithParam<WinogradCase> {
 protected:
  void SetUp() override {
    const auto runs = winograd_ukernels();
    if (std::find(runs.begin(), runs.end(), GetParam().ukernel) == runs.end()) {
      GTEST_SKIP() << "micro-kernel " << GetParam().ukernel << " needs an instruction set this CPU lacks";
    }
    winograd_force_ukernel(GetParam().ukernel);
    ASSERT_TRUE(winograd_fits(GetParam().shape));
  }
  void TearDown() override { winograd_force_ukernel("auto"); }
};

TEST_P(WinogradKernelTest, ForwardMatchesDirectConvolutionWithAndWithoutBiasAndRelu) {
  const Conv2dShape& sh = GetParam().shape;
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
      conv2d_fwd_winograd(sh, x.data(), w.data(), with_bias ? b.data() : nullptr, relu, y.data());
      EXPECT_TRUE(matches_at(y, idx, ref, kRtol)) << "bias " << with_bias << ", relu " << relu;
    }
  }
}

TEST_P(WinogradKernelTest, BackwardDataOverwritesDxWithTransposedConvolution) {
  const Conv2dShape& sh = GetParam().shape;
  const auto dy = random_vector(y_size(sh), 5);
  const auto w = random_vector(w_size(sh), 6);
  const auto idx = checked_elements(x_size(sh), static_cast<double>(sh.k) * 9, 7);
  std::vector<double> ref(idx.size());
  for (std::size_t j = 0; j < idx.size(); ++j) {
    ref[j] = reference_dx(sh, dy, w, idx[j]);
  }
  auto dx = nan_vector(x_size(sh));
  conv2d_bwd_data_winograd(sh, dy.data(), w.data(), dx.data());
  EXPECT_TRUE(matches_at(dx, idx, ref, kRtol));
}

// Runs with calls of another shape in between (which resize and refill the thread-local buffers), one on a fresh
// thread, and the batch computed one sample at a time: all bitwise identical.
TEST_P(WinogradKernelTest, PassesAreBitwiseReproducibleAndIndependentOfTheBatchSplit) {
  const Conv2dShape& sh = GetParam().shape;
  const auto x = random_vector(x_size(sh), 8);
  const auto w = random_vector(w_size(sh), 9);
  const auto dy = random_vector(y_size(sh), 10);
  const auto run = [&](const Conv2dShape& s, const float* xs, const float* dys, float* y, float* dx) {
    conv2d_fwd_winograd(s, xs, w.data(), nullptr, 0, y);
    conv2d_bwd_data_winograd(s, dys, w.data(), dx);
  };
  auto first_y = nan_vector(y_size(sh));
  auto first_dx = nan_vector(x_size(sh));
  run(sh, x.data(), dy.data(), first_y.data(), first_dx.data());

  Conv2dShape other = sh;
  other.h += 3;
  other.w += 5;
  other.n = 1;
  const auto x_other = random_vector(x_size(other), 11);
  const auto dy_other = random_vector(y_size(other), 12);
  auto y_other = nan_vector(y_size(other));
  auto dx_other = nan_vector(x_size(other));
  run(other, x_other.data(), dy_other.data(), y_other.data(), dx_other.data());

  auto y = nan_vector(y_size(sh));
  auto dx = nan_vector(x_size(sh));
  run(sh, x.data(), dy.data(), y.data(), dx.data());
  EXPECT_TRUE(bitwise_equal(y, first_y)) << "forward, second run";
  EXPECT_TRUE(bitwise_equal(dx, first_dx)) << "backward-data, second run";

  std::thread(run, sh, x.data(), dy.data(), y.data(), dx.data()).join();
  EXPECT_TRUE(bitwise_equal(y, first_y)) << "forward on another thread";
  EXPECT_TRUE(bitwise_equal(dx, first_dx)) << "backward-data on another thread";

  Conv2dShape one = sh;
  one.n = 1;
  const std::size_t xs = x_size(one), ys = y_size(one);
  for (int i = 0; i < sh.n; ++i) {
    run(one, x.data() + i * xs, dy.data() + i * ys, y.data() + i * ys, dx.data() + i * xs);
  }
  EXPECT_TRUE(bitwise_equal(y, first_y)) << "forward, one sample per call";
  EXPECT_TRUE(bitwise_equal(dx, first_dx)) << "backward-data, one sample per call";
}

const auto kCaseName = [](const ::testing::TestParamInfo<WinogradCase>& info) {
  return info.param.name + "_" + info.param.ukernel;
};
INSTANTIATE_TEST_SUITE_P(Shapes, WinogradKernelTest, ::testing::ValuesIn(shapes()), kCaseName);

TEST(WinogradKernelTest, ServesOnly3x3Stride1UngroupedShapes) {
  if (winograd_ukernels().empty()) {
    const Conv2dShape sh = conv_shape(1, 4, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    EXPECT_FALSE(winograd_fits(sh)) << "no AVX2 or AVX-512: convgemm serves every shape";
    GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2 + FMA";
  }
  //                                           n  c  h  w  k  r  s sh sw pt pb pl pr dh dw g
  EXPECT_TRUE(winograd_fits(conv_shape(1, 4, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1)));
  EXPECT_FALSE(winograd_fits(conv_shape(1, 4, 8, 8, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1))) << "stride 2";
  EXPECT_FALSE(winograd_fits(conv_shape(1, 4, 8, 8, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1))) << "1x1";
  EXPECT_FALSE(winograd_fits(conv_shape(1, 4, 8, 8, 4, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1))) << "5x5";
  EXPECT_FALSE(winograd_fits(conv_shape(1, 4, 8, 8, 4, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1))) << "dilation 2";
  EXPECT_FALSE(winograd_fits(conv_shape(1, 4, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2))) << "groups 2";
  EXPECT_FALSE(winograd_fits(conv_shape(1, 4, 8, 8, 4, 3, 3, 1, 1, 3, 3, 3, 3, 1, 1, 1))) << "padding 3";
}

// It pays from 32 output tiles of 2x2 a call: the weight transform costs the same for any batch.
TEST(WinogradKernelTest, PaysFromThirtyTwoOutputTilesACall) {
  if (winograd_ukernels().empty()) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2 + FMA";
  //                                   n   c  h  w   k  r  s sh sw pt pb pl pr dh dw g
  const Conv2dShape plane2 = conv_shape(1, 512, 2, 2, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);  // 1 tile a sample
  const Conv2dShape plane4 = conv_shape(1, 512, 4, 4, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);  // 4
  const Conv2dShape plane5 = conv_shape(1, 64, 5, 5, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);    // 9 (edge tiles)
  const Conv2dShape plane16 = conv_shape(1, 64, 16, 16, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1); // 64
  EXPECT_EQ(winograd_min_batch(plane2), 32);
  EXPECT_EQ(winograd_min_batch(plane4), 8);
  EXPECT_EQ(winograd_min_batch(plane5), 4);
  EXPECT_EQ(winograd_min_batch(plane16), 1);
  EXPECT_EQ(winograd_min_batch(conv_shape(1, 3, 16, 16, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1)), 0) << "3 channels";
  EXPECT_EQ(winograd_min_batch(conv_shape(1, 64, 1, 1, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1)), 0) << "1x1 plane";
  for (const auto& [sh, min] : {std::pair{plane2, 32}, std::pair{plane4, 8}}) {
    Conv2dShape s = sh;
    s.n = min - 1;
    EXPECT_FALSE(winograd_pays(s)) << s.n << " samples at " << s.h << "x" << s.w;
    s.n = min;
    EXPECT_TRUE(winograd_pays(s)) << s.n << " samples at " << s.h << "x" << s.w;
  }
}

TEST(WinogradKernelTest, SelectionIsTheWidestInstructionSet) {
  const auto runs = winograd_ukernels();
  if (cpu_has_avx512()) {
    ASSERT_FALSE(runs.empty());
    EXPECT_EQ(runs.front(), "avx512_32x8");
  } else if (cpu_has_avx2_fma()) {
    ASSERT_FALSE(runs.empty());
    EXPECT_EQ(runs.front(), "avx2_24x4");
  } else {
    EXPECT_TRUE(runs.empty());
  }
}

TEST(WinogradKernelTest, UnknownMicroKernelIsRejectedWithTheKnownOnes) {
  try {
    winograd_force_ukernel("avx1024_64x64");
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("avx1024_64x64"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected auto"), std::string::npos) << e.what();
  }
}

// Working memory is the transformed weights (or a block of them) and one chunk: it stops growing with the batch
// once a chunk is full.
TEST(WinogradKernelTest, WorkspaceIsBoundedWhateverTheBatch) {
  if (winograd_ukernels().empty()) {
    GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2 + FMA";
  }
  const Conv2dShape small = conv_shape(8, 64, 32, 32, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  Conv2dShape large = small;
  large.n = 256;
  EXPECT_GT(winograd_workspace_bytes(small), 0u);
  EXPECT_EQ(winograd_workspace_bytes(small), winograd_workspace_bytes(large));
  EXPECT_LT(winograd_workspace_bytes(large), std::size_t{4} << 20) << "16 x 64 x 64 weights and one chunk";
}

// Where the transformed weights would be large (16 x 512 x 512 floats: 16 MiB), a block of them is held at a time.
TEST(WinogradKernelTest, WorkspaceHoldsABlockOfLargeWeights) {
  if (winograd_ukernels().empty()) {
    GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2 + FMA";
  }
  const Conv2dShape deep = conv_shape(32, 512, 4, 4, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  const std::size_t all_weights = std::size_t{16} * 512 * 512 * sizeof(float);
  EXPECT_GT(winograd_workspace_bytes(deep), 0u);
  EXPECT_LT(winograd_workspace_bytes(deep), all_weights * 3 / 4) << "a 4 MiB block of weights and one chunk";
}

}  // namespace
}  // namespace dtnn::kernels::cpu
