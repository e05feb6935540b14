// SPDX-License-Identifier: Apache-2.0
// bf16 activations (issue 37, core/dtype.hpp's kBFloat16): under a bf16 precision the tensors between a convolution
// and the BatchNorm that reads it and between a BatchNorm (with its fused ReLU) and the convolution that reads it,
// and their gradients, are bf16; every other tensor stays fp32. Each layer stores its fp32 result rounded to nearest
// even and computes on the exact values of what it reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "codelets/cpu/bf16.hpp"
#include "layers/batch_norm.hpp"
#include "layers/block.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/pooling.hpp"
#include "layers/activations.hpp"
#include "layers/simple.hpp"
#include "models/fusion.hpp"
#include "models/sequential.hpp"
#include "runtime/engine.hpp"
#include "support/tensor_checks.hpp"

namespace dtnn {
namespace {

using codelets::Precision;
using test_support::bitwise_equal;

// A stem of two convolutions each with its BatchNorm and ReLU, a residual block whose path is convolution ->
// BatchNorm, and a head.
Sequential resnet_like(Precision p) {
  Sequential m;
  m.add<Conv2d>(Conv2dOptions(3, 4, 3).padding(1).bias(false).precision(p))
      .add<BatchNorm2d>(BatchNorm2dOptions(4))
      .add<ReLU>()
      .add<Conv2d>(Conv2dOptions(4, 4, 3).padding(1).bias(false).precision(p))
      .add<BatchNorm2d>(BatchNorm2dOptions(4))
      .add<ReLU>();
  auto block = std::make_unique<Block>(Merge::kAdd);
  block->add_path(Path()
                      .add<Conv2d>(Conv2dOptions(4, 4, 3).padding(1).bias(false).precision(p))
                      .add<BatchNorm2d>(BatchNorm2dOptions(4)));
  block->add_path(Path());
  m.add(std::move(block)).add<GlobalAvgPool2d>().add<Flatten>().add<Dense>(DenseOptions(4, 3));
  return m;
}

std::vector<DType> dtypes(const std::vector<Tensor>& tensors) {
  std::vector<DType> out;
  for (const Tensor& t : tensors) out.push_back(t.defined() ? t.dtype() : DType::kInt32);  // int32: not allocated
  return out;
}

std::int64_t bytes(const std::vector<Tensor>& tensors) {
  std::int64_t b = 0;
  for (const Tensor& t : tensors) b += t.defined() ? t.bytes() : 0;
  return b;
}

// The values of a bf16 tensor, widened (exactly); each must be float_to_bf16 of `computed`'s value at its index (the
// fp32 result of the same pass), or the test fails at the first that is not.
std::vector<float> widened_rounding_of(const Tensor& stored, const std::vector<float>& computed) {
  const std::vector<bfloat16> h = stored.values_as<bfloat16>();
  EXPECT_EQ(h.size(), computed.size());
  std::vector<float> v(h.size());
  for (std::size_t i = 0; i < h.size() && i < computed.size(); ++i) {
    if (h[i].bits != kernels::cpu::float_to_bf16(computed[i])) {
      ADD_FAILURE() << "element " << i << ": stored " << h[i].bits << ", expected " << computed[i] << " rounded";
      break;
    }
    v[i] = kernels::cpu::bf16_to_float(h[i].bits);
  }
  return v;
}

TEST(Bf16ActivationsTest, OnlyTheTensorsBetweenConvolutionsAndBatchNormsAreBf16) {
  constexpr auto f32 = DType::kFloat32;
  constexpr auto bf16 = DType::kBFloat16;
  constexpr auto none = DType::kInt32;
  const auto allocated = [](Precision p, bool fold) {
    Sequential m = resnet_like(p);
    m.build({3, 8, 8}, 1);
    if (fold) fold_batchnorm(m);
    std::vector<Tensor> acts, grads;
    m.allocate(4, 2, acts, &grads);
    return std::make_pair(std::move(acts), std::move(grads));
  };
  // Input; convolution -> BatchNorm; BatchNorm (+ReLU, fused: its own output never allocated) -> convolution;
  // convolution -> BatchNorm; BatchNorm + ReLU -> block (fp32: a block reads fp32); block; pool; flatten; dense.
  const auto [acts32, grads32] = allocated(Precision::kFp32, false);
  EXPECT_EQ(dtypes(acts32), (std::vector<DType>{f32, f32, none, f32, f32, none, f32, f32, f32, f32, f32}));
  const auto [acts, grads] = allocated(Precision::kBf16Emulated, false);
  EXPECT_EQ(dtypes(acts), (std::vector<DType>{f32, bf16, none, bf16, bf16, none, f32, f32, f32, f32, f32}));
  EXPECT_EQ(dtypes(grads), (std::vector<DType>{none, bf16, none, bf16, bf16, none, f32, f32, f32, f32, f32}));
  // Half the bytes of three 4 x 4 x 8 x 8 tensors and of their gradients.
  EXPECT_EQ(bytes(acts32) + bytes(grads32) - bytes(acts) - bytes(grads), 3 * 2 * 2 * 4 * 4 * 8 * 8);
  // A folded BatchNorm's inference passes are an add or a ReLU on fp32 values: no bf16 tensor feeds it.
  const auto [acts_folded, grads_folded] = allocated(Precision::kBf16Emulated, true);
  for (const Tensor& t : acts_folded) {
    if (t.defined()) EXPECT_EQ(t.dtype(), f32);
  }
}

// The convolution's bf16 output is its fp32 output rounded (bf16.hpp's float_to_bf16), the BatchNorm's output that
// of an fp32 BatchNorm on those values, and the convolution's weight gradient from the bf16 gradient is that of an
// fp32 gradient of the same values: each bit for bit.
TEST(Bf16ActivationsTest, ConvolutionRoundsItsOutputAndBatchNormReadsItsValues) {
  const Precision p = Precision::kBf16Emulated;
  Sequential net;  // convolution -> BatchNorm with a bf16 tensor between them
  net.add<Conv2d>(Conv2dOptions(3, 5, 3).padding(1).precision(p)).add<BatchNorm2d>(BatchNorm2dOptions(5));
  Sequential conv;  // the same convolution alone: fp32 output
  conv.add<Conv2d>(Conv2dOptions(3, 5, 3).padding(1).precision(p));
  Sequential bn;  // the same BatchNorm alone: fp32 input
  bn.add<BatchNorm2d>(BatchNorm2dOptions(5));
  for (Sequential* m : {&net, &conv}) m->build({3, 7, 7}, 3);
  bn.build({5, 7, 7}, 3);
  for (std::size_t i = 0; i < 2; ++i) {
    conv.layer(0).parameters()[i]->value.copy_from(net.layer(0).parameters()[i]->value.to_vector());
  }
  const std::int64_t n = 6;
  std::vector<Tensor> acts, grads, conv_acts, conv_grads, bn_acts, bn_grads;
  net.allocate(n, 2, acts, &grads);
  conv.allocate(n, 2, conv_acts, &conv_grads);
  bn.allocate(n, 2, bn_acts, &bn_grads);
  ASSERT_EQ(acts[1].dtype(), DType::kBFloat16);
  ASSERT_EQ(grads[1].dtype(), DType::kBFloat16);

  std::vector<float> x(static_cast<std::size_t>(acts[0].numel()));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  acts[0].copy_from(x);
  conv_acts[0].copy_from(x);
  const PassContext ctx{1, 0, 0};
  net.forward(acts, ctx);
  conv.forward(conv_acts, ctx);
  const std::vector<float> y32 = conv_acts[1].to_vector();
  const std::vector<float> widened = widened_rounding_of(acts[1], y32);
  ASSERT_FALSE(HasFailure());
  std::size_t rounded_away = 0;
  for (std::size_t i = 0; i < widened.size(); ++i) rounded_away += widened[i] != y32[i] ? 1 : 0;
  EXPECT_GT(rounded_away, widened.size() / 2)
      << "the fp32 outputs were bf16 values already: the test would say nothing";
  bn_acts[0].copy_from(widened);
  bn.forward(bn_acts, ctx);
  EXPECT_TRUE(bitwise_equal(acts[2].to_vector(), bn_acts[1].to_vector())) << "BatchNorm on the bf16 values";

  // Backward from the same output gradient: the bf16 gradient between the two layers, then the convolution's weight
  // gradient from it against the fp32 convolution's from its widened values.
  std::vector<float> dy(static_cast<std::size_t>(grads[2].numel()));
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = std::cos(0.11f * static_cast<float>(i));
  grads[2].copy_from(dy);
  net.backward(acts, grads, ctx, nullptr);
  const std::vector<bfloat16> g16 = grads[1].values_as<bfloat16>();
  std::vector<float> g(g16.size());
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = kernels::cpu::bf16_to_float(g16[i].bits);
  conv_grads[1].copy_from(g);
  conv.backward(conv_acts, conv_grads, ctx, nullptr);
  runtime::Engine::current()->wait_all();
  for (std::size_t i = 0; i < 2; ++i) {  // weight and bias
    EXPECT_TRUE(bitwise_equal(net.layer(0).parameters()[i]->grad.to_vector(),
                              conv.layer(0).parameters()[i]->grad.to_vector()))
        << net.layer(0).parameters()[i]->name;
  }
}

// The other edge: a BatchNorm's output (after its fused ReLU) rounded as stored, the convolution on its values, and
// the convolution's data gradient rounded, read by the BatchNorm's backward passes as it is.
TEST(Bf16ActivationsTest, BatchNormRoundsItsOutputAndConvolutionReadsItsValues) {
  const Precision p = Precision::kBf16Emulated;
  Sequential net;  // BatchNorm + ReLU -> convolution with a bf16 tensor between them
  net.add<BatchNorm2d>(BatchNorm2dOptions(3)).add<ReLU>().add<Conv2d>(Conv2dOptions(3, 5, 3).padding(1).precision(p));
  Sequential bn;  // the same BatchNorm and ReLU alone: fp32 output
  bn.add<BatchNorm2d>(BatchNorm2dOptions(3)).add<ReLU>();
  Sequential conv;  // the same convolution behind an identity (LeakyReLU of slope 1): fp32 input and data gradient
  conv.add<LeakyReLU>(LeakyReLUOptions().negative_slope(1.0f))
      .add<Conv2d>(Conv2dOptions(3, 5, 3).padding(1).precision(p));
  net.build({3, 7, 7}, 3);
  bn.build({3, 7, 7}, 3);
  conv.build({3, 7, 7}, 3);
  for (std::size_t i = 0; i < 2; ++i) {
    conv.layer(1).parameters()[i]->value.copy_from(net.layer(2).parameters()[i]->value.to_vector());
  }
  const std::int64_t n = 6;
  std::vector<Tensor> acts, grads, bn_acts, bn_grads, conv_acts, conv_grads;
  net.allocate(n, 2, acts, &grads);
  bn.allocate(n, 2, bn_acts, &bn_grads);
  conv.allocate(n, 2, conv_acts, &conv_grads);
  ASSERT_EQ(acts[2].dtype(), DType::kBFloat16);  // the ReLU fused into the BatchNorm: acts[1] is never allocated
  ASSERT_EQ(grads[2].dtype(), DType::kBFloat16);

  std::vector<float> x(static_cast<std::size_t>(acts[0].numel()));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f + 0.5f;
  acts[0].copy_from(x);
  bn_acts[0].copy_from(x);
  const PassContext ctx{1, 0, 0};
  net.forward(acts, ctx);
  bn.forward(bn_acts, ctx);
  const std::vector<float> widened = widened_rounding_of(acts[2], bn_acts[2].to_vector());
  ASSERT_FALSE(HasFailure());
  EXPECT_GT(std::count(widened.begin(), widened.end(), 0.0f), 0)
      << "no value below the ReLU: its mask would not be tested";
  conv_acts[0].copy_from(widened);
  conv.forward(conv_acts, ctx);
  EXPECT_TRUE(bitwise_equal(acts[3].to_vector(), conv_acts[2].to_vector())) << "the convolution of the bf16 values";

  std::vector<float> dy(static_cast<std::size_t>(grads[3].numel()));
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = std::cos(0.11f * static_cast<float>(i));
  grads[3].copy_from(dy);
  conv_grads[2].copy_from(dy);
  net.backward(acts, grads, ctx, nullptr);
  conv.backward(conv_acts, conv_grads, ctx, nullptr);
  runtime::Engine::current()->wait_all();
  const std::vector<float> g = widened_rounding_of(grads[2], conv_grads[1].to_vector());
  ASSERT_FALSE(HasFailure());
  for (std::size_t i = 0; i < 2; ++i) {  // the weight gradients from the bf16 input
    EXPECT_TRUE(bitwise_equal(net.layer(2).parameters()[i]->grad.to_vector(),
                              conv.layer(1).parameters()[i]->grad.to_vector()))
        << net.layer(2).parameters()[i]->name;
  }
  // The BatchNorm's backward from the bf16 gradient and its bf16 output as the ReLU's mask: its weight and bias
  // gradients are those of the fp32 BatchNorm given the widened gradient.
  bn_grads[2].copy_from(g);
  bn.backward(bn_acts, bn_grads, ctx, nullptr);
  runtime::Engine::current()->wait_all();
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(bitwise_equal(net.layer(0).parameters()[i]->grad.to_vector(),
                              bn.layer(0).parameters()[i]->grad.to_vector()))
        << "BatchNorm " << net.layer(0).parameters()[i]->name;
  }
}

}  // namespace
}  // namespace dtnn
