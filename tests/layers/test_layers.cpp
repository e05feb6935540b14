// SPDX-License-Identifier: Apache-2.0
// Every layer through the one numerical gradient checker, and the argument checks of every layer.
#include <gtest/gtest.h>

#include "codelets/cpu/winograd.hpp"
#include "core/cpu_features.hpp"

#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "core/errors.hpp"
#include "support/gradient_check.hpp"

namespace dtnn {
namespace {

using testing::check_layer_gradients;
using testing::GradCheckOptions;

template <class Fn>
void expect_invalid(Fn&& fn, const std::string& fragment) {
  try {
    fn();
    FAIL() << "expected InvalidArgument containing '" << fragment << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(DenseTest, BackwardMatchesNumericalGradient) {
  Dense layer(DenseOptions(12, 5));
  check_layer_gradients(layer, {12});
}

TEST(DenseTest, FusedReluMatchesNumericalGradient) {
  Dense layer(DenseOptions(12, 5));
  EXPECT_EQ(layer.fuse_relu(), 1);
  EXPECT_EQ(layer.fuse_relu(), 0);
  EXPECT_NE(layer.describe().find("+ReLU"), std::string::npos);
  check_layer_gradients(layer, {12}, GradCheckOptions{.batch = 5, .tiles = 2});
}

TEST(DenseTest, WithoutBiasAndFromAFeatureMap) {
  Dense layer(DenseOptions(2 * 3 * 3, 4).bias(false));
  check_layer_gradients(layer, {2, 3, 3}, GradCheckOptions{.batch = 5, .tiles = 3});
  EXPECT_EQ(layer.parameters().size(), 1u);
}

TEST(DenseTest, RejectsAnInputOfTheWrongSize) {
  Dense layer(DenseOptions(10, 3));
  layer.set_name("fc");
  expect_invalid([&] { layer.build({11}); }, "Dense fc: input (11,) has 11 values per sample, expected in_features=10");
  expect_invalid([] { Dense(DenseOptions(0, 3)); }, "in_features=0");
}

struct ConvCase {
  Conv2dOptions options;
  Shape input;
};

TEST(Conv2dTest, BackwardMatchesNumericalGradient) {
  const std::vector<ConvCase> cases = {
      {Conv2dOptions(2, 3, 3).padding(1), {2, 6, 5}},
      {Conv2dOptions(3, 4, 3).stride(2), {3, 7, 7}},
      {Conv2dOptions(2, 2, 3).padding(2).dilation(2), {2, 6, 6}},
      {Conv2dOptions(4, 6, 1).groups(2), {4, 4, 3}},
      {Conv2dOptions(3, 3, 3).padding(1).groups(3).bias(false), {3, 5, 5}},
      {Conv2dOptions(1, 2, 3).kernel(3, 2).stride(1, 2).padding(1, 0), {1, 5, 6}},
  };
  for (ConvVariant v : {ConvVariant::kConvgemm, ConvVariant::kIm2col, ConvVariant::kAuto}) {
    for (const auto& c : cases) {
      SCOPED_TRACE(::testing::Message() << to_string(v) << " conv " << c.options.in_ << "->" << c.options.out_
                                        << " input " << to_string(c.input));
      Conv2dOptions options = c.options;
      Conv2d layer(options.variant(v));
      check_layer_gradients(layer, c.input);
    }
  }
}

TEST(Conv2dTest, FusedReluMatchesNumericalGradient) {
  for (ConvVariant v : {ConvVariant::kConvgemm, ConvVariant::kIm2col}) {
    Conv2d layer(Conv2dOptions(2, 3, 3).padding(1).relu(true).variant(v));
    // A smaller step: every pre-activation near zero is a kink for the bias of its channel.
    check_layer_gradients(layer, {2, 5, 5}, GradCheckOptions{.eps = 2e-4f, .atol = 4e-3});
    EXPECT_NE(layer.describe().find("+ReLU"), std::string::npos);
  }
}

TEST(Conv2dTest, AutoReportsTheAlgorithmItChose) {
  Conv2d layer(Conv2dOptions(2, 4, 3).padding(1).variant(ConvVariant::kAuto));
  check_layer_gradients(layer, {2, 6, 6});
  const std::string d = layer.describe();
  EXPECT_TRUE(d.find("auto: convgemm") != std::string::npos || d.find("auto: im2col") != std::string::npos ||
              d.find("auto: winograd") != std::string::npos)
      << d;
  EXPECT_THROW(parse_conv_variant("fft", "--conv"), InvalidArgument);
}

// Winograd where it pays (3x3 stride 1, 16+ channels in and out, a 2x2 output plane or larger, 32 output tiles a
// task), convgemm elsewhere, and the summary says which.
TEST(Conv2dTest, WinogradVariantMatchesNumericalGradientAndNamesTheLayersItLeaves) {
  // Without the fused ReLU: 256 pre-activations near zero would put kinks inside the finite differences (the
  // kernel tests check the ReLU epilogue). 36 tiles a sample: Winograd from one sample a tile.
  Conv2d wide(Conv2dOptions(16, 16, 3).padding(1).variant(ConvVariant::kWinograd));
  check_layer_gradients(wide, {16, 12, 12});
  const bool served = kernels::cpu::winograd_min_batch(wide.geometry()) > 0;
  EXPECT_EQ(served, cpu_has_avx2_fma()) << "Winograd runs on AVX2 or AVX-512 CPUs";
  EXPECT_NE(wide.describe().find(served ? "winograd" : "winograd: convgemm"), std::string::npos) << wide.describe();
  EXPECT_EQ(wide.describe().find("samples/tile"), std::string::npos) << wide.describe();
  // 4 tiles a sample: Winograd from 8 samples a tile; batch 15 in 2 tiles runs one tile of 8 samples with it and
  // one of 7 with convgemm.
  Conv2d small(Conv2dOptions(16, 16, 3).padding(1).variant(ConvVariant::kWinograd));
  check_layer_gradients(small, {16, 4, 4}, GradCheckOptions{.batch = 15, .tiles = 2});
  if (served) {
    EXPECT_NE(small.describe().find("winograd (8+ samples/tile)"), std::string::npos) << small.describe();
  }

  Conv2d narrow(Conv2dOptions(3, 16, 3).padding(1).variant(ConvVariant::kWinograd));
  check_layer_gradients(narrow, {3, 5, 5});
  EXPECT_NE(narrow.describe().find("winograd: convgemm"), std::string::npos) << narrow.describe();
  Conv2d strided(Conv2dOptions(16, 16, 3).stride(2).padding(1).variant(ConvVariant::kWinograd));
  strided.build({16, 8, 8});
  EXPECT_NE(strided.describe().find("winograd: convgemm"), std::string::npos) << strided.describe();
  // A 1x1 output plane would fill a quarter of each tile; 2x2 is one whole tile per sample.
  Conv2d pixel(Conv2dOptions(16, 16, 3).padding(1).variant(ConvVariant::kWinograd));
  pixel.build({16, 1, 1});
  EXPECT_NE(pixel.describe().find("winograd: convgemm"), std::string::npos) << pixel.describe();
  Conv2d tile(Conv2dOptions(16, 16, 3).padding(1).variant(ConvVariant::kWinograd));
  tile.build({16, 2, 2});
  EXPECT_NE(tile.describe().find(served ? "winograd (32+ samples/tile)" : "winograd: convgemm"), std::string::npos)
      << tile.describe();
}

TEST(Conv2dTest, OutputShapeFollowsTheFormula) {
  Conv2d layer(Conv2dOptions(3, 8, 5).stride(2).padding(2));
  EXPECT_EQ(layer.build({3, 32, 31}), (Shape{8, 16, 16}));
  EXPECT_EQ(layer.parameter_count(), 8 * 3 * 5 * 5 + 8);
}

TEST(Conv2dTest, RejectsBadOptionsAndInputs) {
  expect_invalid([] { Conv2d(Conv2dOptions(6, 8, 3).groups(4)); },
                 "in_channels=6 out_channels=8 with groups=4: both must be divisible by groups");
  expect_invalid([] { Conv2d(Conv2dOptions(1, 1, 3).stride(0)); }, "stride=0");
  Conv2d layer(Conv2dOptions(3, 4, 3));
  layer.set_name("conv1");
  expect_invalid([&] { layer.build({2, 8, 8}); }, "Conv2d conv1: input (2, 8, 8), expected (C=3, H, W)");
  Conv2d big(Conv2dOptions(1, 1, 5));
  expect_invalid([&] { big.build({1, 3, 3}); }, "smaller than the dilated 5x5 kernel");
  Conv2d strided(Conv2dOptions(1, 1, 3).stride(2));  // (2 - 3) / 2 + 1 would round to one row
  expect_invalid([&] { strided.build({1, 2, 8}); }, "smaller than the dilated 3x3 kernel");
}

TEST(ReLUTest, BackwardMatchesNumericalGradient) {
  ReLU layer;
  check_layer_gradients(layer, {3, 4, 4});
}

TEST(MaxPool2dTest, BackwardMatchesNumericalGradient) {
  MaxPool2d layer(MaxPool2dOptions(2));
  check_layer_gradients(layer, {2, 6, 6});
  MaxPool2d overlapping(MaxPool2dOptions(3).stride(2).padding(1));
  check_layer_gradients(overlapping, {2, 7, 7}, GradCheckOptions{.batch = 4, .tiles = 3});
}

TEST(MaxPool2dTest, RejectsBadOptions) {
  expect_invalid([] { MaxPool2d(MaxPool2dOptions(2).padding(2)); }, "expected 0 <= padding <= kernel/2");
  MaxPool2d layer(MaxPool2dOptions(2));
  expect_invalid([&] { layer.build({4, 4}); }, "expected (C, H, W)");
  MaxPool2d wide(MaxPool2dOptions(5));
  expect_invalid([&] { wide.build({1, 4, 8}); }, "smaller than the 5x5 window");
}

TEST(FlattenTest, BackwardMatchesNumericalGradient) {
  Flatten layer;
  check_layer_gradients(layer, {2, 3, 4});
  EXPECT_EQ(layer.output_shape(), (Shape{24}));
}

}  // namespace
}  // namespace dtnn
