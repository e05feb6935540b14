// SPDX-License-Identifier: Apache-2.0
// Embedding tasks, one per batch tile and pass: the lookup, and the table gradient, which the tiles' tasks add to
// one after another (the first onto zeros), so that its sums do not depend on the tile count. The ids have no
// gradient, so there is no backward-data pass.
#pragma once

#include "codelets/common.hpp"

namespace dtnn::codelets {

// ids: int32 [n, ...]; w: [num, dim]; y: [n, ..., dim].
void submit_embedding_fwd(const TaskTag& tag, const Tensor& ids, const Tensor& w, Tensor& y, int tile);
// dw: [num, dim], written by tile 0 and added to by the next tiles, which must be submitted in tile order;
// padding_idx -1: none. onto_existing != 0: tile 0 adds too, to what dw holds (the gradient of a tied head, or
// another rank's partial sum in an ordered sum over the ranks).
void submit_embedding_bwd_weights(const TaskTag& tag, const Tensor& ids, const Tensor& dy, int padding_idx,
                                  Tensor& dw, int tile, int onto_existing = 0);

}  // namespace dtnn::codelets
