// SPDX-License-Identifier: Apache-2.0
// The statistics a loss task returns for its rows, in this order: sums over the rows, added over tiles, steps
// and ranks by the training loop. Shared by the CPU and CUDA loss kernels and the metrics.
#pragma once

namespace dtnn {

// A row is one distribution over the last axis of the logits: a sample of a classifier, a position of a sequence
// model. The classifier losses write kLossStats sums, every row counted; the token loss writes kTokenLossStats,
// the last one (kCounted) the rows it counted, since it ignores the targets equal to ignore_index. The means the
// training loop reports are the sums over the rows counted. (The classifier losses' stats keep their five values:
// a sixth would change their tasks' data footprint and void every calibrated performance model.)
inline constexpr int kLossStats = 5;
inline constexpr int kTokenLossStats = 6;
enum LossStat : int {
  kLossSum = 0,       // the loss of each row
  kCorrect = 1,       // rows whose argmax(logits) == argmax(targets) (first index on ties)
  kTop5Correct = 2,   // rows whose target class has fewer than 5 logits strictly above its own
  kSquaredError = 3,  // each row's mean over classes of (probability - target)^2
  kAbsoluteError = 4, // each row's mean over classes of |probability - target|
  kCounted = 5        // token loss only: the rows counted, every row but the ones whose target is ignore_index
};

}  // namespace dtnn
