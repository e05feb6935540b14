// SPDX-License-Identifier: Apache-2.0
// What the command line makes of its options, as library calls (models/recipe.hpp).
#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "io/dataset.hpp"
#include "models/recipe.hpp"
#include "models/schedules.hpp"

namespace dtnn {
namespace {

TEST(RecipeTest, ValidationSplitKeepsTheLastSamplesApart) {
  io::Dataset train = io::synthetic_dataset(10, 1, 4, 4, 2, 1);
  const std::vector<std::int32_t> labels = train.labels;
  const io::Dataset validation = split_validation(train, 0.25);  // round(2.5) = 3
  EXPECT_EQ(train.size(), 7);
  ASSERT_EQ(validation.size(), 3);
  for (std::int64_t i = 0; i < 3; ++i) EXPECT_EQ(validation.labels[static_cast<std::size_t>(i)], labels[7 + i]);
  io::Dataset small = io::synthetic_dataset(10, 1, 4, 4, 2, 1);
  try {
    split_validation(small, 0.01);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("0.01 of 10 samples leaves 0 for validation"), std::string::npos) << e.what();
  }
}

TEST(RecipeTest, SgdDefaultsToMomentumNineTenthsInAnyCase) {
  OptimizerConfig sgd;
  sgd.name = "SGD";
  EXPECT_NE(make_default_optimizer(sgd)->describe().find("momentum=0.9"), std::string::npos);
  sgd.momentum = 0.5f;
  EXPECT_NE(make_default_optimizer(sgd)->describe().find("momentum=0.5"), std::string::npos);
  OptimizerConfig adam;
  adam.name = "Adam";
  EXPECT_EQ(make_default_optimizer(adam)->name(), "adam");
}

TEST(RecipeTest, ScheduleCallbacksComeInTheOrderTheyMustRun) {
  EXPECT_EQ(schedule_callbacks(ScheduleOptions(), 3).size(), 1u) << "the cosine decay alone";
  EXPECT_TRUE(schedule_callbacks(ScheduleOptions().cosine(false), 3).empty());
  const auto all = schedule_callbacks(ScheduleOptions()
                                          .warmup(1.5, 0.1f)
                                          .step_decay(2)
                                          .plateau_patience(1)
                                          .early_stopping(2)
                                          .stop_at_loss(0.1f),
                                      4);
  ASSERT_EQ(all.size(), 6u);
  EXPECT_NE(dynamic_cast<WarmUp*>(all[0].get()), nullptr);
  EXPECT_NE(dynamic_cast<StepDecay*>(all[1].get()), nullptr);
  EXPECT_NE(dynamic_cast<ReduceLROnPlateau*>(all[2].get()), nullptr);
  EXPECT_NE(dynamic_cast<CosineDecay*>(all[3].get()), nullptr);
  EXPECT_NE(dynamic_cast<EarlyStopping*>(all[4].get()), nullptr);
  EXPECT_NE(dynamic_cast<StopAtLoss*>(all[5].get()), nullptr);
}

}  // namespace
}  // namespace dtnn
