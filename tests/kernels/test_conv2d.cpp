// SPDX-License-Identifier: Apache-2.0
// The im2col convolution against direct 7-loop convolutions in double precision.
// Tolerance: 1e-4 relative to the largest magnitude of the reference tensor (fp32 GEMM vs double, sums of at
// most a few hundred products of values in [-1, 1]).
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "codelets/cpu/kernels.hpp"
#include "kernel_test_util.hpp"

namespace dtnn::kernels::cpu {
namespace {

using test::all_close;
using test::conv_shape;
using test::bitwise_equal;
using test::nan_vector;
using test::random_vector;

constexpr double kRtol = 1e-4;

struct ConvCase {
  const char* name;
  Conv2dShape shape;
};

// gtest prints parameters of failing cases; the name is what identifies a case.
void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }


const ConvCase kCases[] = {
    //                           n  c   h   w  k  r  s sh sw pt pb pl pr dh dw g
    {"Same3x3", conv_shape(2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1)},
    {"Pointwise", conv_shape(3, 5, 7, 6, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1)},
    {"PointwiseStride2", conv_shape(2, 4, 9, 7, 3, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1)},
    {"PointwisePadded", conv_shape(1, 3, 5, 4, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)},
    {"PointwiseGrouped", conv_shape(2, 6, 5, 5, 9, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 3)},
    {"Stride2OddSize", conv_shape(2, 3, 11, 9, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1)},
    {"Stride3SkipsInputs", conv_shape(1, 2, 10, 11, 3, 2, 2, 3, 3, 0, 0, 0, 0, 1, 1, 1)},
    {"Stride3Padded", conv_shape(3, 2, 13, 12, 2, 3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1)},
    {"AsymmetricPadding", conv_shape(2, 2, 6, 7, 3, 3, 4, 1, 1, 0, 2, 3, 1, 1, 1, 1)},
    {"AsymmetricPaddingStride2", conv_shape(1, 3, 9, 10, 2, 3, 3, 2, 2, 1, 0, 0, 1, 1, 1, 1)},
    {"Dilation2", conv_shape(1, 3, 12, 10, 2, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1)},
    {"MixedStrideDilation", conv_shape(2, 2, 11, 9, 3, 3, 2, 2, 1, 1, 3, 0, 2, 1, 2, 1)},
    {"Groups2", conv_shape(2, 4, 7, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2)},
    {"Groups2Stride2Dilation2", conv_shape(3, 4, 13, 11, 4, 3, 3, 2, 2, 2, 1, 1, 2, 2, 2, 2)},
    {"Depthwise", conv_shape(3, 6, 9, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6)},
    {"DepthwiseStride2Dilation2", conv_shape(2, 5, 11, 12, 5, 3, 3, 2, 2, 2, 2, 3, 1, 2, 2, 5)},
    {"DepthwiseMultiplier2", conv_shape(1, 3, 7, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3)},
    {"PaddingWiderThanKernel", conv_shape(1, 2, 5, 5, 2, 3, 3, 1, 1, 3, 3, 3, 3, 1, 1, 1)},
    {"Stem7x7Stride2", conv_shape(1, 3, 17, 15, 4, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1)},
    {"KernelCoversInput", conv_shape(2, 3, 5, 4, 2, 5, 4, 1, 1, 0, 0, 0, 0, 1, 1, 1)},
    {"Wide5x5Groups2", conv_shape(3, 4, 9, 9, 4, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1, 2)},
    {"RowsOfWindowsEntirelyInPadding", conv_shape(2, 2, 2, 3, 3, 2, 2, 2, 2, 3, 0, 0, 3, 3, 1, 1)},
    {"SingleChannelSinglePixelOut", conv_shape(1, 1, 3, 3, 1, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1)},
};

std::size_t x_size(const Conv2dShape& sh) { return static_cast<std::size_t>(sh.n) * sh.c * sh.h * sh.w; }
std::size_t y_size(const Conv2dShape& sh) { return static_cast<std::size_t>(sh.n) * sh.k * sh.out_h() * sh.out_w(); }
std::size_t w_size(const Conv2dShape& sh) { return static_cast<std::size_t>(sh.k) * (sh.c / sh.groups) * sh.r * sh.s; }

// Calls fn(x index, w index, y index) for every multiply-add of the convolution: the 7 loops of the definition
// (sample, output channel, output row, output column, input channel of the group, kernel row, kernel column).
template <typename Fn>
void direct_conv(const Conv2dShape& sh, Fn&& fn) {
  const int cg = sh.c / sh.groups;
  const int kg = sh.k / sh.groups;
  const int oh = sh.out_h();
  const int ow = sh.out_w();
  for (int i = 0; i < sh.n; ++i) {
    for (int kk = 0; kk < sh.k; ++kk) {
      const int g = kk / kg;
      for (int oy = 0; oy < oh; ++oy) {
        for (int ox = 0; ox < ow; ++ox) {
          const std::size_t yi = ((static_cast<std::size_t>(i) * sh.k + kk) * oh + oy) * ow + ox;
          for (int ci = 0; ci < cg; ++ci) {
            for (int kr = 0; kr < sh.r; ++kr) {
              for (int ks = 0; ks < sh.s; ++ks) {
                const int iy = oy * sh.stride_h - sh.pad_top + kr * sh.dil_h;
                const int ix = ox * sh.stride_w - sh.pad_left + ks * sh.dil_w;
                if (iy < 0 || iy >= sh.h || ix < 0 || ix >= sh.w) {
                  continue;
                }
                const std::size_t xi =
                    ((static_cast<std::size_t>(i) * sh.c + static_cast<std::size_t>(g) * cg + ci) * sh.h + iy) * sh.w +
                    ix;
                const std::size_t wi = ((static_cast<std::size_t>(kk) * cg + ci) * sh.r + kr) * sh.s + ks;
                fn(xi, wi, yi);
              }
            }
          }
        }
      }
    }
  }
}

std::vector<double> reference_fwd(const Conv2dShape& sh, const std::vector<float>& x, const std::vector<float>& w,
                                  const float* b) {
  std::vector<double> y(y_size(sh), 0.0);
  const std::size_t plane = static_cast<std::size_t>(sh.out_h()) * sh.out_w();
  if (b != nullptr) {
    for (std::size_t yi = 0; yi < y.size(); ++yi) {
      y[yi] = b[(yi / plane) % sh.k];
    }
  }
  direct_conv(sh, [&](std::size_t xi, std::size_t wi, std::size_t yi) {
    y[yi] += static_cast<double>(x[xi]) * static_cast<double>(w[wi]);
  });
  return y;
}

std::vector<double> reference_bwd_data(const Conv2dShape& sh, const std::vector<float>& dy,
                                       const std::vector<float>& w) {
  std::vector<double> dx(x_size(sh), 0.0);
  direct_conv(sh, [&](std::size_t xi, std::size_t wi, std::size_t yi) {
    dx[xi] += static_cast<double>(w[wi]) * static_cast<double>(dy[yi]);
  });
  return dx;
}

std::vector<double> reference_bwd_weights(const Conv2dShape& sh, const std::vector<float>& x,
                                          const std::vector<float>& dy) {
  std::vector<double> dw(w_size(sh), 0.0);
  direct_conv(sh, [&](std::size_t xi, std::size_t wi, std::size_t yi) {
    dw[wi] += static_cast<double>(x[xi]) * static_cast<double>(dy[yi]);
  });
  return dw;
}

std::vector<double> reference_bias_grad(const Conv2dShape& sh, const std::vector<float>& dy) {
  std::vector<double> db(static_cast<std::size_t>(sh.k), 0.0);
  const std::size_t plane = static_cast<std::size_t>(sh.out_h()) * sh.out_w();
  for (std::size_t yi = 0; yi < dy.size(); ++yi) {
    db[(yi / plane) % sh.k] += dy[yi];
  }
  return db;
}

class Conv2dIm2colKernelTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dIm2colKernelTest, ForwardWithBiasMatchesDirectConvolution) {
  const Conv2dShape& sh = GetParam().shape;
  ASSERT_GT(sh.out_h(), 0);
  ASSERT_GT(sh.out_w(), 0);
  const auto x = random_vector(x_size(sh), 1);
  const auto w = random_vector(w_size(sh), 2);
  const auto b = random_vector(static_cast<std::size_t>(sh.k), 3);
  auto y = nan_vector(y_size(sh));
  conv2d_fwd_im2col(sh, x.data(), w.data(), b.data(), y.data());
  EXPECT_TRUE(all_close(y, reference_fwd(sh, x, w, b.data()), kRtol));
}

TEST_P(Conv2dIm2colKernelTest, ForwardWithoutBiasMatchesDirectConvolution) {
  const Conv2dShape& sh = GetParam().shape;
  const auto x = random_vector(x_size(sh), 4);
  const auto w = random_vector(w_size(sh), 5);
  auto y = nan_vector(y_size(sh));
  conv2d_fwd_im2col(sh, x.data(), w.data(), nullptr, y.data());
  EXPECT_TRUE(all_close(y, reference_fwd(sh, x, w, nullptr), kRtol));
}

TEST_P(Conv2dIm2colKernelTest, BackwardDataOverwritesDxWithTransposedConvolution) {
  const Conv2dShape& sh = GetParam().shape;
  const auto dy = random_vector(y_size(sh), 6);
  const auto w = random_vector(w_size(sh), 7);
  auto dx = nan_vector(x_size(sh));
  conv2d_bwd_data_im2col(sh, dy.data(), w.data(), dx.data());
  EXPECT_TRUE(all_close(dx, reference_bwd_data(sh, dy, w), kRtol));
}

TEST_P(Conv2dIm2colKernelTest, BackwardWeightsOverwritesDwAndDbWithSumsOverSamples) {
  const Conv2dShape& sh = GetParam().shape;
  const auto x = random_vector(x_size(sh), 8);
  const auto dy = random_vector(y_size(sh), 9);
  auto dw = nan_vector(w_size(sh));
  auto db = nan_vector(static_cast<std::size_t>(sh.k));
  conv2d_bwd_weights_im2col(sh, x.data(), dy.data(), dw.data(), db.data());
  EXPECT_TRUE(all_close(dw, reference_bwd_weights(sh, x, dy), kRtol));
  EXPECT_TRUE(all_close(db, reference_bias_grad(sh, dy), kRtol));

  auto dw_without_db = nan_vector(w_size(sh));
  conv2d_bwd_weights_im2col(sh, x.data(), dy.data(), dw_without_db.data(), nullptr);
  EXPECT_TRUE(bitwise_equal(dw_without_db, dw));
}

TEST_P(Conv2dIm2colKernelTest, BackwardWeightsIsBitwiseReproducible) {
  const Conv2dShape& sh = GetParam().shape;
  const auto x = random_vector(x_size(sh), 10);
  const auto dy = random_vector(y_size(sh), 11);
  auto first = nan_vector(w_size(sh));
  auto second = nan_vector(w_size(sh));
  conv2d_bwd_weights_im2col(sh, x.data(), dy.data(), first.data(), nullptr);
  // A differently sized call in between reshapes the thread-local scratch; the result must not depend on it.
  Conv2dShape other = sh;
  other.h += 3;
  other.w += 5;
  const auto x_other = random_vector(x_size(other), 12);
  const auto dy_other = random_vector(y_size(other), 13);
  auto dw_other = nan_vector(w_size(other));
  conv2d_bwd_weights_im2col(other, x_other.data(), dy_other.data(), dw_other.data(), nullptr);
  conv2d_bwd_weights_im2col(sh, x.data(), dy.data(), second.data(), nullptr);
  EXPECT_TRUE(bitwise_equal(second, first));
}

// col2im_add must be the adjoint of im2col: <im2col(x), col> == <x, col2im(col)> for every group. Together with
// the checks above this pins down the per-sample building blocks the codelets may call directly.
TEST_P(Conv2dIm2colKernelTest, Col2imAddIsTheAdjointOfIm2col) {
  const Conv2dShape& sh = GetParam().shape;
  const std::size_t sample = static_cast<std::size_t>(sh.c) * sh.h * sh.w;
  const std::size_t col_size =
      static_cast<std::size_t>(sh.c / sh.groups) * sh.r * sh.s * static_cast<std::size_t>(sh.out_h()) * sh.out_w();
  const auto x = random_vector(sample, 14);
  for (int g = 0; g < sh.groups; ++g) {
    const auto col = random_vector(col_size, 15 + static_cast<std::uint32_t>(g));
    auto im = nan_vector(col_size);
    im2col(sh, x.data(), g, im.data());
    std::vector<float> back(sample, 0.0f);
    col2im_add(sh, col.data(), g, back.data());
    double lhs = 0.0;
    double rhs = 0.0;
    for (std::size_t i = 0; i < col_size; ++i) {
      lhs += static_cast<double>(im[i]) * col[i];
    }
    for (std::size_t i = 0; i < sample; ++i) {
      rhs += static_cast<double>(x[i]) * back[i];
    }
    EXPECT_NEAR(lhs, rhs, 1e-4 * (1.0 + std::abs(lhs))) << "group " << g;
    // Channels outside the group are not touched by col2im_add.
    const std::size_t plane = static_cast<std::size_t>(sh.h) * sh.w;
    const std::size_t cg = static_cast<std::size_t>(sh.c / sh.groups);
    for (std::size_t i = 0; i < sample; ++i) {
      const std::size_t channel = i / plane;
      if (channel / cg != static_cast<std::size_t>(g)) {
        ASSERT_EQ(back[i], 0.0f) << "group " << g << " wrote channel " << channel;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv2dIm2colKernelTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<ConvCase>& info) { return std::string(info.param.name); });

TEST(Conv2dIm2colKernelTest, Im2colPlacesZerosWhereTheWindowIsInPadding) {
  Conv2dShape sh = conv_shape(1, 1, 2, 2, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  const std::vector<float> x = {1, 2, 3, 4};
  std::vector<float> col = nan_vector(9 * 4);
  im2col(sh, x.data(), 0, col.data());
  // Row (kr, ks) holds x shifted by (kr - 1, ks - 1) over the 2x2 output; the centre row is x itself.
  const std::vector<float> want = {
      0, 0, 0, 1,  // (0,0)
      0, 0, 1, 2,  // (0,1)
      0, 0, 2, 0,  // (0,2)
      0, 1, 0, 3,  // (1,0)
      1, 2, 3, 4,  // (1,1)
      2, 0, 4, 0,  // (1,2)
      0, 3, 0, 0,  // (2,0)
      3, 4, 0, 0,  // (2,1)
      4, 0, 0, 0,  // (2,2)
  };
  EXPECT_TRUE(bitwise_equal(col, want));
}

}  // namespace
}  // namespace dtnn::kernels::cpu
