// SPDX-License-Identifier: Apache-2.0
#include "models/fusion.hpp"

#include <vector>

#include "layers/batch_norm.hpp"
#include "layers/block.hpp"
#include "layers/conv2d.hpp"
#include "layers/simple.hpp"

namespace dtnn {
namespace {

void fuse_sequence(const std::vector<Layer*>& layers, FusionCounts& counts) {
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (auto* block = dynamic_cast<Block*>(layers[i])) {
      for (const auto& path : block->paths()) fuse_sequence(path, counts);
      counts.merges += block->fuse_merge();
    }
    if (i + 1 == layers.size() || layers[i]->absorbed()) continue;
    // Exactly ReLU: the other activations are classes of their own.
    auto* relu = dynamic_cast<ReLU*>(layers[i + 1]);
    if (relu == nullptr || relu->absorbed()) continue;
    if (layers[i]->fuse_relu()) {
      relu->mark_absorbed();
      ++counts.relus;
    }
  }
}

int fold_sequence(const std::vector<Layer*>& layers) {
  int folded = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (auto* block = dynamic_cast<Block*>(layers[i])) {
      for (const auto& path : block->paths()) folded += fold_sequence(path);
    }
    if (i + 1 == layers.size()) break;
    auto* conv = dynamic_cast<Conv2d*>(layers[i]);
    auto* bn = dynamic_cast<BatchNorm2d*>(layers[i + 1]);
    // A fused ReLU sits between them: the pair is not affine, nothing to fold.
    if (conv == nullptr || bn == nullptr || bn->folded() || conv->options().relu_) continue;
    std::vector<float> scale, shift;
    bn->folded_scale_shift(scale, shift);
    conv->fold_scale_shift(scale, shift);
    bn->mark_folded();
    ++folded;
  }
  return folded;
}

}  // namespace

FusionCounts fuse_passes(Sequential& model) {
  std::vector<Layer*> top;
  for (std::size_t i = 0; i < model.size(); ++i) top.push_back(&model.layer(i));
  FusionCounts counts;
  fuse_sequence(top, counts);
  return counts;
}

FusionCounts fuse_passes(Layer& container) {
  FusionCounts counts;
  fuse_sequence({&container}, counts);
  return counts;
}

int fold_batchnorm(Sequential& model) {
  std::vector<Layer*> top;
  for (std::size_t i = 0; i < model.size(); ++i) top.push_back(&model.layer(i));
  return fold_sequence(top);
}

}  // namespace dtnn
