// SPDX-License-Identifier: Apache-2.0
// Dense, bias, ReLU, pooling, loss, reductions and SGD against naive references.
// Tolerances: 1e-4 relative to the largest reference magnitude for GEMM results (fp32 vs double); 1e-6 for
// element-wise and double-accumulated kernels; exact for pooling, argmax counts and the fixed-order sums.
#include <blis.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "codelets/cpu/kernels.hpp"
#include "codelets/cpu/optim_kernels.hpp"
#include "kernel_test_util.hpp"

namespace dtnn::kernels::cpu {
namespace {

using test::all_close;
using test::bitwise_equal;
using test::concat;
using test::nan_vector;
using test::random_vector;

// The kernels are specified single-threaded; pin BLIS so that a BLIS_NUM_THREADS in the environment cannot
// change timings or results.
class SingleThreadedBlis : public ::testing::Environment {
 public:
  void SetUp() override { bli_thread_set_num_threads(1); }
};
[[maybe_unused]] ::testing::Environment* const kBlisEnvironment =
    ::testing::AddGlobalTestEnvironment(new SingleThreadedBlis);

// ---------------------------------------------------------------------------------------------------------------
// Dense

struct DenseCase {
  int n, in, out;
};

void PrintTo(const DenseCase& c, std::ostream* os) { *os << concat("n=", c.n, " in=", c.in, " out=", c.out); }

class DenseKernelTest : public ::testing::TestWithParam<DenseCase> {};

TEST_P(DenseKernelTest, ForwardMatchesNaiveMatrixProductPlusBias) {
  const auto [n, in, out] = GetParam();
  const auto x = random_vector(static_cast<std::size_t>(n) * in, 1);
  const auto w = random_vector(static_cast<std::size_t>(out) * in, 2);
  const auto b = random_vector(static_cast<std::size_t>(out), 3);
  std::vector<double> ref(static_cast<std::size_t>(n) * out);
  std::vector<double> ref_no_bias(ref.size());
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < out; ++j) {
      double acc = 0.0;
      for (int kk = 0; kk < in; ++kk) {
        acc += static_cast<double>(x[i * in + kk]) * w[j * in + kk];
      }
      ref_no_bias[i * out + j] = acc;
      ref[i * out + j] = acc + b[j];
    }
  }
  auto y = nan_vector(ref.size());
  dense_fwd(n, in, out, x.data(), w.data(), b.data(), y.data());
  EXPECT_TRUE(all_close(y, ref, 1e-4));
  auto y_no_bias = nan_vector(ref.size());
  dense_fwd(n, in, out, x.data(), w.data(), nullptr, y_no_bias.data());
  EXPECT_TRUE(all_close(y_no_bias, ref_no_bias, 1e-4));
}

TEST_P(DenseKernelTest, BackwardDataOverwritesDxWithDyTimesW) {
  const auto [n, in, out] = GetParam();
  const auto dy = random_vector(static_cast<std::size_t>(n) * out, 4);
  const auto w = random_vector(static_cast<std::size_t>(out) * in, 5);
  std::vector<double> ref(static_cast<std::size_t>(n) * in, 0.0);
  for (int i = 0; i < n; ++i) {
    for (int kk = 0; kk < in; ++kk) {
      for (int j = 0; j < out; ++j) {
        ref[i * in + kk] += static_cast<double>(dy[i * out + j]) * w[j * in + kk];
      }
    }
  }
  auto dx = nan_vector(ref.size());
  dense_bwd_data(n, in, out, dy.data(), w.data(), dx.data());
  EXPECT_TRUE(all_close(dx, ref, 1e-4));
}

TEST_P(DenseKernelTest, BackwardWeightsOverwritesDwAndDbWithSumsOverSamples) {
  const auto [n, in, out] = GetParam();
  const auto x = random_vector(static_cast<std::size_t>(n) * in, 6);
  const auto dy = random_vector(static_cast<std::size_t>(n) * out, 7);
  std::vector<double> ref_dw(static_cast<std::size_t>(out) * in, 0.0);
  std::vector<double> ref_db(static_cast<std::size_t>(out), 0.0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < out; ++j) {
      ref_db[j] += dy[i * out + j];
      for (int kk = 0; kk < in; ++kk) {
        ref_dw[j * in + kk] += static_cast<double>(dy[i * out + j]) * x[i * in + kk];
      }
    }
  }
  auto dw = nan_vector(ref_dw.size());
  auto db = nan_vector(ref_db.size());
  dense_bwd_weights(n, in, out, x.data(), dy.data(), dw.data(), db.data());
  EXPECT_TRUE(all_close(dw, ref_dw, 1e-4));
  EXPECT_TRUE(all_close(db, ref_db, 1e-5));
  auto dw_only = nan_vector(ref_dw.size());
  dense_bwd_weights(n, in, out, x.data(), dy.data(), dw_only.data(), nullptr);
  EXPECT_TRUE(bitwise_equal(dw_only, dw));
}

INSTANTIATE_TEST_SUITE_P(Shapes, DenseKernelTest,
                         ::testing::Values(DenseCase{1, 1, 1}, DenseCase{1, 7, 3}, DenseCase{3, 5, 1},
                                           DenseCase{4, 16, 8}, DenseCase{5, 33, 17}, DenseCase{17, 64, 31},
                                           DenseCase{32, 128, 10}, DenseCase{2, 300, 257}),
                         [](const ::testing::TestParamInfo<DenseCase>& info) {
                           return concat("N", info.param.n, "In", info.param.in, "Out", info.param.out);
                         });

// ---------------------------------------------------------------------------------------------------------------
// Bias

struct BiasCase {
  int n, channels;
  std::size_t plane;
};

void PrintTo(const BiasCase& c, std::ostream* os) {
  *os << concat("n=", c.n, " channels=", c.channels, " plane=", c.plane);
}

class BiasKernelTest : public ::testing::TestWithParam<BiasCase> {};

TEST_P(BiasKernelTest, ForwardAddsTheChannelBiasToEveryPlaneElement) {
  const auto [n, channels, plane] = GetParam();
  const std::size_t count = static_cast<std::size_t>(n) * channels * plane;
  const auto b = random_vector(static_cast<std::size_t>(channels), 1);
  const auto y0 = random_vector(count, 2);
  auto y = y0;
  bias_add_fwd(n, channels, plane, b.data(), y.data());
  for (std::size_t i = 0; i < count; ++i) {
    ASSERT_EQ(y[i], y0[i] + b[(i / plane) % channels]) << "at " << i;
  }
}

TEST_P(BiasKernelTest, BackwardOverwritesDbWithSumOverSamplesAndPlane) {
  const auto [n, channels, plane] = GetParam();
  const std::size_t count = static_cast<std::size_t>(n) * channels * plane;
  const auto dy = random_vector(count, 3);
  std::vector<double> ref(static_cast<std::size_t>(channels), 0.0);
  for (std::size_t i = 0; i < count; ++i) {
    ref[(i / plane) % channels] += dy[i];
  }
  auto db = nan_vector(ref.size());
  bias_bwd_weights(n, channels, plane, dy.data(), db.data());
  EXPECT_TRUE(all_close(db, ref, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Shapes, BiasKernelTest,
                         ::testing::Values(BiasCase{1, 1, 1}, BiasCase{2, 3, 5}, BiasCase{3, 7, 49},
                                           BiasCase{4, 16, 1}, BiasCase{1, 2, 100003}),
                         [](const ::testing::TestParamInfo<BiasCase>& info) {
                           return concat("N", info.param.n, "C", info.param.channels, "Plane", info.param.plane);
                         });

// ---------------------------------------------------------------------------------------------------------------
// ReLU

TEST(ReluKernelTest, ForwardClampsNegativesToZeroAndKeepsPositives) {
  const auto x = random_vector(1001, 1);
  auto y = nan_vector(x.size());
  relu_fwd(x.size(), x.data(), y.data());
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(y[i], x[i] > 0.0f ? x[i] : 0.0f) << "at " << i;
  }
}

TEST(ReluKernelTest, ForwardPropagatesNaN) {
  const std::vector<float> x = {std::numeric_limits<float>::quiet_NaN(), -1.0f, 2.0f};
  std::vector<float> y(3);
  relu_fwd(x.size(), x.data(), y.data());
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 2.0f);
}

TEST(ReluKernelTest, BackwardPassesGradientOnlyWhereOutputIsPositive) {
  const auto x = random_vector(1001, 2);
  std::vector<float> y(x.size());
  relu_fwd(x.size(), x.data(), y.data());
  y[0] = 0.0f;  // the kink itself gets no gradient
  const auto dy = random_vector(x.size(), 3);
  auto dx = nan_vector(x.size());
  relu_bwd_data(x.size(), y.data(), dy.data(), dx.data());
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(dx[i], y[i] > 0.0f ? dy[i] : 0.0f) << "at " << i;
  }
}

TEST(ReluKernelTest, WorksInPlace) {
  auto v = random_vector(257, 4);
  const auto x = v;
  relu_fwd(v.size(), v.data(), v.data());
  for (std::size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(v[i], x[i] > 0.0f ? x[i] : 0.0f);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Max pooling

Pool2dShape ceil_mode(Pool2dShape sh) {
  sh.ceil_mode = 1;
  return sh;
}

TEST(PoolShapeTest, CeilModeKeepsALastPartialWindowLikePyTorch) {
  Pool2dShape sh;
  sh.h = sh.w = 112;
  sh.kh = sh.kw = 3;
  sh.stride_h = sh.stride_w = 2;
  EXPECT_EQ(sh.out_h(), 55);
  sh.ceil_mode = 1;
  EXPECT_EQ(sh.out_h(), 56);  // torchvision GoogLeNet's maxpool1: 112 -> 56
  sh.h = 7;
  sh.kh = 2;
  EXPECT_EQ(sh.out_h(), 4);
  sh.h = 5;
  sh.kh = 3;
  sh.pad_h = 1;  // the window starting at 4 would start in the right padding: dropped
  EXPECT_EQ(sh.out_h(), 3);
}

Pool2dShape pool_shape(int n, int c, int h, int w, int kh, int kw, int stride, int pad) {
  Pool2dShape sh;
  sh.n = n;
  sh.c = c;
  sh.h = h;
  sh.w = w;
  sh.kh = kh;
  sh.kw = kw;
  sh.stride_h = stride;
  sh.stride_w = stride;
  sh.pad_h = pad;
  sh.pad_w = pad;
  return sh;
}

// Naive reference: padded cells read as -inf, the first strict maximum in row-major window order wins.
// Returns the winning flat input index per output.
std::vector<std::size_t> reference_argmax(const Pool2dShape& sh, const std::vector<float>& x) {
  std::vector<std::size_t> arg;
  for (int p = 0; p < sh.n * sh.c; ++p) {
    for (int oy = 0; oy < sh.out_h(); ++oy) {
      for (int ox = 0; ox < sh.out_w(); ++ox) {
        float best = -std::numeric_limits<float>::infinity();
        std::size_t best_index = SIZE_MAX;
        for (int ky = 0; ky < sh.kh; ++ky) {
          for (int kx = 0; kx < sh.kw; ++kx) {
            const int iy = oy * sh.stride_h - sh.pad_h + ky;
            const int ix = ox * sh.stride_w - sh.pad_w + kx;
            const bool inside = iy >= 0 && iy < sh.h && ix >= 0 && ix < sh.w;
            const std::size_t index = (static_cast<std::size_t>(p) * sh.h + iy) * sh.w + ix;
            const float v = inside ? x[index] : -std::numeric_limits<float>::infinity();
            if (v > best) {
              best = v;
              best_index = index;
            }
          }
        }
        arg.push_back(best_index);
      }
    }
  }
  return arg;
}

struct PoolCase {
  const char* name;
  Pool2dShape shape;
};

void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

class MaxPoolKernelTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(MaxPoolKernelTest, ForwardTakesTheWindowMaximumIgnoringPadding) {
  const Pool2dShape& sh = GetParam().shape;
  // All inputs negative: a padded cell read as 0 would wrongly win.
  const auto x = random_vector(static_cast<std::size_t>(sh.n) * sh.c * sh.h * sh.w, 1, -2.0f, -0.5f);
  const auto arg = reference_argmax(sh, x);
  auto y = nan_vector(arg.size());
  maxpool2d_fwd(sh, x.data(), y.data());
  for (std::size_t o = 0; o < arg.size(); ++o) {
    ASSERT_EQ(y[o], x[arg[o]]) << "output " << o;
  }
}

TEST_P(MaxPoolKernelTest, BackwardOverwritesDxAndRoutesEachGradientToTheArgmax) {
  const Pool2dShape& sh = GetParam().shape;
  const std::size_t count = static_cast<std::size_t>(sh.n) * sh.c * sh.h * sh.w;
  // Values quantised to a few levels so that ties are common and the first-maximum rule is exercised.
  auto x = random_vector(count, 2, 0.0f, 4.0f);
  for (auto& v : x) {
    v = std::floor(v);
  }
  const auto arg = reference_argmax(sh, x);
  const auto dy = random_vector(arg.size(), 3);
  std::vector<double> ref(count, 0.0);
  for (std::size_t o = 0; o < arg.size(); ++o) {
    ref[arg[o]] += dy[o];
  }
  auto dx = nan_vector(count);
  maxpool2d_bwd_data(sh, x.data(), dy.data(), dx.data());
  EXPECT_TRUE(all_close(dx, ref, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Shapes, MaxPoolKernelTest,
                         ::testing::Values(PoolCase{"K2S2", pool_shape(2, 3, 8, 8, 2, 2, 2, 0)},
                                           PoolCase{"K2S2OddSize", pool_shape(1, 2, 7, 9, 2, 2, 2, 0)},
                                           PoolCase{"K3S2Pad1", pool_shape(2, 2, 8, 10, 3, 3, 2, 1)},
                                           PoolCase{"K3S2Pad1OddSize", pool_shape(3, 1, 7, 7, 3, 3, 2, 1)},
                                           PoolCase{"K3S1Pad1Overlapping", pool_shape(1, 2, 5, 6, 3, 3, 1, 1)},
                                           PoolCase{"K2x3S1", pool_shape(1, 1, 4, 5, 2, 3, 1, 0)},
                                           PoolCase{"GlobalWindow", pool_shape(2, 2, 3, 3, 3, 3, 1, 0)},
                                           PoolCase{"K3S2Ceil", ceil_mode(pool_shape(2, 2, 8, 8, 3, 3, 2, 0))},
                                           PoolCase{"K2S2CeilOddSize", ceil_mode(pool_shape(1, 2, 7, 9, 2, 2, 2, 0))}),
                         [](const ::testing::TestParamInfo<PoolCase>& info) { return std::string(info.param.name); });

TEST(MaxPoolKernelTest, TiesGoToTheFirstPositionInRowMajorOrder) {
  const Pool2dShape sh = pool_shape(1, 1, 2, 2, 2, 2, 2, 0);
  const std::vector<float> x = {1.0f, 3.0f, 3.0f, 3.0f};
  const std::vector<float> dy = {5.0f};
  std::vector<float> dx = nan_vector(4);
  maxpool2d_bwd_data(sh, x.data(), dy.data(), dx.data());
  EXPECT_TRUE(bitwise_equal(dx, {0.0f, 5.0f, 0.0f, 0.0f}));
}

// Overlapping windows take a branch-free path on planes without a NaN; a plane with one goes by the exact rule: the
// first NaN of a window wins (forward NaN, its gradient to that cell), a window of -inf picks its first cell. One
// plane here holds a NaN and infinities, the other -inf but no NaN: both must follow the rule.
TEST(MaxPoolKernelTest, OverlappingWindowsWithNaNsAndInfinitiesFollowTheExactRule) {
  const Pool2dShape sh = pool_shape(1, 2, 6, 6, 3, 3, 2, 1);
  auto x = random_vector(72, 9, -1.0f, 1.0f);
  const float inf = std::numeric_limits<float>::infinity();
  x[7] = std::numeric_limits<float>::quiet_NaN();  // plane 0, row 1, column 1: windows (0,0), (0,1), (1,0), (1,1)
  x[8] = 5.0f;                                      // after the NaN in window (0, 1): the NaN still wins
  x[14] = -inf;
  x[0] = x[1] = x[6] = -inf;  // window (0, 0)'s other cells
  x[40] = x[41] = 3.0f;       // plane 1 (no NaN, the branch-free path): a tie, first wins
  x[36] = x[37] = x[42] = x[43] = -inf;  // and window (0, 0) all -inf: its first cell
  const std::vector<float> dy = random_vector(18, 10);
  std::vector<std::size_t> arg;
  for (int p = 0; p < 2; ++p) {
    for (int oy = 0; oy < 3; ++oy) {
      for (int ox = 0; ox < 3; ++ox) {
        std::ptrdiff_t best = -1;
        for (int iy = std::max(0, 2 * oy - 1); iy < std::min(6, 2 * oy + 2); ++iy) {
          for (int ix = std::max(0, 2 * ox - 1); ix < std::min(6, 2 * ox + 2); ++ix) {
            const std::ptrdiff_t i = p * 36 + iy * 6 + ix;
            const float b = best < 0 ? 0.0f : x[static_cast<std::size_t>(best)];
            if (best < 0 || x[static_cast<std::size_t>(i)] > b ||
                (std::isnan(x[static_cast<std::size_t>(i)]) && !std::isnan(b))) {
              best = i;
            }
          }
        }
        arg.push_back(static_cast<std::size_t>(best));
      }
    }
  }
  auto y = nan_vector(18);
  maxpool2d_fwd(sh, x.data(), y.data());
  auto dx = nan_vector(72);
  maxpool2d_bwd_data(sh, x.data(), dy.data(), dx.data());
  std::vector<double> ref(72, 0.0);
  for (std::size_t o = 0; o < 18; ++o) {
    const float want = x[arg[o]];
    EXPECT_TRUE(std::isnan(want) ? std::isnan(y[o]) : y[o] == want) << "output " << o;
    ref[arg[o]] += dy[o];
  }
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1])) << "the NaN wins its windows";
  EXPECT_TRUE(all_close(dx, ref, 1e-6));
}

// ---------------------------------------------------------------------------------------------------------------
// Softmax cross-entropy

struct XentReference {
  std::vector<double> dlogits;
  double loss = 0.0;
  double correct = 0.0;
};

std::size_t first_argmax(const float* v, int len) {
  std::size_t a = 0;
  for (int j = 1; j < len; ++j) {
    if (v[j] > v[a]) {
      a = static_cast<std::size_t>(j);
    }
  }
  return a;
}

XentReference reference_xent(int n, int classes, const std::vector<float>& z, const std::vector<float>& t,
                             double scale) {
  XentReference ref;
  ref.dlogits.resize(z.size());
  for (int i = 0; i < n; ++i) {
    const float* zi = z.data() + static_cast<std::size_t>(i) * classes;
    const float* ti = t.data() + static_cast<std::size_t>(i) * classes;
    double m = zi[0];
    for (int j = 1; j < classes; ++j) {
      m = std::max(m, static_cast<double>(zi[j]));
    }
    double sum = 0.0;
    for (int j = 0; j < classes; ++j) {
      sum += std::exp(zi[j] - m);
    }
    const double lse = m + std::log(sum);
    for (int j = 0; j < classes; ++j) {
      ref.loss -= ti[j] * (zi[j] - lse);
      ref.dlogits[static_cast<std::size_t>(i) * classes + j] = (std::exp(zi[j] - lse) - ti[j]) * scale;
    }
    if (first_argmax(zi, classes) == first_argmax(ti, classes)) {
      ref.correct += 1.0;
    }
  }
  return ref;
}

// One-hot rows, or rows smoothed with label smoothing 0.1 (still summing to 1).
std::vector<float> make_targets(int n, int classes, bool smoothed, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> pick(0, classes - 1);
  const float off = smoothed ? 0.1f / static_cast<float>(classes) : 0.0f;
  std::vector<float> t(static_cast<std::size_t>(n) * classes, off);
  for (int i = 0; i < n; ++i) {
    t[static_cast<std::size_t>(i) * classes + pick(gen)] += smoothed ? 0.9f : 1.0f;
  }
  return t;
}

struct XentCase {
  int n, classes;
  bool smoothed;
};

void PrintTo(const XentCase& c, std::ostream* os) {
  *os << concat("n=", c.n, " classes=", c.classes, c.smoothed ? " smoothed" : " one-hot");
}

class SoftmaxXentKernelTest : public ::testing::TestWithParam<XentCase> {};

TEST_P(SoftmaxXentKernelTest, MatchesDoublePrecisionReference) {
  const auto [n, classes, smoothed] = GetParam();
  const auto z = random_vector(static_cast<std::size_t>(n) * classes, 1, -8.0f, 8.0f);
  const auto t = make_targets(n, classes, smoothed, 2);
  const float scale = 1.0f / static_cast<float>(n);
  const auto ref = reference_xent(n, classes, z, t, scale);
  auto dz = nan_vector(z.size());
  float stats[kLossStats];
  std::fill(std::begin(stats), std::end(stats), std::numeric_limits<float>::quiet_NaN());
  softmax_xent_fwd_bwd(n, classes, z.data(), t.data(), scale, dz.data(), stats);
  // Gradients are probabilities differences in [-1, 1] times the scale: 1e-6 of the scale absolute.
  std::vector<float> dz_unscaled(dz.size());
  std::vector<double> ref_unscaled(dz.size());
  for (std::size_t i = 0; i < dz.size(); ++i) {
    dz_unscaled[i] = dz[i] / scale;
    ref_unscaled[i] = ref.dlogits[i] / scale;
  }
  EXPECT_TRUE(all_close(dz_unscaled, ref_unscaled, 1e-6));
  EXPECT_NEAR(stats[0], ref.loss, 1e-6 * std::max(1.0, ref.loss));
  EXPECT_EQ(stats[1], ref.correct);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SoftmaxXentKernelTest,
                         ::testing::Values(XentCase{1, 1, false}, XentCase{1, 10, false}, XentCase{4, 3, true},
                                           XentCase{16, 10, false}, XentCase{7, 1000, true},
                                           XentCase{33, 100, false}),
                         [](const ::testing::TestParamInfo<XentCase>& info) {
                           return concat("N", info.param.n, "Classes", info.param.classes,
                                         info.param.smoothed ? "Smoothed" : "OneHot");
                         });

TEST(SoftmaxXentKernelTest, LogitsOfMagnitude1e4GiveFiniteLossAndGradients) {
  const int n = 3;
  const int classes = 4;
  const std::vector<float> z = {1e4f, -1e4f, 0.0f,  5e3f,    // confident and right
                                -1e4f, 1e4f, 9999.0f, 0.0f,  // confident and wrong
                                1e4f, 1e4f, -1e4f, -1e4f};   // tie between two huge logits
  const std::vector<float> t = {1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0};
  const auto ref = reference_xent(n, classes, z, t, 1.0);
  std::vector<float> dz(z.size());
  float stats[kLossStats];
  softmax_xent_fwd_bwd(n, classes, z.data(), t.data(), 1.0f, dz.data(), stats);
  for (float g : dz) {
    ASSERT_TRUE(std::isfinite(g));
  }
  ASSERT_TRUE(std::isfinite(stats[0]));
  EXPECT_TRUE(all_close(dz, ref.dlogits, 1e-6));
  EXPECT_NEAR(stats[0], ref.loss, 1e-6 * ref.loss);  // about 1e4 for the wrong row plus log 2 for the tie
  EXPECT_EQ(stats[1], 1.0f);  // the tie's first index (0) is not the target (1)
}

TEST(SoftmaxXentKernelTest, GradientMayOverwriteTheLogitsInPlace) {
  const int n = 5;
  const int classes = 7;
  auto z = random_vector(static_cast<std::size_t>(n) * classes, 3, -3.0f, 3.0f);
  const auto t = make_targets(n, classes, true, 4);
  std::vector<float> separate(z.size());
  float stats_separate[kLossStats];
  softmax_xent_fwd_bwd(n, classes, z.data(), t.data(), 0.5f, separate.data(), stats_separate);
  float stats_in_place[kLossStats];
  softmax_xent_fwd_bwd(n, classes, z.data(), t.data(), 0.5f, z.data(), stats_in_place);
  EXPECT_TRUE(bitwise_equal(z, separate));
  EXPECT_EQ(stats_in_place[0], stats_separate[0]);
  EXPECT_EQ(stats_in_place[1], stats_separate[1]);
}

// Metrics of the loss kernels and the binary cross-entropy, against double-precision formulas.
struct MetricsRef {
  double loss = 0, top1 = 0, top5 = 0, se = 0, ae = 0;
  std::vector<double> grad;
};

MetricsRef metrics_reference(int n, int classes, const std::vector<float>& z, const std::vector<float>& t, int bce,
                             double scale) {
  MetricsRef r;
  r.grad.resize(z.size());
  for (int i = 0; i < n; ++i) {
    const float* zi = z.data() + i * classes;
    const float* ti = t.data() + i * classes;
    int arg_z = 0, arg_t = 0;
    for (int j = 1; j < classes; ++j) {
      if (zi[j] > zi[arg_z]) arg_z = j;
      if (ti[j] > ti[arg_t]) arg_t = j;
    }
    int above = 0;
    for (int j = 0; j < classes; ++j) above += zi[j] > zi[arg_t];
    r.top1 += arg_z == arg_t;
    r.top5 += above < 5;
    double m = zi[0], denom = 0;
    for (int j = 0; j < classes; ++j) m = std::max(m, double(zi[j]));
    for (int j = 0; j < classes; ++j) denom += std::exp(zi[j] - m);
    double row = 0, se = 0, ae = 0;
    for (int j = 0; j < classes; ++j) {
      const double p = bce ? 1.0 / (1.0 + std::exp(-double(zi[j]))) : std::exp(zi[j] - m) / denom;
      row += bce ? -(ti[j] * std::log(p) + (1 - ti[j]) * std::log(1 - p)) : -ti[j] * std::log(p);
      se += (p - ti[j]) * (p - ti[j]);
      ae += std::abs(p - ti[j]);
      r.grad[i * classes + j] = (p - ti[j]) * scale / (bce ? classes : 1);
    }
    r.loss += bce ? row / classes : row;
    r.se += se / classes;
    r.ae += ae / classes;
  }
  return r;
}

TEST(LossKernelTest, MetricsAndBinaryCrossEntropyMatchTheFormulas) {
  const int n = 6, classes = 9;
  const auto z = random_vector(static_cast<std::size_t>(n) * classes, 11, -4.0f, 4.0f);
  const auto t = make_targets(n, classes, true, 12);
  for (int bce : {0, 1}) {
    SCOPED_TRACE(bce ? "sigmoid + binary cross-entropy" : "softmax + cross-entropy");
    std::vector<float> dz(z.size());
    float stats[kLossStats];
    (bce ? sigmoid_bce_fwd_bwd : softmax_xent_fwd_bwd)(n, classes, z.data(), t.data(), 0.25f, dz.data(), stats);
    const MetricsRef ref = metrics_reference(n, classes, z, t, bce, 0.25);
    EXPECT_NEAR(stats[kLossSum], ref.loss, 1e-5 * std::max(1.0, ref.loss));
    EXPECT_EQ(stats[kCorrect], ref.top1);
    EXPECT_EQ(stats[kTop5Correct], ref.top5);
    EXPECT_NEAR(stats[kSquaredError], ref.se, 1e-6);
    EXPECT_NEAR(stats[kAbsoluteError], ref.ae, 1e-6);
    for (std::size_t i = 0; i < dz.size(); ++i) EXPECT_NEAR(dz[i], ref.grad[i], 1e-7) << i;
  }
}

TEST(LossKernelTest, BinaryCrossEntropyIsFiniteForHugeLogits) {
  const std::vector<float> z{1e4f, -1e4f, 0.0f};
  const std::vector<float> t{0.0f, 1.0f, 1.0f};
  std::vector<float> dz(3);
  float stats[kLossStats];
  sigmoid_bce_fwd_bwd(1, 3, z.data(), t.data(), 1.0f, dz.data(), stats);
  EXPECT_NEAR(stats[kLossSum], (1e4 + 1e4 + std::log(2.0)) / 3, 1e-2);
  for (float g : dz) EXPECT_TRUE(std::isfinite(g));
}

// ---------------------------------------------------------------------------------------------------------------
// Fixed-order reductions

// Sources spanning many orders of magnitude, so that any other summation order changes the low bits.
std::vector<std::vector<float>> wide_range_sources(int nsrc, std::size_t count) {
  std::vector<std::vector<float>> src;
  for (int s = 0; s < nsrc; ++s) {
    auto v = random_vector(count, 100 + static_cast<std::uint32_t>(s));
    const float magnitude = std::ldexp(1.0f, (s * 7) % 23 - 11);
    for (auto& e : v) {
      e *= magnitude;
    }
    src.push_back(std::move(v));
  }
  return src;
}

std::vector<const float*> pointers(const std::vector<std::vector<float>>& src) {
  std::vector<const float*> p;
  p.reserve(src.size());
  for (const auto& v : src) {
    p.push_back(v.data());
  }
  return p;
}

struct SumCase {
  int nsrc;
  std::size_t count;
};

void PrintTo(const SumCase& c, std::ostream* os) { *os << concat("sources=", c.nsrc, " count=", c.count); }

class FixedOrderSumKernelTest : public ::testing::TestWithParam<SumCase> {};

TEST_P(FixedOrderSumKernelTest, SumIsBitwiseEqualToSequentialLoop) {
  const auto [nsrc, count] = GetParam();
  const auto src = wide_range_sources(nsrc, count);
  const auto p = pointers(src);
  std::vector<float> want(count, 0.0f);
  for (std::size_t i = 0; i < count; ++i) {
    float acc = nsrc > 0 ? src[0][i] : 0.0f;
    for (int s = 1; s < nsrc; ++s) {
      acc += src[s][i];
    }
    want[i] = acc;
  }
  auto dst = nan_vector(count);
  sum_fixed_order(count, nsrc, p.data(), dst.data());
  EXPECT_TRUE(bitwise_equal(dst, want));
}

TEST_P(FixedOrderSumKernelTest, AccumulateIsBitwiseEqualToSequentialLoop) {
  const auto [nsrc, count] = GetParam();
  const auto src = wide_range_sources(nsrc, count);
  const auto p = pointers(src);
  const auto start = random_vector(count, 7, -1000.0f, 1000.0f);
  std::vector<float> want = start;
  for (std::size_t i = 0; i < count; ++i) {
    for (int s = 0; s < nsrc; ++s) {
      want[i] += src[s][i];
    }
  }
  auto dst = start;
  accumulate_fixed_order(count, nsrc, p.data(), dst.data());
  EXPECT_TRUE(bitwise_equal(dst, want));
}

INSTANTIATE_TEST_SUITE_P(Shapes, FixedOrderSumKernelTest,
                         ::testing::Values(SumCase{0, 5}, SumCase{1, 1}, SumCase{2, 0}, SumCase{2, 511},
                                           SumCase{3, 512}, SumCase{4, 513}, SumCase{7, 3001}, SumCase{16, 2048}),
                         [](const ::testing::TestParamInfo<SumCase>& info) {
                           return concat("Sources", info.param.nsrc, "Count", info.param.count);
                         });

TEST(FixedOrderSumKernelTest, OrderOfSourcesChangesTheResultSoTheOrderIsObservable) {
  // Guards the two bitwise tests above: with these sources a reversed order is not bitwise equal.
  const std::size_t count = 1000;
  const auto src = wide_range_sources(5, count);
  auto p = pointers(src);
  std::vector<float> forward(count);
  sum_fixed_order(count, 5, p.data(), forward.data());
  std::reverse(p.begin(), p.end());
  std::vector<float> reversed(count);
  sum_fixed_order(count, 5, p.data(), reversed.data());
  EXPECT_FALSE(bitwise_equal(forward, reversed));
}

TEST(FixedOrderSumKernelTest, DestinationMayBeOneOfTheSources) {
  const std::size_t count = 1500;
  auto src = wide_range_sources(3, count);
  const auto p = pointers(src);
  std::vector<float> want(count);
  sum_fixed_order(count, 3, p.data(), want.data());
  sum_fixed_order(count, 3, p.data(), src[1].data());
  EXPECT_TRUE(bitwise_equal(src[1], want));
}

// ---------------------------------------------------------------------------------------------------------------
// SGD

struct SgdCase {
  const char* name;
  SgdParams params;
};

SgdParams sgd(float lr, float momentum, float weight_decay, int nesterov) {
  SgdParams p;
  p.lr = lr;
  p.momentum = momentum;
  p.weight_decay = weight_decay;
  p.nesterov = nesterov;
  return p;
}

// Closed form of three PyTorch steps for one element, in double, with gradients g1..g3.
// Without weight decay: v1 = g1, v2 = mu g1 + g2, v3 = mu^2 g1 + mu g2 + g3 and
//   w3 = w0 - lr (v1 + v2 + v3)                               (heavy ball)
//   w3 = w0 - lr ((g1 + g2 + g3) + mu (v1 + v2 + v3))         (Nesterov).
// With weight decay the effective gradient depends on w, so the state (w, v) follows an affine map; its three-fold
// composition is written out step by step below.
struct ThreeSteps {
  double w, v;
};
ThreeSteps closed_form(const SgdParams& p, double w0, const double g[3]) {
  const double mu = p.momentum;
  const double lr = p.lr;
  if (p.weight_decay == 0.0f) {
    const double v1 = g[0];
    const double v2 = mu * g[0] + g[1];
    const double v3 = mu * mu * g[0] + mu * g[1] + g[2];
    const double step = p.nesterov ? (g[0] + g[1] + g[2]) + mu * (v1 + v2 + v3) : v1 + v2 + v3;
    return {w0 - lr * step, v3};
  }
  const double wd = p.weight_decay;
  double w = w0;
  double v = 0.0;
  for (int t = 0; t < 3; ++t) {
    const double gt = g[t] + wd * w;
    v = mu * v + gt;
    w -= lr * (p.nesterov ? gt + mu * v : v);
  }
  return {w, v};
}

void PrintTo(const SgdCase& c, std::ostream* os) { *os << c.name; }

class SgdKernelTest : public ::testing::TestWithParam<SgdCase> {};

TEST_P(SgdKernelTest, ThreeStepsMatchTheClosedForm) {
  const SgdParams& p = GetParam().params;
  const std::size_t count = 1037;
  auto w = random_vector(count, 1);
  const auto w0 = w;
  std::vector<float> v(count, 0.0f);
  std::vector<std::vector<float>> g;
  for (std::uint32_t t = 0; t < 3; ++t) {
    g.push_back(random_vector(count, 10 + t));
  }
  for (int t = 0; t < 3; ++t) {
    sgd_update(count, p, w.data(), g[static_cast<std::size_t>(t)].data(), v.data());
  }
  std::vector<double> want_w(count);
  std::vector<double> want_v(count);
  for (std::size_t i = 0; i < count; ++i) {
    const double gi[3] = {g[0][i], g[1][i], g[2][i]};
    const auto r = closed_form(p, w0[i], gi);
    want_w[i] = r.w;
    want_v[i] = r.v;
  }
  EXPECT_TRUE(all_close(w, want_w, 1e-6));
  EXPECT_TRUE(all_close(v, want_v, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Params, SgdKernelTest,
                         ::testing::Values(SgdCase{"Plain", sgd(0.1f, 0.0f, 0.0f, 0)},
                                           SgdCase{"Momentum", sgd(0.05f, 0.9f, 0.0f, 0)},
                                           SgdCase{"Nesterov", sgd(0.05f, 0.9f, 0.0f, 1)},
                                           SgdCase{"WeightDecay", sgd(0.1f, 0.0f, 0.01f, 0)},
                                           SgdCase{"MomentumWeightDecay", sgd(0.05f, 0.9f, 5e-4f, 0)},
                                           SgdCase{"NesterovWeightDecay", sgd(0.05f, 0.5f, 0.1f, 1)}),
                         [](const ::testing::TestParamInfo<SgdCase>& info) { return std::string(info.param.name); });

TEST(SgdKernelTest, WithoutMomentumAcceptsANullVelocity) {
  const SgdParams p = sgd(0.1f, 0.0f, 0.01f, 0);
  std::vector<float> w = {1.0f, -2.0f};
  const std::vector<float> g = {0.5f, 0.25f};
  sgd_update(w.size(), p, w.data(), g.data(), nullptr);
  EXPECT_FLOAT_EQ(w[0], 1.0f - 0.1f * (0.5f + 0.01f * 1.0f));
  EXPECT_FLOAT_EQ(w[1], -2.0f - 0.1f * (0.25f + 0.01f * -2.0f));
}

}  // namespace
}  // namespace dtnn::kernels::cpu
