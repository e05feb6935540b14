// SPDX-License-Identifier: Apache-2.0
// Positional encoding tasks, one per batch tile and pass: the table added to every sample's positions, and (for a
// learned table) its gradient, which the tiles' tasks add to one after another (the first onto zeros).
#pragma once

#include "codelets/common.hpp"

namespace dtnn::codelets {

// x, y: [n, seq, dim]; table: [max_len, dim] with max_len >= seq.
void submit_positional_add_fwd(const TaskTag& tag, const Tensor& x, const Tensor& table, Tensor& y, int tile);
// dw: [max_len, dim], written by tile 0 and added to by the next tiles, which must be submitted in tile order.
// onto_existing != 0: tile 0 adds too, to what dw holds (another rank's partial sum in an ordered sum over the ranks).
void submit_positional_bwd_weights(const TaskTag& tag, const Tensor& dy, Tensor& dw, int tile, int onto_existing = 0);

}  // namespace dtnn::codelets
