// SPDX-License-Identifier: Apache-2.0
// AvgPool2d, GlobalAvgPool2d, BatchNorm2d, Dropout, the element-wise activations and Softmax: the numerical
// gradient checker, the properties that the task graph must keep (BatchNorm and Dropout independent of the tile
// count, bit for bit), evaluation behaviour and the argument checks.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "codelets/merge.hpp"
#include "io/dataset.hpp"
#include "layers/activations.hpp"
#include "layers/batch_norm.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/dropout.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "models/optimizers.hpp"
#include "models/training.hpp"
#include "runtime/engine.hpp"
#include "core/errors.hpp"
#include "support/gradient_check.hpp"
#include "support/tensor_checks.hpp"

namespace dtnn {
namespace {

using test_support::bitwise_equal;
using test_support::fill_random;
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

Shape batch_of(std::int64_t n, Shape s) {
  s.insert(s.begin(), n);
  return s;
}

// ---------------------------------------------------------------------------------------------------------------
// Pooling

TEST(AvgPool2dTest, BackwardMatchesNumericalGradient) {
  AvgPool2d plain(AvgPool2dOptions(2));
  check_layer_gradients(plain, {2, 6, 6});
  AvgPool2d padded(AvgPool2dOptions(3).stride(2).padding(1));
  check_layer_gradients(padded, {2, 7, 7}, GradCheckOptions{.batch = 4, .tiles = 3});
  AvgPool2d excluded(AvgPool2dOptions(3).stride(1).padding(1).count_include_pad(false));
  check_layer_gradients(excluded, {1, 5, 4});
}

TEST(AvgPool2dTest, StrideDefaultsToTheKernelAndTheShapeFollowsTheFormula) {
  AvgPool2d layer(AvgPool2dOptions(3));
  EXPECT_EQ(layer.build({4, 10, 9}), (Shape{4, 3, 3}));
  EXPECT_EQ(layer.options().stride_h_, 3);
  AvgPool2d padded(AvgPool2dOptions(3).kernel(3, 2).stride(2, 1).padding(1, 0));
  EXPECT_EQ(padded.build({1, 8, 5}), (Shape{1, 4, 4}));
}

TEST(AvgPool2dTest, RejectsBadOptionsAndInputs) {
  expect_invalid([] { AvgPool2d(AvgPool2dOptions(2).padding(2)); }, "AvgPool2d: padding 2x2 with kernel 2x2");
  expect_invalid([] { AvgPool2d(AvgPool2dOptions(2).stride(-1, 1)); }, "stride -1x1, expected all >= 1");
  expect_invalid([] { AvgPool2d(AvgPool2dOptions(0)); }, "kernel 0x0");
  AvgPool2d layer(AvgPool2dOptions(2));
  layer.set_name("pool");
  expect_invalid([&] { layer.build({4, 4}); }, "AvgPool2d pool: input (4, 4), expected (C, H, W)");
  AvgPool2d big(AvgPool2dOptions(5));
  big.set_name("p2");
  expect_invalid([&] { big.build({1, 4, 8}); }, "AvgPool2d p2: input (1, 4, 8) with padding 0x0 is smaller");
  AvgPool2d padded(AvgPool2dOptions(5).padding(1));
  EXPECT_EQ(padded.build({1, 3, 3}), (Shape{1, 1, 1}));
}

TEST(GlobalAvgPool2dTest, BackwardMatchesNumericalGradient) {
  GlobalAvgPool2d layer;
  check_layer_gradients(layer, {3, 4, 5});
  EXPECT_EQ(layer.output_shape(), (Shape{3, 1, 1}));
}

TEST(GlobalAvgPool2dTest, OutputsTheMeanOfEveryPlane) {
  GlobalAvgPool2d layer;
  layer.build({2, 2, 2});
  Tensor x({1, 2, 2, 2});
  x.copy_from(std::vector<float>{1, 2, 3, 4, -1, -1, 5, 5});
  Tensor y({1, 2, 1, 1});
  layer.forward(x, y, PassContext{});
  EXPECT_EQ(y.to_vector(), (std::vector<float>{2.5f, 2.0f}));
}

TEST(GlobalAvgPool2dTest, RejectsAnInputWithoutAPlane) {
  GlobalAvgPool2d layer;
  layer.set_name("gap");
  expect_invalid([&] { layer.build({16}); }, "GlobalAvgPool2d gap: input (16,), expected (C, H, W)");
}

// ---------------------------------------------------------------------------------------------------------------
// BatchNorm2d

// PyTorch's initial gamma = 1 and beta = 0 would hide a swapped or missing use of either.
class RandomAffineBatchNorm : public BatchNorm2d {
 public:
  using BatchNorm2d::BatchNorm2d;
  void reset_parameters(Rng& rng) override {
    BatchNorm2d::reset_parameters(rng);
    for (Parameter* p : parameters()) {
      auto a = p->value.write();
      for (float& v : a.data()) v = rng.uniform(0.5f, 1.5f);
    }
  }
};

TEST(BatchNorm2dTest, TrainingBackwardMatchesNumericalGradient) {
  BatchNorm2d layer(BatchNorm2dOptions(3));
  check_layer_gradients(layer, {3, 4, 4}, GradCheckOptions{.batch = 3, .tiles = 2});
  RandomAffineBatchNorm scaled(BatchNorm2dOptions(2).eps(1e-3));
  check_layer_gradients(scaled, {2, 3, 3}, GradCheckOptions{.batch = 4, .tiles = 3});
}

TEST(BatchNorm2dTest, FeatureInputWithoutAffineMatchesNumericalGradient) {
  BatchNorm2d layer(BatchNorm2dOptions(5).affine(false));
  check_layer_gradients(layer, {5}, GradCheckOptions{.batch = 6, .tiles = 4});
  EXPECT_TRUE(layer.parameters().empty());
  EXPECT_EQ(layer.buffers().size(), 3u);
}

TEST(BatchNorm2dTest, ParametersAndBuffersHavePyTorchsNamesAndInitialValues) {
  BatchNorm2d layer(BatchNorm2dOptions(4));
  EXPECT_EQ(layer.build({4, 2, 2}), (Shape{4, 2, 2}));
  Rng rng(1);
  layer.reset_parameters(rng);
  auto params = layer.parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0]->name, "weight");
  EXPECT_EQ(params[1]->name, "bias");
  EXPECT_EQ(params[0]->value.to_vector(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(params[1]->value.to_vector(), std::vector<float>(4, 0.0f));
  auto buffers = layer.buffers();
  ASSERT_EQ(buffers.size(), 3u);
  EXPECT_EQ(buffers[0]->name, "running_mean");
  EXPECT_EQ(buffers[1]->name, "running_var");
  EXPECT_EQ(buffers[2]->name, "num_batches_tracked");
  EXPECT_EQ(buffers[0]->value.to_vector(), std::vector<float>(4, 0.0f));
  EXPECT_EQ(buffers[1]->value.to_vector(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(buffers[2]->value.shape(), (Shape{1}));
  EXPECT_EQ(buffers[2]->value.to_vector(), std::vector<float>(1, 0.0f));
}

// Everything a training step produces, to compare runs bit for bit.
struct BnStepResult {
  std::vector<float> y, dx, dgamma, dbeta, running_mean, running_var, batches;
};

BnStepResult run_bn_steps(int tiles, int steps, const Shape& sample, std::int64_t n) {
  BatchNorm2d layer(BatchNorm2dOptions(sample[0]).momentum(0.3));
  layer.set_name("bn");
  layer.build(sample);
  Rng rng(3);
  layer.reset_parameters(rng);
  fill_random(layer.parameters()[0]->value, 4, 0.5f, 1.5f);
  fill_random(layer.parameters()[1]->value, 5);
  layer.prepare_tiles(tiles);
  Tensor x(batch_of(n, sample), tiles), y(batch_of(n, sample), tiles);
  Tensor dy(batch_of(n, sample), tiles), dx(batch_of(n, sample), tiles);
  for (int s = 0; s < steps; ++s) {
    // An offset and a spread per step: running statistics that move, and a mean far from zero.
    fill_random(x, 10 + s, 3.0f - s, 5.0f + s);
    fill_random(dy, 20 + s);
    const PassContext ctx{1, 0, s};
    layer.forward(x, y, ctx);
    layer.backward(x, y, dy, &dx, ctx);
  }
  runtime::Engine::current()->wait_all();
  return BnStepResult{y.to_vector(),
                      dx.to_vector(),
                      layer.parameters()[0]->grad.to_vector(),
                      layer.parameters()[1]->grad.to_vector(),
                      layer.running_mean().to_vector(),
                      layer.running_var().to_vector(),
                      layer.num_batches_tracked().to_vector()};
}

TEST(BatchNorm2dTest, TileCountNeverChangesABit) {
  const Shape sample{3, 5, 5};
  const std::int64_t n = 12;
  const BnStepResult one = run_bn_steps(1, 2, sample, n);
  // 4 tiles: one reduction task each; 11 tiles: chains of reductions (StarPU's 8 buffers per task).
  for (int tiles : {4, 11}) {
    SCOPED_TRACE(::testing::Message() << tiles << " tiles");
    const BnStepResult other = run_bn_steps(tiles, 2, sample, n);
    EXPECT_TRUE(bitwise_equal(other.y, one.y));
    EXPECT_TRUE(bitwise_equal(other.dx, one.dx));
    EXPECT_TRUE(bitwise_equal(other.dgamma, one.dgamma));
    EXPECT_TRUE(bitwise_equal(other.dbeta, one.dbeta));
    EXPECT_TRUE(bitwise_equal(other.running_mean, one.running_mean));
    EXPECT_TRUE(bitwise_equal(other.running_var, one.running_var));
    EXPECT_TRUE(bitwise_equal(other.batches, one.batches));
  }
  EXPECT_EQ(one.batches, std::vector<float>{2.0f});
}

TEST(BatchNorm2dTest, FusedReluMatchesNumericalGradient) {
  BatchNorm2d layer(BatchNorm2dOptions(3));
  EXPECT_EQ(layer.fuse_relu(), 1);
  EXPECT_EQ(layer.fuse_relu(), 0);  // once
  check_layer_gradients(layer, {3, 4, 4}, GradCheckOptions{.batch = 3, .tiles = 2});
  BatchNorm2d features(BatchNorm2dOptions(5).affine(false));
  features.fuse_relu();
  check_layer_gradients(features, {5}, GradCheckOptions{.batch = 6, .tiles = 4});
}

// What a residual block asks of its fused BatchNorm: y = ReLU(bn(x) + residual), and the backward pass masked by y.
// The checker sees it as a layer of x with a constant residual.
class ResidualBatchNorm : public BatchNorm2d {
 public:
  ResidualBatchNorm(BatchNorm2dOptions o, std::uint64_t seed) : BatchNorm2d(o), seed_(seed) {}
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override {
    if (!residual_.defined() || residual_.shape() != x.shape() || residual_.tiles() != x.tiles()) {
      residual_ = Tensor(x.shape(), x.tiles());
      fill_random(residual_, seed_);
    }
    forward_into_sum(x, residual_, 1, y, ctx);
  }
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override {
    backward_masked(x, y, dy, dx, ctx);
  }

 private:
  std::uint64_t seed_;
  Tensor residual_;
};

TEST(BatchNorm2dTest, FusedResidualSumAndReluMatchNumericalGradient) {
  ResidualBatchNorm layer(BatchNorm2dOptions(3), 9);
  check_layer_gradients(layer, {3, 4, 4}, GradCheckOptions{.batch = 3, .tiles = 2});
}

enum class BnEpilogue { kRelu, kAddRelu };

// steps training steps of a BatchNorm with its fused epilogue (fused 1) or as the separate passes that the
// fusion replaces (fused 0: the BatchNorm, the Add task, the ReLU layer and their backward passes).
// training 0: evaluation mode (running statistics, the frozen BatchNorm's gradient).
BnStepResult run_bn_epilogue_steps(BnEpilogue e, int fused, int training, int tiles, int steps, const Shape& sample,
                                   std::int64_t n) {
  BatchNorm2d layer(BatchNorm2dOptions(sample[0]).momentum(0.3));
  layer.set_name("bn");
  if (fused && e == BnEpilogue::kRelu) layer.fuse_relu();
  layer.build(sample);
  Rng rng(3);
  layer.reset_parameters(rng);
  fill_random(layer.parameters()[0]->value, 4, 0.5f, 1.5f);
  fill_random(layer.parameters()[1]->value, 5, -0.5f, 0.5f);
  layer.prepare_tiles(tiles);
  ReLU relu;
  relu.set_name("relu");
  relu.build(sample);
  const Shape shape = batch_of(n, sample);
  Tensor x(shape, tiles), y(shape, tiles), dy(shape, tiles), dx(shape, tiles), residual(shape, tiles);
  Tensor bn_out(shape, tiles), sum(shape, tiles), relu_in_grad(shape, tiles);
  for (int s = 0; s < steps; ++s) {
    fill_random(x, 10 + s, 3.0f - s, 5.0f + s);
    fill_random(dy, 20 + s);
    fill_random(residual, 30 + s);
    const PassContext ctx{training, 0, s};
    if (fused) {
      if (e == BnEpilogue::kRelu) {
        layer.forward(x, y, ctx);
        layer.backward(x, y, dy, &dx, ctx);
      } else {
        layer.forward_into_sum(x, residual, 1, y, ctx);
        layer.backward_masked(x, y, dy, &dx, ctx);
      }
      continue;
    }
    layer.forward(x, bn_out, ctx);
    const Tensor* relu_in = &bn_out;
    if (e == BnEpilogue::kAddRelu) {
      for (int t = 0; t < tiles; ++t) codelets::submit_add({"add", 0}, "add", {&bn_out, &residual}, sum, t);
      relu_in = &sum;
    }
    relu.forward(*relu_in, y, ctx);
    relu.backward(*relu_in, y, dy, &relu_in_grad, ctx);
    layer.backward(x, bn_out, relu_in_grad, &dx, ctx);
  }
  runtime::Engine::current()->wait_all();
  return BnStepResult{y.to_vector(),
                      dx.to_vector(),
                      layer.parameters()[0]->grad.to_vector(),
                      layer.parameters()[1]->grad.to_vector(),
                      layer.running_mean().to_vector(),
                      layer.running_var().to_vector(),
                      layer.num_batches_tracked().to_vector()};
}

// The fused passes round every operation as the separate passes do: bitwise the same outputs, gradients and
// statistics, in training and in evaluation mode; and like the plain BatchNorm, whatever the tile count (4 tiles:
// one reduction task, 11: chains).
TEST(BatchNorm2dTest, FusedEpiloguesAreBitwiseTheSeparatePassesForEveryTileCount) {
  const Shape sample{3, 5, 5};
  const std::int64_t n = 12;
  for (BnEpilogue e : {BnEpilogue::kRelu, BnEpilogue::kAddRelu}) {
    for (int training : {1, 0}) {
      const BnStepResult reference = run_bn_epilogue_steps(e, 0, training, 1, 2, sample, n);
      for (int tiles : {1, 4, 11}) {
        SCOPED_TRACE(::testing::Message() << (e == BnEpilogue::kRelu ? "ReLU" : "Add + ReLU") << ", " << tiles
                                          << " tiles" << (training ? "" : ", evaluation"));
        const BnStepResult fused = run_bn_epilogue_steps(e, 1, training, tiles, 2, sample, n);
        EXPECT_TRUE(bitwise_equal(fused.y, reference.y));
        EXPECT_TRUE(bitwise_equal(fused.dx, reference.dx));
        EXPECT_TRUE(bitwise_equal(fused.dgamma, reference.dgamma));
        EXPECT_TRUE(bitwise_equal(fused.dbeta, reference.dbeta));
        EXPECT_TRUE(bitwise_equal(fused.running_mean, reference.running_mean));
        EXPECT_TRUE(bitwise_equal(fused.running_var, reference.running_var));
        EXPECT_TRUE(bitwise_equal(fused.batches, reference.batches));
      }
    }
  }
}

TEST(BatchNorm2dTest, TrainingNormalisesWithBatchStatisticsAndUpdatesRunningOnes) {
  const std::int64_t n = 5, c = 2, h = 3, w = 2;
  const double momentum = 0.25, eps = 1e-5;
  BatchNorm2d layer(BatchNorm2dOptions(c).momentum(momentum));
  layer.build({c, h, w});
  Rng rng(1);
  layer.reset_parameters(rng);
  layer.parameters()[0]->value.copy_from(std::vector<float>{2.0f, 0.5f});
  layer.parameters()[1]->value.copy_from(std::vector<float>{1.0f, -1.0f});
  Tensor x({n, c, h, w}, 2), y({n, c, h, w}, 2);
  fill_random(x, 7, -2.0f, 6.0f);
  layer.forward(x, y, PassContext{1, 0, 0});
  const auto xv = x.to_vector();
  const auto yv = y.to_vector();
  const auto rm = layer.running_mean().to_vector();
  const auto rv = layer.running_var().to_vector();
  const double count = static_cast<double>(n * h * w);
  const double gamma[] = {2.0, 0.5}, beta[] = {1.0, -1.0};
  for (int ch = 0; ch < c; ++ch) {
    double mean = 0.0, var = 0.0;
    auto at = [&](std::int64_t i, std::int64_t j) { return static_cast<std::size_t>((i * c + ch) * h * w + j); };
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < h * w; ++j) mean += xv[at(i, j)];
    mean /= count;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < h * w; ++j) var += (xv[at(i, j)] - mean) * (xv[at(i, j)] - mean);
    var /= count;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < h * w; ++j) {
        const double want = (xv[at(i, j)] - mean) / std::sqrt(var + eps) * gamma[ch] + beta[ch];
        ASSERT_NEAR(yv[at(i, j)], want, 1e-5) << "channel " << ch << " sample " << i << " at " << j;
      }
    EXPECT_NEAR(rm[ch], momentum * mean, 1e-6);
    EXPECT_NEAR(rv[ch], (1.0 - momentum) + momentum * var * count / (count - 1.0), 1e-6);
  }
  EXPECT_EQ(layer.num_batches_tracked().to_vector(), std::vector<float>{1.0f});
}

TEST(BatchNorm2dTest, EvaluationUsesTheRunningStatisticsAndLeavesThemAlone) {
  const std::int64_t n = 3, c = 2, h = 2, w = 2;
  BatchNorm2d layer(BatchNorm2dOptions(c).eps(1e-3));
  layer.build({c, h, w});
  Rng rng(1);
  layer.reset_parameters(rng);
  const std::vector<float> mean = {0.5f, -2.0f}, var = {4.0f, 0.09f}, gamma = {1.5f, -1.0f}, beta = {0.25f, 3.0f};
  layer.running_mean().copy_from(mean);
  layer.running_var().copy_from(var);
  layer.parameters()[0]->value.copy_from(gamma);
  layer.parameters()[1]->value.copy_from(beta);
  Tensor x({n, c, h, w}, 2), y({n, c, h, w}, 2);
  fill_random(x, 8, -3.0f, 3.0f);
  layer.forward(x, y, PassContext{0, 0, 0});
  const auto xv = x.to_vector();
  const auto yv = y.to_vector();
  std::vector<float> scale, shift;
  layer.folded_scale_shift(scale, shift);
  ASSERT_EQ(scale.size(), 2u);
  for (std::size_t e = 0; e < xv.size(); ++e) {
    const std::size_t ch = (e / (h * w)) % c;
    const double want = (xv[e] - mean[ch]) / std::sqrt(var[ch] + 1e-3) * gamma[ch] + beta[ch];
    ASSERT_NEAR(yv[e], want, 1e-5) << "at " << e;
    ASSERT_NEAR(yv[e], xv[e] * scale[ch] + shift[ch], 1e-6) << "at " << e;
  }
  EXPECT_FLOAT_EQ(scale[0], static_cast<float>(1.5 / std::sqrt(4.001)));
  EXPECT_FLOAT_EQ(shift[1], static_cast<float>(3.0 - (-2.0) * (-1.0 / std::sqrt(0.091))));
  EXPECT_EQ(layer.running_mean().to_vector(), mean);
  EXPECT_EQ(layer.running_var().to_vector(), var);
  EXPECT_EQ(layer.num_batches_tracked().to_vector(), std::vector<float>{0.0f});
}

TEST(BatchNorm2dTest, EvaluationBackwardTreatsTheStatisticsAsConstants) {
  const std::int64_t n = 4, c = 2, plane = 3;
  BatchNorm2d layer{BatchNorm2dOptions(c)};
  layer.build({c, 1, plane});
  Rng rng(1);
  layer.reset_parameters(rng);
  const std::vector<float> mean = {1.0f, -1.0f}, var = {0.5f, 2.0f}, gamma = {2.0f, -0.5f};
  layer.running_mean().copy_from(mean);
  layer.running_var().copy_from(var);
  layer.parameters()[0]->value.copy_from(gamma);
  Tensor x({n, c, 1, plane}, 3), y({n, c, 1, plane}, 3), dy({n, c, 1, plane}, 3), dx({n, c, 1, plane}, 3);
  fill_random(x, 9);
  fill_random(dy, 10);
  const PassContext eval{0, 0, 0};
  layer.forward(x, y, eval);
  layer.backward(x, y, dy, &dx, eval);
  const auto xv = x.to_vector(), gv = dy.to_vector(), dxv = dx.to_vector();
  const auto dgamma = layer.parameters()[0]->grad.to_vector();
  const auto dbeta = layer.parameters()[1]->grad.to_vector();
  std::vector<double> want_dgamma(c, 0.0), want_dbeta(c, 0.0);
  for (std::size_t e = 0; e < xv.size(); ++e) {
    const std::size_t ch = (e / plane) % c;
    const double invstd = 1.0 / std::sqrt(var[ch] + 1e-5);
    ASSERT_NEAR(dxv[e], gv[e] * gamma[ch] * invstd, 1e-6) << "at " << e;
    want_dgamma[ch] += gv[e] * (xv[e] - mean[ch]) * invstd;
    want_dbeta[ch] += gv[e];
  }
  for (std::int64_t ch = 0; ch < c; ++ch) {
    EXPECT_NEAR(dgamma[ch], want_dgamma[ch], 1e-5);
    EXPECT_NEAR(dbeta[ch], want_dbeta[ch], 1e-5);
  }
}

TEST(BatchNorm2dTest, RejectsBadOptionsAndInputs) {
  expect_invalid([] { BatchNorm2d(BatchNorm2dOptions(0)); }, "BatchNorm2d: num_features=0");
  expect_invalid([] { BatchNorm2d(BatchNorm2dOptions(4).eps(0.0)); }, "BatchNorm2d: eps=0, expected a finite value > 0");
  expect_invalid([] { BatchNorm2d(BatchNorm2dOptions(4).momentum(1.5)); },
                 "BatchNorm2d: momentum=1.5, expected 0 <= momentum <= 1");
  expect_invalid([] { BatchNorm2d(BatchNorm2dOptions(4).momentum(std::nan(""))); }, "momentum=nan");
  BatchNorm2d layer(BatchNorm2dOptions(4));
  layer.set_name("bn1");
  expect_invalid([&] { layer.build({3, 8, 8}); }, "BatchNorm2d bn1: input (3, 8, 8), expected (C=4, H, W) or (C=4)");
  expect_invalid([&] { layer.build({4, 8}); }, "BatchNorm2d bn1: input (4, 8)");
  BatchNorm2d features(BatchNorm2dOptions(3));
  features.set_name("bn2");
  features.build({3});
  Tensor x({1, 3}), y({1, 3});
  expect_invalid([&] { features.forward(x, y, PassContext{1, 0, 0}); },
                 "BatchNorm2d bn2: training with 1 value per channel (batch 1 of (3,)), expected more than 1");
  features.forward(x, y, PassContext{0, 0, 0});  // evaluation needs no batch statistics
  runtime::Engine::current()->wait_all();
}

// ---------------------------------------------------------------------------------------------------------------
// Dropout

TEST(DropoutTest, BackwardMatchesNumericalGradient) {
  // Every forward pass of the checker is step 0, so the mask is the same for all of them.
  Dropout layer(DropoutOptions(0.4).seed(11));
  check_layer_gradients(layer, {3, 4, 4}, GradCheckOptions{.batch = 4, .tiles = 3});
}

struct DropoutRun {
  std::vector<float> y, dx, mask;
};

DropoutRun run_dropout(int tiles, const std::string& name, std::int64_t step, DropoutOptions options,
                       const Shape& sample = {4, 6, 6}, std::int64_t n = 10) {
  Dropout layer(options);
  layer.set_name(name);
  layer.build(sample);
  Tensor x(batch_of(n, sample), tiles), y(batch_of(n, sample), tiles);
  Tensor dy(batch_of(n, sample), tiles), dx(batch_of(n, sample), tiles);
  fill_random(x, 30);
  fill_random(dy, 31);
  const PassContext ctx{1, 0, step};
  layer.forward(x, y, ctx);
  layer.backward(x, y, dy, &dx, ctx);
  runtime::Engine::current()->wait_all();
  return DropoutRun{y.to_vector(), dx.to_vector(), layer.mask(x).to_vector()};
}

TEST(DropoutTest, MaskDoesNotDependOnTheTileCount) {
  const DropoutRun one = run_dropout(1, "drop", 3, DropoutOptions(0.5));
  for (int tiles : {3, 10}) {
    SCOPED_TRACE(::testing::Message() << tiles << " tiles");
    const DropoutRun other = run_dropout(tiles, "drop", 3, DropoutOptions(0.5));
    EXPECT_TRUE(bitwise_equal(other.mask, one.mask));
    EXPECT_TRUE(bitwise_equal(other.y, one.y));
    EXPECT_TRUE(bitwise_equal(other.dx, one.dx));
  }
}

TEST(DropoutTest, KeepsAboutOneMinusRateAndScalesTheKeptValues) {
  const double rate = 0.3;
  Dropout layer(DropoutOptions(rate).seed(5));
  layer.build({1000});
  Tensor x({32, 1000}, 2), y({32, 1000}, 2);
  fill_random(x, 1);
  layer.forward(x, y, PassContext{1, 0, 7});
  const auto xv = x.to_vector(), yv = y.to_vector();
  const float scale = static_cast<float>(1.0 / (1.0 - rate));
  std::size_t kept = 0;
  for (std::size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] != 0.0f) {
      ++kept;
      ASSERT_EQ(yv[i], xv[i] * scale) << "at " << i;
    }
  }
  // 32000 draws: 0.015 is more than 5 standard deviations.
  EXPECT_NEAR(static_cast<double>(kept) / xv.size(), 1.0 - rate, 0.015);
}

TEST(DropoutTest, MasksChangeWithTheStepAndTheSeedAndFollowTheName) {
  const DropoutRun base = run_dropout(2, "a", 0, DropoutOptions(0.5));
  EXPECT_FALSE(bitwise_equal(run_dropout(2, "a", 1, DropoutOptions(0.5)).mask, base.mask));
  EXPECT_FALSE(bitwise_equal(run_dropout(2, "b", 0, DropoutOptions(0.5)).mask, base.mask));
  EXPECT_TRUE(bitwise_equal(run_dropout(2, "a", 0, DropoutOptions(0.5)).mask, base.mask));
  // An explicit seed wins over the name; the default seed is FNV-1a of the name.
  EXPECT_TRUE(bitwise_equal(run_dropout(2, "b", 0, DropoutOptions(0.5).seed(fnv1a("a"))).mask, base.mask));
  Dropout named(DropoutOptions(0.1));
  named.set_name("features.3");
  EXPECT_EQ(named.seed(), fnv1a("features.3"));
  EXPECT_EQ(fnv1a(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a("a"), 0xaf63dc4c8601ec8cull);
}

TEST(DropoutTest, EvaluationIsTheIdentity) {
  Dropout layer(DropoutOptions(0.9));
  layer.build({3, 4});
  Tensor x({5, 3, 4}, 2), y({5, 3, 4}, 2), dy({5, 3, 4}, 2), dx({5, 3, 4}, 2);
  fill_random(x, 2);
  fill_random(dy, 3);
  const PassContext eval{0, 0, 4};
  layer.forward(x, y, eval);
  layer.backward(x, y, dy, &dx, eval);
  EXPECT_TRUE(bitwise_equal(y.to_vector(), x.to_vector()));
  EXPECT_TRUE(bitwise_equal(dx.to_vector(), dy.to_vector()));
}

TEST(DropoutTest, RejectsARateOutsideZeroToOne) {
  expect_invalid([] { Dropout(DropoutOptions(1.0)); }, "Dropout: rate=1, expected 0 <= rate < 1");
  expect_invalid([] { Dropout(DropoutOptions(-0.1)); }, "Dropout: rate=-0.1, expected 0 <= rate < 1");
  expect_invalid([] { Dropout(DropoutOptions(std::nan(""))); }, "Dropout: rate=nan");
  Dropout layer(DropoutOptions(0.5));
  layer.set_name("d");
  expect_invalid([&] { layer.build({0}); }, "Dropout d: input (0,), expected at least one value per sample");
}

// ---------------------------------------------------------------------------------------------------------------
// Activations and Softmax

TEST(ActivationsTest, BackwardMatchesNumericalGradient) {
  Sigmoid sigmoid;
  check_layer_gradients(sigmoid, {3, 4, 4});
  Tanh tanh_layer;
  check_layer_gradients(tanh_layer, {7});
  LeakyReLU leaky(LeakyReLUOptions().negative_slope(0.2f));
  check_layer_gradients(leaky, {2, 5, 3}, GradCheckOptions{.batch = 4, .tiles = 3});
  ELU elu(ELUOptions().alpha(1.5f));
  check_layer_gradients(elu, {2, 3, 3});
  GELU gelu;
  check_layer_gradients(gelu, {2, 3, 3});
}

// The layers pass their options to the kernels: one value per layer against the formula.
TEST(ActivationsTest, ForwardUsesTheOptions) {
  auto run = [](Layer& layer, float v) {
    layer.build({2});
    Tensor x({1, 2}), y({1, 2});
    x.copy_from(std::vector<float>{v, -v});
    layer.forward(x, y, PassContext{});
    return y.to_vector();
  };
  LeakyReLU leaky(LeakyReLUOptions().negative_slope(0.25f));
  EXPECT_EQ(run(leaky, 2.0f), (std::vector<float>{2.0f, -0.5f}));
  LeakyReLU leaky_default;
  EXPECT_FLOAT_EQ(run(leaky_default, 1.0f)[1], -0.01f);
  ELU elu(ELUOptions().alpha(2.0f));
  EXPECT_FLOAT_EQ(run(elu, 1.0f)[1], static_cast<float>(2.0 * std::expm1(-1.0)));
  GELU gelu;
  EXPECT_FLOAT_EQ(run(gelu, 1.0f)[0], static_cast<float>(0.5 * (1.0 + std::erf(1.0 / std::sqrt(2.0)))));
  Sigmoid sigmoid;
  EXPECT_FLOAT_EQ(run(sigmoid, 2.0f)[1], static_cast<float>(1.0 / (1.0 + std::exp(2.0))));
  Tanh tanh_layer;
  EXPECT_FLOAT_EQ(run(tanh_layer, 0.5f)[0], std::tanh(0.5f));
}

TEST(ActivationsTest, RejectsBadOptionsAndInputs) {
  expect_invalid([] { LeakyReLU(LeakyReLUOptions().negative_slope(std::numeric_limits<float>::infinity())); },
                 "LeakyReLU: negative_slope=inf, expected a finite value");
  expect_invalid([] { ELU(ELUOptions().alpha(-1.0f)); }, "ELU: alpha=-1, expected a finite value >= 0");
  GELU gelu;
  gelu.set_name("act");
  expect_invalid([&] { gelu.build({}); }, "GELU act: input (), expected at least one value per sample");
}

TEST(SoftmaxTest, BackwardMatchesNumericalGradient) {
  Softmax features;
  check_layer_gradients(features, {6});
  Softmax channels;
  check_layer_gradients(channels, {4, 2, 3}, GradCheckOptions{.batch = 3, .tiles = 3});
}

TEST(SoftmaxTest, EveryPositionSumsToOneOverTheChannels) {
  Softmax layer;
  layer.build({5, 2, 2});
  Tensor x({3, 5, 2, 2}, 2), y({3, 5, 2, 2}, 2);
  fill_random(x, 4, -20.0f, 20.0f);
  layer.forward(x, y, PassContext{});
  const auto yv = y.to_vector();
  for (int i = 0; i < 3; ++i) {
    for (int p = 0; p < 4; ++p) {
      double sum = 0.0;
      for (int ch = 0; ch < 5; ++ch) sum += yv[static_cast<std::size_t>((i * 5 + ch) * 4 + p)];
      EXPECT_NEAR(sum, 1.0, 1e-6) << "sample " << i << " position " << p;
    }
  }
}

TEST(SoftmaxTest, RejectsAnEmptyInput) {
  Softmax layer;
  layer.set_name("sm");
  expect_invalid([&] { layer.build({}); }, "Softmax sm: input (), expected (F) or (C, ...)");
}

// ---------------------------------------------------------------------------------------------------------------
// In a model

Sequential every_new_layer() {
  Sequential m;
  m.add<Conv2d>(Conv2dOptions(2, 4, 3).padding(1).bias(false));
  m.add<BatchNorm2d>(BatchNorm2dOptions(4));
  m.add<GELU>();
  m.add<AvgPool2d>(AvgPool2dOptions(2));
  m.add<Dropout>(DropoutOptions(0.2));
  m.add<Conv2d>(Conv2dOptions(4, 6, 3).padding(1));
  m.add<ELU>();
  m.add<GlobalAvgPool2d>();
  m.add<Flatten>();
  m.add<Dense>(DenseOptions(6, 8));
  m.add<BatchNorm2d>(BatchNorm2dOptions(8));
  m.add<LeakyReLU>();
  m.add<Tanh>();
  m.add<Sigmoid>();
  m.add<Dense>(DenseOptions(8, 3));
  return m;
}

// Pipelined steps (two in flight), running statistics shared by the steps, per-step dropout masks: two runs with
// the same seeds end with the same bits, and evaluation afterwards uses the running statistics.
TEST(NewLayersInAModelTest, TrainingIsReproducibleAndEvaluationRuns) {
  const io::Dataset data = io::synthetic_dataset(24, 2, 8, 8, 3, 13);
  auto train = [&](Sequential& model) {
    model.build({2, 8, 8}, 3);
    Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
    return fit(model, sgd, data, FitOptions().epochs(2).batch_size(8).tiles(3).seed(1).verbose(false));
  };
  Sequential a = every_new_layer();
  Sequential b = every_new_layer();
  const History ha = train(a);
  const History hb = train(b);
  ASSERT_EQ(ha.epochs.size(), 2u);
  EXPECT_TRUE(std::isfinite(ha.epochs[1].loss));
  EXPECT_EQ(ha.epochs[1].loss, hb.epochs[1].loss);
  EXPECT_EQ(a.weights_checksum(), b.weights_checksum());
  auto& bn_a = dynamic_cast<BatchNorm2d&>(a.layer(1));
  auto& bn_b = dynamic_cast<BatchNorm2d&>(b.layer(1));
  EXPECT_TRUE(bitwise_equal(bn_a.running_mean().to_vector(), bn_b.running_mean().to_vector()));
  EXPECT_TRUE(bitwise_equal(bn_a.running_var().to_vector(), bn_b.running_var().to_vector()));
  EXPECT_EQ(bn_a.num_batches_tracked().to_vector(), std::vector<float>{6.0f});
  const EvalResult r = evaluate(a, data, EvalOptions().batch_size(10).tiles(2));
  EXPECT_EQ(r.samples, 24);
  EXPECT_TRUE(std::isfinite(r.loss));
  EXPECT_EQ(bn_a.num_batches_tracked().to_vector(), std::vector<float>{6.0f});
}

}  // namespace
}  // namespace dtnn
