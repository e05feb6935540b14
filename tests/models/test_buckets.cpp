// SPDX-License-Identifier: Apache-2.0
// The bucket policy as a pure function of the gradient sizes (models/buckets.hpp).
#include <gtest/gtest.h>

#include <vector>

#include "models/buckets.hpp"
#include "models/zoo.hpp"

namespace dtnn {
namespace {

using Buckets = std::vector<std::vector<std::size_t>>;

std::vector<std::vector<GradientSize>> layers_of(const std::vector<std::vector<std::size_t>>& sizes) {
  std::vector<std::vector<GradientSize>> layers;
  for (const auto& layer : sizes) {
    layers.emplace_back();
    for (const std::size_t n : layer) layers.back().push_back({n, 1});
  }
  return layers;
}

TEST(BucketsTest, ABucketClosesOnceItHoldsItsBytesEvenInsideALayer) {
  // 100 floats a bucket; one layer: 60 + 50 closes, 30 + 80 closes.
  const auto plan = plan_buckets(layers_of({{60, 50, 30, 80}}), BucketOptions().bytes(400).tail_buckets(false));
  EXPECT_EQ(plan, (Buckets{{0, 1}, {2, 3}}));
  // The last bucket closes at the end of the step, whatever it holds.
  EXPECT_EQ(plan_buckets(layers_of({{60, 50, 30}}), BucketOptions().bytes(400).tail_buckets(false)),
            (Buckets{{0, 1}, {2}}));
}

TEST(BucketsTest, TailBucketsCloseAtALayerBoundaryOnceTheRestOfTheStepIsSmaller) {
  const auto sizes = layers_of({{1000}, {300}, {200}, {100}});
  EXPECT_EQ(plan_buckets(sizes, BucketOptions().bytes(1 << 20).tail_buckets(true)), (Buckets{{0}, {1}, {2}, {3}}));
  EXPECT_EQ(plan_buckets(sizes, BucketOptions().bytes(1 << 20).tail_buckets(false)), (Buckets{{0, 1, 2, 3}}));
  // 100 in the bucket with 150 still to come: it stays open across the boundary.
  EXPECT_EQ(plan_buckets(layers_of({{100}, {100}, {50}}), BucketOptions().tail_buckets(true)), (Buckets{{0, 1}, {2}}));
}

TEST(BucketsTest, GradientsSummedElsewhereJoinNoBucketButCountAsToCome) {
  // Layer 1 is a synchronised BatchNorm: its 50 elements are not summed, yet the first bucket does not close
  // before them (100 < 110 still to come after layer 0).
  std::vector<std::vector<GradientSize>> layers{{{100, 1}}, {{50, 0}}, {{60, 1}}};
  EXPECT_EQ(plan_buckets(layers, BucketOptions().tail_buckets(true)), (Buckets{{0}, {2}}));
}

TEST(BucketsTest, PolicyDecisionsMatchThePlan) {
  BucketPolicy policy(BucketOptions().bytes(400).tail_buckets(true));
  EXPECT_EQ(policy.add(60), 0);
  EXPECT_EQ(policy.add(50), 1) << "110 floats >= 100";
  EXPECT_EQ(policy.layer_boundary(10), 0) << "nothing open";
  EXPECT_EQ(policy.add(30), 0);
  EXPECT_EQ(policy.layer_boundary(30), 1) << "30 open, 30 to come";
  EXPECT_EQ(policy.end_step(), 0) << "nothing open";
  EXPECT_EQ(policy.add(30), 0);
  EXPECT_EQ(policy.end_step(), 1);
}

// The figures of docs/data-parallel.md: resnet18_cifar10 at 25 MiB with tail buckets sums 33, 8.9, 2.1, 0.59 and 0.01 MB.
TEST(BucketsTest, Resnet18BucketsShrinkTowardsTheFirstLayers) {
  Sequential model = models::find("resnet18_cifar10").make();
  model.build({3, 32, 32}, 0);
  std::vector<std::vector<GradientSize>> layers;
  std::vector<std::size_t> flat;
  for (std::size_t i = model.size(); i-- > 0;) {
    layers.emplace_back();
    for (const NamedParameter& p : named_parameters(model.layer(i))) {
      layers.back().push_back({static_cast<std::size_t>(p.parameter->grad.numel()), 1});
      flat.push_back(layers.back().back().elements);
    }
  }
  std::vector<double> megabytes;
  for (const auto& bucket : plan_buckets(layers, BucketOptions())) {
    double bytes = 0.0;
    for (const std::size_t g : bucket) bytes += 4.0 * static_cast<double>(flat[g]);
    megabytes.push_back(bytes / 1e6);
  }
  const std::vector<double> expected{33.0, 8.9, 2.1, 0.59, 0.01};
  ASSERT_EQ(megabytes.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(megabytes[i], expected[i], 0.06 * expected[i] + 0.005) << "bucket " << i;
  }
}

}  // namespace
}  // namespace dtnn
