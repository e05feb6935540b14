// SPDX-License-Identifier: Apache-2.0
// Average pooling, batch normalisation, dropout, activations and softmax kernels against naive double references.
// Tolerances: 1e-6 relative to the largest reference magnitude for double-accumulated kernels and element-wise
// formulas (fp32 rounding of each result); bitwise where a kernel promises independence from how rows are split.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "codelets/cpu/nn_kernels.hpp"
#include "kernel_test_util.hpp"

namespace dtnn::kernels::cpu {
namespace {

using test::all_close;
using test::bitwise_equal;
using test::concat;
using test::nan_vector;
using test::random_vector;

// ---------------------------------------------------------------------------------------------------------------
// Average pooling

struct AvgPoolCase {
  const char* name;
  Pool2dShape shape;
};

void PrintTo(const AvgPoolCase& c, std::ostream* os) { *os << c.name; }

Pool2dShape avg_shape(int n, int c, int h, int w, int kh, int kw, int stride, int pad) {
  Pool2dShape sh;
  sh.n = n;
  sh.c = c;
  sh.h = h;
  sh.w = w;
  sh.kh = kh;
  sh.kw = kw;
  sh.stride_h = sh.stride_w = stride;
  sh.pad_h = sh.pad_w = pad;
  return sh;
}

// PyTorch's divisor, spelled out independently of the kernel: with count_include_pad, the window clipped to the
// padded input; without, the number of its cells inside the input.
double reference_divisor(const Pool2dShape& sh, int include_pad, int oy, int ox) {
  int cells = 0;
  for (int dy = 0; dy < sh.kh; ++dy) {
    for (int dx = 0; dx < sh.kw; ++dx) {
      const int iy = oy * sh.stride_h - sh.pad_h + dy;
      const int ix = ox * sh.stride_w - sh.pad_w + dx;
      const bool in_padded = iy < sh.h + sh.pad_h && ix < sh.w + sh.pad_w;
      const bool inside = iy >= 0 && iy < sh.h && ix >= 0 && ix < sh.w;
      cells += include_pad ? (in_padded ? 1 : 0) : (inside ? 1 : 0);
    }
  }
  return cells;
}

class AvgPoolKernelTest : public ::testing::TestWithParam<AvgPoolCase> {};

TEST_P(AvgPoolKernelTest, ForwardAveragesEachWindowWithPyTorchsDivisor) {
  const Pool2dShape& sh = GetParam().shape;
  const int oh = sh.out_h(), ow = sh.out_w();
  const auto x = random_vector(static_cast<std::size_t>(sh.n) * sh.c * sh.h * sh.w, 1);
  for (int include_pad = 0; include_pad <= 1; ++include_pad) {
    std::vector<double> ref(static_cast<std::size_t>(sh.n) * sh.c * oh * ow);
    for (int p = 0; p < sh.n * sh.c; ++p) {
      for (int oy = 0; oy < oh; ++oy) {
        for (int ox = 0; ox < ow; ++ox) {
          double acc = 0.0;
          for (int dy = 0; dy < sh.kh; ++dy) {
            for (int dx = 0; dx < sh.kw; ++dx) {
              const int iy = oy * sh.stride_h - sh.pad_h + dy;
              const int ix = ox * sh.stride_w - sh.pad_w + dx;
              if (iy >= 0 && iy < sh.h && ix >= 0 && ix < sh.w) acc += x[(p * sh.h + iy) * sh.w + ix];
            }
          }
          ref[(p * oh + oy) * ow + ox] = acc / reference_divisor(sh, include_pad, oy, ox);
        }
      }
    }
    auto y = nan_vector(ref.size());
    avgpool2d_fwd(sh, include_pad, x.data(), y.data());
    EXPECT_TRUE(all_close(y, ref, 1e-6)) << "count_include_pad=" << include_pad;
  }
}

TEST_P(AvgPoolKernelTest, BackwardIsTheAdjointOfForward) {
  const Pool2dShape& sh = GetParam().shape;
  const int oh = sh.out_h(), ow = sh.out_w();
  const auto dy = random_vector(static_cast<std::size_t>(sh.n) * sh.c * oh * ow, 2);
  for (int include_pad = 0; include_pad <= 1; ++include_pad) {
    std::vector<double> ref(static_cast<std::size_t>(sh.n) * sh.c * sh.h * sh.w, 0.0);
    for (int p = 0; p < sh.n * sh.c; ++p) {
      for (int oy = 0; oy < oh; ++oy) {
        for (int ox = 0; ox < ow; ++ox) {
          const double g = dy[(p * oh + oy) * ow + ox] / reference_divisor(sh, include_pad, oy, ox);
          for (int ddy = 0; ddy < sh.kh; ++ddy) {
            for (int ddx = 0; ddx < sh.kw; ++ddx) {
              const int iy = oy * sh.stride_h - sh.pad_h + ddy;
              const int ix = ox * sh.stride_w - sh.pad_w + ddx;
              if (iy >= 0 && iy < sh.h && ix >= 0 && ix < sh.w) ref[(p * sh.h + iy) * sh.w + ix] += g;
            }
          }
        }
      }
    }
    auto dx = nan_vector(ref.size());
    avgpool2d_bwd_data(sh, include_pad, dy.data(), dx.data());
    EXPECT_TRUE(all_close(dx, ref, 1e-6)) << "count_include_pad=" << include_pad;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AvgPoolKernelTest,
                         ::testing::Values(AvgPoolCase{"K2S2", avg_shape(2, 3, 8, 8, 2, 2, 2, 0)},
                                           AvgPoolCase{"K2S2OddSize", avg_shape(1, 2, 7, 9, 2, 2, 2, 0)},
                                           AvgPoolCase{"K3S2Pad1", avg_shape(2, 2, 8, 10, 3, 3, 2, 1)},
                                           AvgPoolCase{"K3S1Pad1Overlapping", avg_shape(1, 2, 5, 6, 3, 3, 1, 1)},
                                           AvgPoolCase{"K2x3S1", avg_shape(1, 1, 4, 5, 2, 3, 1, 0)},
                                           AvgPoolCase{"K4S3Pad2", avg_shape(2, 1, 9, 11, 4, 4, 3, 2)},
                                           AvgPoolCase{"GlobalWindow", avg_shape(2, 2, 3, 3, 3, 3, 1, 0)}),
                         [](const ::testing::TestParamInfo<AvgPoolCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(AvgPoolKernelTest, PaddedCornerDividesByTheWholeWindowOnlyWhenPaddingCounts) {
  Pool2dShape sh = avg_shape(1, 1, 2, 2, 3, 3, 1, 1);  // 2x2 output; every window covers the 4 cells
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
  std::vector<float> y(4);
  avgpool2d_fwd(sh, 1, x.data(), y.data());
  EXPECT_FLOAT_EQ(y[0], 10.0f / 9.0f);
  avgpool2d_fwd(sh, 0, x.data(), y.data());
  EXPECT_FLOAT_EQ(y[0], 2.5f);
}

struct PlaneCase {
  int n, c;
  std::size_t plane;
};

void PrintTo(const PlaneCase& c, std::ostream* os) { *os << concat("n=", c.n, " c=", c.c, " plane=", c.plane); }

std::string plane_case_name(const ::testing::TestParamInfo<PlaneCase>& info) {
  return concat("N", info.param.n, "C", info.param.c, "Plane", info.param.plane);
}

const auto kPlaneCases = ::testing::Values(PlaneCase{1, 1, 1}, PlaneCase{2, 3, 1}, PlaneCase{3, 4, 7},
                                           PlaneCase{4, 5, 49}, PlaneCase{2, 16, 64}, PlaneCase{1, 2, 10007});

class GlobalAvgPoolKernelTest : public ::testing::TestWithParam<PlaneCase> {};

TEST_P(GlobalAvgPoolKernelTest, ForwardAndBackwardMatchTheMeanOfEachPlane) {
  const auto [n, c, plane] = GetParam();
  const std::size_t planes = static_cast<std::size_t>(n) * c;
  const auto x = random_vector(planes * plane, 3);
  std::vector<double> ref(planes, 0.0);
  for (std::size_t p = 0; p < planes; ++p) {
    for (std::size_t j = 0; j < plane; ++j) ref[p] += x[p * plane + j];
    ref[p] /= static_cast<double>(plane);
  }
  auto y = nan_vector(planes);
  global_avgpool2d_fwd(n, c, plane, x.data(), y.data());
  EXPECT_TRUE(all_close(y, ref, 1e-6));

  const auto dy = random_vector(planes, 4);
  std::vector<double> ref_dx(planes * plane);
  for (std::size_t i = 0; i < ref_dx.size(); ++i) ref_dx[i] = dy[i / plane] / static_cast<double>(plane);
  auto dx = nan_vector(ref_dx.size());
  global_avgpool2d_bwd_data(n, c, plane, dy.data(), dx.data());
  EXPECT_TRUE(all_close(dx, ref_dx, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Shapes, GlobalAvgPoolKernelTest, kPlaneCases, plane_case_name);

// ---------------------------------------------------------------------------------------------------------------
// Batch normalisation

struct BatchStats {
  std::vector<double> mean, var;  // biased variance
};

BatchStats reference_stats(int n, int c, std::size_t plane, const std::vector<float>& x) {
  BatchStats s{std::vector<double>(c, 0.0), std::vector<double>(c, 0.0)};
  const double count = static_cast<double>(n) * plane;
  for (int i = 0; i < n; ++i)
    for (int ch = 0; ch < c; ++ch)
      for (std::size_t j = 0; j < plane; ++j) s.mean[ch] += x[(i * c + ch) * plane + j];
  for (int ch = 0; ch < c; ++ch) s.mean[ch] /= count;
  for (int i = 0; i < n; ++i)
    for (int ch = 0; ch < c; ++ch)
      for (std::size_t j = 0; j < plane; ++j) {
        const double d = x[(i * c + ch) * plane + j] - s.mean[ch];
        s.var[ch] += d * d;
      }
  for (int ch = 0; ch < c; ++ch) s.var[ch] /= count;
  return s;
}

// The training-mode statistics as the task graph computes them, in one process: per-sample partials, sample-order
// double sums, finish.
struct KernelStats {
  std::vector<float> mean_invstd;  // [2, c]
  std::vector<float> running_mean, running_var;
};

KernelStats kernel_stats(int n, int c, std::size_t plane, const std::vector<float>& x, const BatchNormUpdate& u) {
  KernelStats k{std::vector<float>(2 * c), std::vector<float>(c, 0.5f), std::vector<float>(c, 2.0f)};
  std::vector<float> partials(static_cast<std::size_t>(n) * c);
  std::vector<double> acc(c, 0.0);
  batch_norm_sums(n, c, plane, x.data(), partials.data());
  batch_norm_accumulate(n, c, partials.data(), acc.data());
  batch_norm_finish_mean(c, u.count, acc.data(), k.mean_invstd.data());
  batch_norm_sqdev_sums(n, c, plane, x.data(), k.mean_invstd.data(), partials.data());
  std::fill(acc.begin(), acc.end(), 0.0);
  batch_norm_accumulate(n, c, partials.data(), acc.data());
  batch_norm_finish_var(c, u, acc.data(), k.mean_invstd.data(), k.mean_invstd.data() + c, k.running_mean.data(),
                        k.running_var.data());
  return k;
}

// Every case has more than one value per channel (training statistics need a variance).
const auto kBatchNormCases = ::testing::Values(PlaneCase{1, 2, 3}, PlaneCase{2, 3, 1}, PlaneCase{3, 4, 7},
                                               PlaneCase{4, 5, 49}, PlaneCase{2, 16, 64}, PlaneCase{1, 2, 10007});

class BatchNormKernelTest : public ::testing::TestWithParam<PlaneCase> {};

TEST_P(BatchNormKernelTest, StatisticsAndRunningUpdatesMatchTheDoubleFormulas) {
  const auto [n, c, plane] = GetParam();
  // An offset of 3 makes the one-pass formula E[x^2] - E[x]^2 lose digits; the two passes must not.
  const auto x = random_vector(static_cast<std::size_t>(n) * c * plane, 5, 2.0f, 4.0f);
  const BatchNormUpdate u{static_cast<double>(n) * plane, 1e-5, 0.1};
  const KernelStats k = kernel_stats(n, c, plane, x, u);
  const BatchStats s = reference_stats(n, c, plane, x);
  std::vector<double> ref_invstd(c), ref_rm(c), ref_rv(c);
  for (int ch = 0; ch < c; ++ch) {
    ref_invstd[ch] = 1.0 / std::sqrt(s.var[ch] + u.eps);
    ref_rm[ch] = 0.9 * 0.5 + 0.1 * s.mean[ch];
    ref_rv[ch] = 0.9 * 2.0 + 0.1 * s.var[ch] * u.count / (u.count - 1.0);
  }
  EXPECT_TRUE(all_close(std::vector<float>(k.mean_invstd.begin(), k.mean_invstd.begin() + c), s.mean, 1e-6));
  EXPECT_TRUE(all_close(std::vector<float>(k.mean_invstd.begin() + c, k.mean_invstd.end()), ref_invstd, 1e-5));
  EXPECT_TRUE(all_close(k.running_mean, ref_rm, 1e-6));
  EXPECT_TRUE(all_close(k.running_var, ref_rv, 1e-6));
}

TEST_P(BatchNormKernelTest, ForwardAndBackwardMatchTheDoubleFormulas) {
  const auto [n, c, plane] = GetParam();
  const std::size_t count = static_cast<std::size_t>(n) * c * plane;
  const auto x = random_vector(count, 6, -1.0f, 3.0f);
  const auto dy = random_vector(count, 7);
  const auto gamma = random_vector(static_cast<std::size_t>(c), 8, 0.5f, 1.5f);
  const auto beta = random_vector(static_cast<std::size_t>(c), 9);
  const BatchNormUpdate u{static_cast<double>(n) * plane, 1e-5, 0.1};
  const KernelStats k = kernel_stats(n, c, plane, x, u);
  const float* mean = k.mean_invstd.data();
  const float* invstd = mean + c;

  const BatchStats s = reference_stats(n, c, plane, x);
  std::vector<double> ref_y(count), xhat(count), ref_dx(count);
  std::vector<double> sum_dy(c, 0.0), sum_dy_xhat(c, 0.0);
  for (std::size_t e = 0; e < count; ++e) {
    const int ch = static_cast<int>((e / plane) % c);
    xhat[e] = (x[e] - s.mean[ch]) / std::sqrt(s.var[ch] + u.eps);
    ref_y[e] = xhat[e] * gamma[ch] + beta[ch];
    sum_dy[ch] += dy[e];
    sum_dy_xhat[ch] += dy[e] * xhat[e];
  }
  for (std::size_t e = 0; e < count; ++e) {
    const int ch = static_cast<int>((e / plane) % c);
    ref_dx[e] = gamma[ch] / std::sqrt(s.var[ch] + u.eps) *
                (dy[e] - sum_dy[ch] / u.count - xhat[e] * sum_dy_xhat[ch] / u.count);
  }

  auto y = nan_vector(count);
  batch_norm_fwd(n, c, plane, x.data(), mean, invstd, gamma.data(), beta.data(), y.data());
  EXPECT_TRUE(all_close(y, ref_y, 1e-5));

  std::vector<float> partials(static_cast<std::size_t>(n) * 2 * c);
  batch_norm_bwd_sums(n, c, plane, x.data(), dy.data(), mean, invstd, partials.data());
  std::vector<double> acc(2 * c, 0.0);
  batch_norm_accumulate(n, 2 * c, partials.data(), acc.data());
  std::vector<float> mean_dy(c), mean_dy_xhat(c);
  auto dgamma = nan_vector(c);
  auto dbeta = nan_vector(c);
  batch_norm_finish_bwd(c, u.count, acc.data(), mean_dy.data(), mean_dy_xhat.data(), dgamma.data(), dbeta.data());
  EXPECT_TRUE(all_close(dgamma, sum_dy_xhat, 1e-5));
  EXPECT_TRUE(all_close(dbeta, sum_dy, 1e-6));

  auto dx = nan_vector(count);
  batch_norm_bwd_data(n, c, plane, x.data(), dy.data(), mean, invstd, gamma.data(), mean_dy.data(),
                      mean_dy_xhat.data(), dx.data());
  EXPECT_TRUE(all_close(dx, ref_dx, 1e-4));
}

TEST_P(BatchNormKernelTest, InferenceAppliesTheRunningStatisticsAsScaleAndShift) {
  const auto [n, c, plane] = GetParam();
  const std::size_t count = static_cast<std::size_t>(n) * c * plane;
  const auto x = random_vector(count, 10);
  const auto mean = random_vector(static_cast<std::size_t>(c), 11);
  const auto var = random_vector(static_cast<std::size_t>(c), 12, 0.1f, 3.0f);
  const auto gamma = random_vector(static_cast<std::size_t>(c), 13);
  const auto beta = random_vector(static_cast<std::size_t>(c), 14);
  const double eps = 1e-3;
  std::vector<double> ref(count), ref_plain(count), ref_frozen_dx(count);
  const auto dy = random_vector(count, 15);
  for (std::size_t e = 0; e < count; ++e) {
    const int ch = static_cast<int>((e / plane) % c);
    const double xhat = (x[e] - mean[ch]) / std::sqrt(var[ch] + eps);
    ref[e] = xhat * gamma[ch] + beta[ch];
    ref_plain[e] = xhat;
    ref_frozen_dx[e] = dy[e] * gamma[ch] / std::sqrt(var[ch] + eps);
  }
  auto y = nan_vector(count);
  batch_norm_infer_fwd(n, c, plane, eps, x.data(), mean.data(), var.data(), gamma.data(), beta.data(), y.data());
  EXPECT_TRUE(all_close(y, ref, 1e-6));
  batch_norm_infer_fwd(n, c, plane, eps, x.data(), mean.data(), var.data(), nullptr, nullptr, y.data());
  EXPECT_TRUE(all_close(y, ref_plain, 1e-5));

  std::vector<float> invstd(c);
  batch_norm_invstd(c, eps, var.data(), invstd.data());
  auto dx = nan_vector(count);
  batch_norm_bwd_data(n, c, plane, x.data(), dy.data(), mean.data(), invstd.data(), gamma.data(), nullptr, nullptr,
                      dx.data());
  EXPECT_TRUE(all_close(dx, ref_frozen_dx, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormKernelTest, kBatchNormCases, plane_case_name);

TEST(BatchNormKernelTest, PartialsAndSumsDoNotDependOnHowRowsAreSplit) {
  const int n = 7, c = 3;
  const std::size_t plane = 13;
  const auto x = random_vector(static_cast<std::size_t>(n) * c * plane, 16);
  std::vector<float> whole(static_cast<std::size_t>(n) * c), split(whole.size());
  batch_norm_sums(n, c, plane, x.data(), whole.data());
  batch_norm_sums(3, c, plane, x.data(), split.data());
  batch_norm_sums(4, c, plane, x.data() + 3 * c * plane, split.data() + 3 * c);
  EXPECT_TRUE(bitwise_equal(split, whole));
  std::vector<double> one(c, 0.0), chained(c, 0.0);
  batch_norm_accumulate(n, c, whole.data(), one.data());
  batch_norm_accumulate(2, c, whole.data(), chained.data());
  batch_norm_accumulate(0, c, whole.data(), chained.data());
  batch_norm_accumulate(5, c, whole.data() + 2 * c, chained.data());
  for (int ch = 0; ch < c; ++ch) EXPECT_EQ(one[ch], chained[ch]);
}

TEST(BatchNormKernelTest, ScaleShiftFoldsTheRunningStatistics) {
  const std::vector<float> mean = {0.5f, -1.0f}, var = {4.0f, 0.25f}, gamma = {2.0f, 1.0f}, beta = {0.0f, 3.0f};
  std::vector<float> scale(2), shift(2);
  batch_norm_scale_shift(2, 0.0, mean.data(), var.data(), gamma.data(), beta.data(), scale.data(), shift.data());
  EXPECT_FLOAT_EQ(scale[0], 1.0f);
  EXPECT_FLOAT_EQ(shift[0], -0.5f);
  EXPECT_FLOAT_EQ(scale[1], 2.0f);
  EXPECT_FLOAT_EQ(shift[1], 5.0f);
}

// ---------------------------------------------------------------------------------------------------------------
// Dropout

TEST(DropoutKernelTest, MaskDoesNotDependOnHowRowsAreSplit) {
  const int rows = 9;
  const std::size_t row_elements = 37;
  const auto x = random_vector(rows * row_elements, 17);
  const DropoutParams p = dropout_params(42, 5, 0.3);
  std::vector<float> mask(x.size()), y(x.size()), mask_split(x.size()), y_split(x.size());
  dropout_fwd(p, 0, rows, row_elements, x.data(), mask.data(), y.data());
  dropout_fwd(p, 0, 4, row_elements, x.data(), mask_split.data(), y_split.data());
  dropout_fwd(p, 4, 5, row_elements, x.data() + 4 * row_elements, mask_split.data() + 4 * row_elements,
              y_split.data() + 4 * row_elements);
  EXPECT_TRUE(bitwise_equal(mask_split, mask));
  EXPECT_TRUE(bitwise_equal(y_split, y));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const bool kept = dropout_draw(42, 5, static_cast<std::int64_t>(i / row_elements), i % row_elements) >= p.threshold;
    ASSERT_EQ(mask[i], kept ? p.scale : 0.0f) << "at " << i;
    ASSERT_EQ(y[i], x[i] * mask[i]) << "at " << i;
  }
}

TEST(DropoutKernelTest, KeepsAboutOneMinusRateAndScalesByItsInverse) {
  for (const double rate : {0.1, 0.5, 0.8}) {
    const int rows = 64;
    const std::size_t row_elements = 1000;
    const std::vector<float> x(rows * row_elements, 1.0f);
    std::vector<float> mask(x.size()), y(x.size());
    dropout_fwd(dropout_params(7, 0, rate), 0, rows, row_elements, x.data(), mask.data(), y.data());
    std::size_t kept = 0;
    for (float m : mask) {
      if (m != 0.0f) {
        ++kept;
        ASSERT_FLOAT_EQ(m, static_cast<float>(1.0 / (1.0 - rate)));
      }
    }
    // 64000 Bernoulli draws: 0.01 is more than 5 standard deviations for every rate here.
    EXPECT_NEAR(static_cast<double>(kept) / x.size(), 1.0 - rate, 0.01) << "rate " << rate;
  }
}

TEST(DropoutKernelTest, StepsSeedsAndRowsGiveDifferentMasksAndRateZeroKeepsAll) {
  const std::size_t row_elements = 256;
  const std::vector<float> x(2 * row_elements, 1.0f);
  auto mask_of = [&](std::uint64_t seed, std::int64_t step, double rate) {
    std::vector<float> mask(x.size()), y(x.size());
    dropout_fwd(dropout_params(seed, step, rate), 0, 2, row_elements, x.data(), mask.data(), y.data());
    return mask;
  };
  const auto base = mask_of(1, 0, 0.5);
  EXPECT_NE(mask_of(1, 1, 0.5), base);
  EXPECT_NE(mask_of(2, 0, 0.5), base);
  EXPECT_EQ(mask_of(1, 0, 0.5), base);
  EXPECT_NE(std::vector<float>(base.begin(), base.begin() + row_elements),
            std::vector<float>(base.begin() + row_elements, base.end()));
  for (float m : mask_of(1, 0, 0.0)) ASSERT_EQ(m, 1.0f);
}

TEST(DropoutKernelTest, BackwardMultipliesByTheMask) {
  const auto mask = std::vector<float>{0.0f, 2.0f, 2.0f, 0.0f};
  const auto dy = std::vector<float>{1.0f, -3.0f, 0.5f, 7.0f};
  std::vector<float> dx(4);
  dropout_bwd_data(4, mask.data(), dy.data(), dx.data());
  EXPECT_EQ(dx, (std::vector<float>{0.0f, -6.0f, 1.0f, 0.0f}));
}

// ---------------------------------------------------------------------------------------------------------------
// Activations

// Inputs over a wide range, including the tails where naive formulas overflow or cancel.
std::vector<float> activation_inputs() {
  std::vector<float> x = random_vector(2001, 18, -6.0f, 6.0f);
  for (float v : {-100.0f, -80.0f, -30.0f, -10.0f, -5.0f, -1e-4f, 0.0f, 1e-4f, 5.0f, 10.0f, 30.0f, 80.0f, 100.0f}) {
    x.push_back(v);
  }
  return x;
}

// Element-wise relative check (|got - ref| <= rtol * |ref| + atol): the tails must keep their relative accuracy.
::testing::AssertionResult close_each(const std::vector<float>& got, const std::vector<double>& ref, double rtol,
                                      double atol) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - ref[i]) <= rtol * std::abs(ref[i]) + atol)) {
      return ::testing::AssertionFailure() << "at [" << i << "]: got " << got[i] << ", want " << ref[i];
    }
  }
  return ::testing::AssertionSuccess();
}

double phi(double v) { return std::exp(-0.5 * v * v) / std::sqrt(2.0 * M_PI); }
double cdf(double v) { return 0.5 * std::erfc(-v / std::sqrt(2.0)); }

struct ActivationCase {
  const char* name;
  void (*fwd)(const std::vector<float>& x, std::vector<float>& y);
  // dy = 1: the derivative itself
  void (*bwd)(const std::vector<float>& x, const std::vector<float>& y, std::vector<float>& dx);
  double (*f)(double);
  double (*df)(double);
};

void PrintTo(const ActivationCase& c, std::ostream* os) { *os << c.name; }

const std::vector<float>& ones(std::size_t n) {
  static std::vector<float> v;
  v.assign(n, 1.0f);
  return v;
}

const ActivationCase kActivations[] = {
    {"Sigmoid", [](const auto& x, auto& y) { sigmoid_fwd(x.size(), x.data(), y.data()); },
     [](const auto&, const auto& y, auto& dx) { sigmoid_bwd_data(y.size(), y.data(), ones(y.size()).data(), dx.data()); },
     [](double v) { return 1.0 / (1.0 + std::exp(-v)); },
     [](double v) {
       const double s = 1.0 / (1.0 + std::exp(-v));
       return s * (1.0 - s);
     }},
    {"Tanh", [](const auto& x, auto& y) { tanh_fwd(x.size(), x.data(), y.data()); },
     [](const auto&, const auto& y, auto& dx) { tanh_bwd_data(y.size(), y.data(), ones(y.size()).data(), dx.data()); },
     [](double v) { return std::tanh(v); },
     [](double v) { return 1.0 - std::tanh(v) * std::tanh(v); }},
    {"LeakyReLU", [](const auto& x, auto& y) { leaky_relu_fwd(x.size(), 0.2f, x.data(), y.data()); },
     [](const auto& x, const auto&, auto& dx) {
       leaky_relu_bwd_data(x.size(), 0.2f, x.data(), ones(x.size()).data(), dx.data());
     },
     [](double v) { return v > 0 ? v : 0.2 * v; }, [](double v) { return v > 0 ? 1.0 : 0.2; }},
    {"ELU", [](const auto& x, auto& y) { elu_fwd(x.size(), 1.5f, x.data(), y.data()); },
     [](const auto& x, const auto&, auto& dx) {
       elu_bwd_data(x.size(), 1.5f, x.data(), ones(x.size()).data(), dx.data());
     },
     [](double v) { return v > 0 ? v : 1.5 * std::expm1(v); }, [](double v) { return v > 0 ? 1.0 : 1.5 * std::exp(v); }},
    {"GELU", [](const auto& x, auto& y) { gelu_fwd(x.size(), x.data(), y.data()); },
     [](const auto& x, const auto&, auto& dx) { gelu_bwd_data(x.size(), x.data(), ones(x.size()).data(), dx.data()); },
     [](double v) { return v * cdf(v); }, [](double v) { return cdf(v) + v * phi(v); }},
};

class ActivationKernelTest : public ::testing::TestWithParam<ActivationCase> {};

TEST_P(ActivationKernelTest, ForwardAndDerivativeMatchTheFormulasIncludingTheTails) {
  const ActivationCase& a = GetParam();
  const auto x = activation_inputs();
  std::vector<double> ref(x.size()), ref_d(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    ref[i] = a.f(x[i]);
    ref_d[i] = a.df(x[i]);
  }
  auto y = nan_vector(x.size());
  a.fwd(x, y);
  // A few ulps of relative error, plus an absolute floor at float's smallest normal numbers.
  EXPECT_TRUE(close_each(y, ref, 4e-6, 1e-37));
  auto dx = nan_vector(x.size());
  a.bwd(x, y, dx);
  // Derivatives from the rounded output (Sigmoid, Tanh) lose relative accuracy where they are tiny; 1e-6 of the
  // largest derivative is what fp32 outputs allow.
  EXPECT_TRUE(close_each(dx, ref_d, 1e-5, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Kinds, ActivationKernelTest, ::testing::ValuesIn(kActivations),
                         [](const ::testing::TestParamInfo<ActivationCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(ActivationKernelTest, BackwardScalesTheIncomingGradient) {
  const auto x = random_vector(513, 19, -3.0f, 3.0f);
  const auto dy = random_vector(x.size(), 20);
  std::vector<float> y(x.size()), dx(x.size()), d1(x.size());
  gelu_bwd_data(x.size(), x.data(), dy.data(), dx.data());
  gelu_bwd_data(x.size(), x.data(), ones(x.size()).data(), d1.data());
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_FLOAT_EQ(dx[i], dy[i] * d1[i]) << "at " << i;
  sigmoid_fwd(x.size(), x.data(), y.data());
  sigmoid_bwd_data(x.size(), y.data(), dy.data(), dx.data());
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_FLOAT_EQ(dx[i], dy[i] * y[i] * (1.0f - y[i])) << "at " << i;
}

TEST(ActivationKernelTest, SigmoidIsFiniteAndSaturatesForHugeInputs) {
  const std::vector<float> x = {-1e30f, -1000.0f, 1000.0f, 1e30f, std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity()};
  std::vector<float> y(x.size());
  sigmoid_fwd(x.size(), x.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{0.0f, 0.0f, 1.0f, 1.0f, 1.0f, 0.0f}));
  const std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN()};
  sigmoid_fwd(1, nan.data(), y.data());
  EXPECT_TRUE(std::isnan(y[0]));
}

// ---------------------------------------------------------------------------------------------------------------
// Softmax

class SoftmaxKernelTest : public ::testing::TestWithParam<PlaneCase> {};

TEST_P(SoftmaxKernelTest, ForwardAndBackwardMatchTheDoubleFormulas) {
  const auto [n, c, plane] = GetParam();
  const std::size_t count = static_cast<std::size_t>(n) * c * plane;
  const auto x = random_vector(count, 21, -8.0f, 8.0f);
  const auto dy = random_vector(count, 22);
  std::vector<double> ref(count), ref_dx(count);
  for (int i = 0; i < n; ++i) {
    for (std::size_t p = 0; p < plane; ++p) {
      auto at = [&](int ch) { return (static_cast<std::size_t>(i) * c + ch) * plane + p; };
      double mx = -1e300, sum = 0.0, dot = 0.0;
      for (int ch = 0; ch < c; ++ch) mx = std::max(mx, static_cast<double>(x[at(ch)]));
      for (int ch = 0; ch < c; ++ch) sum += std::exp(x[at(ch)] - mx);
      for (int ch = 0; ch < c; ++ch) {
        ref[at(ch)] = std::exp(x[at(ch)] - mx) / sum;
        dot += dy[at(ch)] * ref[at(ch)];
      }
      for (int ch = 0; ch < c; ++ch) ref_dx[at(ch)] = ref[at(ch)] * (dy[at(ch)] - dot);
    }
  }
  auto y = nan_vector(count);
  softmax_fwd(n, c, plane, x.data(), y.data());
  EXPECT_TRUE(close_each(y, ref, 2e-6, 1e-12));
  auto dx = nan_vector(count);
  softmax_bwd_data(n, c, plane, y.data(), dy.data(), dx.data());
  EXPECT_TRUE(all_close(dx, ref_dx, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SoftmaxKernelTest, kPlaneCases, plane_case_name);

TEST(SoftmaxKernelTest, HugeLogitsDoNotOverflow) {
  const std::vector<float> x = {1000.0f, 1000.0f, -1000.0f, 3e38f};
  std::vector<float> y(4);
  softmax_fwd(1, 4, 1, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{0.0f, 0.0f, 0.0f, 1.0f}));
  softmax_fwd(2, 2, 1, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{0.5f, 0.5f, 0.0f, 1.0f}));
}

}  // namespace
}  // namespace dtnn::kernels::cpu
