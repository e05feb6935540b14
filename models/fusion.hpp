// SPDX-License-Identifier: Apache-2.0
// Rewriting a model's passes: fusions for training and inference (exact), and inference folding (from the running
// statistics).
#pragma once

#include "models/sequential.hpp"

namespace dtnn {

// What fuse_passes did.
struct FusionCounts {
  int relus = 0;   // ReLUs applied inside the layer before them (Conv2d, Dense, BatchNorm2d, an Add block)
  int merges = 0;  // Add blocks whose BatchNorm writes the sum (BatchNorm + Add [+ ReLU] in one pass)
};

// Fuses the memory-bound passes between convolutions, in the model and inside blocks (Sequential::build does it
// unless Sequential::fusion(0)): a ReLU that follows a Conv2d, Dense, BatchNorm2d or Add block runs in that layer's
// tasks (its forward epilogue; backward the mask is applied by the layer), and a two-path Add block with a path
// ending in a BatchNorm2d lets that BatchNorm write the block's output (normalise, add, ReLU in one pass). Every
// fused pass rounds as the separate passes did: outputs, gradients and trained weights are bitwise those of the
// unfused model, and names (checkpoints) do not change. Fused layers show it in the model summary.
FusionCounts fuse_passes(Sequential& model);
// The same inside one container layer (a Block and the blocks it holds), built or not: fusion depends on the
// layers' kinds and order only.
FusionCounts fuse_passes(Layer& container);

// Folds every BatchNorm2d that directly follows a Conv2d (in the model and inside blocks) into that
// convolution's weights and bias, from the running statistics: the convolution then computes what the pair
// computed in evaluation, and the BatchNorm passes its input through (with its fused epilogue, if any). For
// inference only: training the model afterwards is refused. Returns the number of BatchNorms folded.
int fold_batchnorm(Sequential& model);

}  // namespace dtnn
