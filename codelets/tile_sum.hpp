// SPDX-License-Identifier: Apache-2.0
// Sum of the per-tile partial gradients into one gradient, in the fixed tile order 0, 1, ..., so that a run
// is bitwise reproducible whatever the scheduler or number of workers.
#pragma once

#include "codelets/common.hpp"

namespace dtnn::codelets {

// partials: [tiles, *shape of total]; total = partials[0] + ... + partials[used - 1] (a short last batch can use
// fewer tiles than were allocated). One task when the count fits StarPU's buffer limit, else a chain of tasks
// that accumulate in the same order. onto_existing != 0: total = ((total + partials[0]) + ...), continuing what
// total holds (another rank's partial sum in an ordered sum over the ranks).
void submit_tile_sum(const TaskTag& tag, const Tensor& partials, int used, Tensor& total, int onto_existing = 0);

}  // namespace dtnn::codelets
