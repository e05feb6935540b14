// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/errors.hpp"
#include "io/dataset.hpp"
#include "io/io_test_util.hpp"
#include "io/normalize.hpp"

namespace dtnn::io {
namespace {

using namespace test_util;  // NOLINT(google-build-using-namespace)

// Two samples of 2x1x2. Channel 0 holds {0, 0.25} and {0.5, 1}; channel 1 is constant 0.5.
Dataset tiny_dataset() {
  Dataset d;
  d.name = "tiny";
  d.channels = 2;
  d.height = 1;
  d.width = 2;
  d.classes = 2;
  d.images = {0.0f, 0.25f, 0.5f, 0.5f, 0.5f, 1.0f, 0.5f, 0.5f};
  d.labels = {0, 1};
  return d;
}

TEST(ChannelStatsTest, MatchesHandComputation) {
  const ChannelStats stats = channel_stats(tiny_dataset());
  ASSERT_EQ(stats.mean.size(), 2u);
  ASSERT_EQ(stats.std.size(), 2u);
  // mean = 1.75 / 4; population variance = E[x^2] - mean^2 = 1.3125 / 4 - 0.4375^2.
  EXPECT_FLOAT_EQ(stats.mean[0], 0.4375f);
  EXPECT_FLOAT_EQ(stats.std[0], static_cast<float>(std::sqrt(0.328125 - 0.19140625)));
  EXPECT_FLOAT_EQ(stats.mean[1], 0.5f);
  EXPECT_EQ(stats.std[1], 0.0f);
}

TEST(ChannelStatsTest, RejectsEmptyAndInconsistentDatasets) {
  Dataset empty = tiny_dataset();
  empty.images.clear();
  empty.labels.clear();
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { channel_stats(empty); }, {"tiny", "non-empty"}));
  Dataset short_images = tiny_dataset();
  short_images.images.pop_back();
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { channel_stats(short_images); }, {"tiny", "expected 8", "got 7"}));
}

TEST(NormalizeTest, AppliesTrainStatisticsPerChannel) {
  const Dataset train = tiny_dataset();
  const ChannelStats stats = channel_stats(train);
  const float s = static_cast<float>(std::sqrt(0.13671875));

  Dataset normalized = train;
  normalize(normalized, stats);
  const std::vector<float> expected = {(0.0f - 0.4375f) / s, (0.25f - 0.4375f) / s, 0, 0,
                                       (0.5f - 0.4375f) / s, (1.0f - 0.4375f) / s,  0, 0};
  ASSERT_EQ(normalized.images.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(normalized.images[i], expected[i], 1e-6f) << i;
  }

  // The test set takes the training statistics, not its own.
  Dataset test = train.subset(0, 1);
  test.images = {1.0f, 0.0f, 0.75f, 0.25f};
  normalize(test, stats);
  EXPECT_NEAR(test.images[0], (1.0f - 0.4375f) / s, 1e-6f);
  EXPECT_NEAR(test.images[1], (0.0f - 0.4375f) / s, 1e-6f);
  EXPECT_NEAR(test.images[2], 0.25f, 1e-6f);  // std 0 divides by 1
  EXPECT_NEAR(test.images[3], -0.25f, 1e-6f);
}

TEST(NormalizeTest, GivesZeroMeanUnitStd) {
  Dataset d = synthetic_dataset(64, 3, 5, 7, 4, 9);
  normalize(d, channel_stats(d));
  const ChannelStats after = channel_stats(d);
  for (std::size_t c = 0; c < 3; ++c) {
    EXPECT_NEAR(after.mean[c], 0.0f, 1e-5f) << c;
    EXPECT_NEAR(after.std[c], 1.0f, 1e-5f) << c;
  }
}

TEST(NormalizeTest, RejectsMismatchedStatistics) {
  Dataset d = tiny_dataset();
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { normalize(d, ChannelStats{{0.5f}, {1.0f}}); },
                                           {"tiny", "1 channels", "expected 2"}));
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { normalize(d, ChannelStats{{0.5f, 0.5f}, {1.0f, -1.0f}}); },
                                           {"tiny", "channel 1", "std -1"}));
  EXPECT_TRUE(throws_with<InvalidArgument>(
      [&] { normalize(d, ChannelStats{{NAN, 0.5f}, {1.0f, 1.0f}}); }, {"tiny", "channel 0", "nan"}));
  EXPECT_EQ(d.images, tiny_dataset().images);
}

}  // namespace
}  // namespace dtnn::io
