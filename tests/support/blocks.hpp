// SPDX-License-Identifier: Apache-2.0
// Building blocks that several test networks share.
#pragma once

#include <memory>

#include "layers/batch_norm.hpp"
#include "layers/block.hpp"
#include "layers/conv2d.hpp"
#include "layers/simple.hpp"

namespace dtnn::test_support {

// A ResNet basic block: conv, BatchNorm, ReLU, conv, BatchNorm on the branch; the shortcut an identity (stride 1,
// in == out) or a projection (1x1 conv + BatchNorm, named "downsample").
inline std::unique_ptr<Block> basic_block(int in, int out, int stride) {
  auto block = std::make_unique<Block>(Merge::kAdd);
  block->add_path(Path("")
                      .add_as<Conv2d>("conv1", Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false))
                      .add_as<BatchNorm2d>("bn1", BatchNorm2dOptions(out))
                      .add_as<ReLU>("relu1")
                      .add_as<Conv2d>("conv2", Conv2dOptions(out, out, 3).padding(1).bias(false))
                      .add_as<BatchNorm2d>("bn2", BatchNorm2dOptions(out)));
  if (stride == 1 && in == out) {
    block->add_path(Path());
  } else {
    block->add_path(Path("downsample")
                        .add<Conv2d>(Conv2dOptions(in, out, 1).stride(stride).bias(false))
                        .add<BatchNorm2d>(BatchNorm2dOptions(out)));
  }
  return block;
}

}  // namespace dtnn::test_support
