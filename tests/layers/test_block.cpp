// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "layers/batch_norm.hpp"
#include "layers/block.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "models/fusion.hpp"
#include "models/sequential.hpp"
#include "core/errors.hpp"
#include "support/blocks.hpp"
#include "support/gradient_check.hpp"

namespace dtnn {
namespace {

using testing::check_layer_gradients;
using testing::GradCheckOptions;

TEST(BlockTest, ResidualAddMatchesNumericalGradient) {
  Block block(Merge::kAdd);
  block.add_path(Path("").add_as<Conv2d>("conv1", Conv2dOptions(3, 3, 3).padding(1))
                     .add_as<ReLU>("relu")
                     .add_as<Conv2d>("conv2", Conv2dOptions(3, 3, 3).padding(1)));
  block.add_path(Path());  // identity shortcut
  check_layer_gradients(block, {3, 5, 5}, GradCheckOptions{.batch = 3, .tiles = 2});
}

TEST(BlockTest, DownsamplingShortcutMatchesNumericalGradient) {
  Block block(Merge::kAdd);
  block.add_path(Path("").add_as<Conv2d>("conv1", Conv2dOptions(2, 4, 3).stride(2).padding(1)));
  block.add_path(Path("downsample").add<Conv2d>(Conv2dOptions(2, 4, 1).stride(2)));
  check_layer_gradients(block, {2, 6, 6});
}

TEST(BlockTest, ConcatOfThreePathsMatchesNumericalGradient) {
  Block block(Merge::kConcat);
  block.add_path(Path().add<Conv2d>(Conv2dOptions(2, 3, 1)));
  block.add_path(Path().add<Conv2d>(Conv2dOptions(2, 2, 3).padding(1)).add<ReLU>());
  block.add_path(Path());  // DenseNet-style: the input itself
  EXPECT_EQ(block.build({2, 4, 4}), (Shape{7, 4, 4}));
  Block fresh(Merge::kConcat);
  fresh.add_path(Path().add<Conv2d>(Conv2dOptions(2, 3, 1)));
  fresh.add_path(Path().add<Conv2d>(Conv2dOptions(2, 2, 3).padding(1)).add<ReLU>());
  fresh.add_path(Path());
  check_layer_gradients(fresh, {2, 4, 4}, GradCheckOptions{.batch = 4, .tiles = 3});
}

TEST(BlockTest, NestedBlocksMatchNumericalGradient) {
  auto inner = std::make_unique<Block>(Merge::kConcat);
  inner->add_path(Path().add<Conv2d>(Conv2dOptions(2, 1, 1)));
  inner->add_path(Path().add<Conv2d>(Conv2dOptions(2, 1, 3).padding(1)));
  Block outer(Merge::kAdd);
  outer.add_path(Path().add(std::move(inner)));
  outer.add_path(Path());
  check_layer_gradients(outer, {2, 3, 3});
}

using test_support::basic_block;

// The fused block computes ReLU(block(x)), the ReLU that follows it fused (as models/fusion.hpp fuses it when the
// block is followed by a ReLU in its container).
TEST(BlockTest, FusedBatchNormAddAndReluMatchNumericalGradient) {
  for (int projection : {0, 1}) {
    SCOPED_TRACE(projection ? "projection shortcut" : "identity shortcut");
    auto block = projection ? basic_block(2, 3, 2) : basic_block(3, 3, 1);
    const FusionCounts counts = fuse_passes(*block);
    EXPECT_EQ(counts.relus, 1);   // relu1 into bn1
    EXPECT_EQ(counts.merges, 1);  // bn2 writes the sum
    EXPECT_EQ(block->fused_path(), 0);
    EXPECT_EQ(block->fuse_relu(), 1);
    EXPECT_NE(block->describe().find("fused BN+Add+ReLU"), std::string::npos) << block->describe();
    check_layer_gradients(*block, {projection ? 2 : 3, 6, 6}, GradCheckOptions{.batch = 3, .tiles = 2});
  }
}

TEST(BlockTest, FusedAddAndReluWithoutBatchNormMatchNumericalGradient) {
  Block block(Merge::kAdd);
  block.add_path(Path().add<Conv2d>(Conv2dOptions(3, 3, 3).padding(1)));
  block.add_path(Path().add<Conv2d>(Conv2dOptions(3, 3, 1)));
  block.add_path(Path());
  EXPECT_EQ(block.fuse_merge(), 0);  // three paths: the sum stays a task of its own, with the ReLU in it
  EXPECT_EQ(block.fuse_relu(), 1);
  check_layer_gradients(block, {3, 4, 4}, GradCheckOptions{.batch = 3, .tiles = 2});
}

TEST(BlockTest, NamesFollowPyTorchConventions) {
  Sequential model;
  auto block = std::make_unique<Block>(Merge::kAdd);
  block->add_path(Path("").add_as<Conv2d>("conv1", Conv2dOptions(2, 4, 3).padding(1).bias(false)));
  block->add_path(Path("downsample").add<Conv2d>(Conv2dOptions(2, 4, 1).bias(false)));
  model.add("layer1.0", std::move(block)).add<Flatten>().add_as<Dense>("fc", DenseOptions(4 * 3 * 3, 2));
  model.build({2, 3, 3}, 0);
  std::vector<std::string> names;
  for (const auto& p : model.named_parameters()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"layer1.0.conv1.weight", "layer1.0.downsample.0.weight", "fc.weight",
                                             "fc.bias"}));
  EXPECT_EQ(model.parameter_count(), 4 * 2 * 9 + 4 * 2 + 36 * 2 + 2);
  EXPECT_NE(model.summary().find("  layer1.0.downsample.0"), std::string::npos) << model.summary();
}

TEST(BlockTest, RejectsPathsThatCannotMerge) {
  Block add(Merge::kAdd);
  add.set_name("b");
  add.add_path(Path().add<Conv2d>(Conv2dOptions(2, 4, 1)));
  add.add_path(Path());
  try {
    add.build({2, 3, 3});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("Add b: path 1 outputs (2, 3, 3), expected (4, 3, 3) like path 0"),
              std::string::npos)
        << e.what();
  }
  Block concat(Merge::kConcat);
  concat.add_path(Path().add<MaxPool2d>(MaxPool2dOptions(2)));
  concat.add_path(Path());
  EXPECT_THROW(concat.build({2, 4, 4}), InvalidArgument);
  Block empty(Merge::kAdd);
  EXPECT_THROW(empty.build({1, 2, 2}), InvalidArgument);
}

}  // namespace
}  // namespace dtnn
