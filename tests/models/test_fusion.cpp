// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cmath>

#include "io/dataset.hpp"
#include "layers/batch_norm.hpp"
#include "layers/block.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "models/fusion.hpp"
#include "models/optimizers.hpp"
#include "models/training.hpp"
#include "core/errors.hpp"

namespace dtnn {
namespace {

Sequential conv_bn_net() {
  Sequential m;
  m.add<Conv2d>(Conv2dOptions(2, 4, 3).padding(1).bias(0)).add<BatchNorm2d>(BatchNorm2dOptions(4)).add<ReLU>();
  auto block = std::make_unique<Block>(Merge::kAdd);
  block->add_path(Path().add<Conv2d>(Conv2dOptions(4, 4, 3).padding(1)).add<BatchNorm2d>(BatchNorm2dOptions(4)));
  block->add_path(Path());
  m.add(std::move(block)).add<GlobalAvgPool2d>().add<Flatten>().add<Dense>(DenseOptions(4, 3));
  return m;
}

TEST(FusionTest, FoldedBatchNormGivesTheSamePredictions) {
  const io::Dataset data = io::synthetic_dataset(48, 2, 6, 6, 3, 3);
  Sequential model = conv_bn_net();
  model.build({2, 6, 6}, 4);
  Sgd sgd(SgdOptions(0.1f).momentum(0.9f));
  fit(model, sgd, data, FitOptions().epochs(2).batch_size(8).verbose(0));  // non-trivial running statistics
  const auto before = predict(model, data);
  EXPECT_EQ(fold_batchnorm(model), 2);
  EXPECT_EQ(fold_batchnorm(model), 0);  // already folded
  const auto after = predict(model, data);
  ASSERT_EQ(before.size(), after.size());
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_NEAR(before[i], after[i], 1e-5) << i;
  EXPECT_THROW(fit(model, sgd, data, FitOptions().batch_size(8).verbose(0)), InvalidArgument);
}

}  // namespace
}  // namespace dtnn
