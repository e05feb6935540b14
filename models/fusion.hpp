// SPDX-License-Identifier: Apache-2.0
// Inference-time rewriting of a trained model.
#pragma once

#include "models/sequential.hpp"

namespace dtnn {

// Folds every BatchNorm2d that directly follows a Conv2d (in the model and inside blocks) into that
// convolution's weights and bias, from the running statistics: the convolution then computes what the pair
// computed in evaluation, and the BatchNorm passes its input through. For inference only: training the model
// afterwards is refused. Returns the number of BatchNorms folded.
int fold_batchnorm(Sequential& model);

}  // namespace dtnn
