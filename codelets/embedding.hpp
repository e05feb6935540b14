// SPDX-License-Identifier: Apache-2.0
// Embedding tasks, one per batch tile and pass: the lookup, and the tile's partial table gradient (summed in tile
// order by the layer). The ids have no gradient, so there is no backward-data pass.
#pragma once

#include "codelets/common.hpp"

namespace dtnn::codelets {

// ids: int32 [n, ...]; w: [num, dim]; y: [n, ..., dim].
void submit_embedding_fwd(const TaskTag& tag, const Tensor& ids, const Tensor& w, Tensor& y, int tile);
// dw_tiles: [tiles, num, dim], the tile's partial; padding_idx -1: none.
void submit_embedding_bwd_weights(const TaskTag& tag, const Tensor& ids, const Tensor& dy, int padding_idx,
                                  Tensor& dw_tiles, int tile);

}  // namespace dtnn::codelets
