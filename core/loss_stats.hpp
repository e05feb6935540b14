// SPDX-License-Identifier: Apache-2.0
// The statistics a loss task returns for its rows, in this order: sums over the rows, added over tiles, steps
// and ranks by the training loop. Shared by the CPU and CUDA loss kernels and the metrics.
#pragma once

namespace dtnn {

// A row is one distribution over the last axis of the logits: a sample of a classifier, a position of a sequence
// model. The means the training loop reports are these sums over the kCounted one.
inline constexpr int kLossStats = 6;
enum LossStat : int {
  kLossSum = 0,       // the loss of each row
  kCorrect = 1,       // rows whose argmax(logits) == argmax(targets) (first index on ties)
  kTop5Correct = 2,   // rows whose target class has fewer than 5 logits strictly above its own
  kSquaredError = 3,  // each row's mean over classes of (probability - target)^2
  kAbsoluteError = 4, // each row's mean over classes of |probability - target|
  kCounted = 5        // the rows counted: every row, but the ones whose target is ignored (token ignore_index)
};

}  // namespace dtnn
