// SPDX-License-Identifier: Apache-2.0
// LayerNorm tasks over the last axis, one per batch tile and pass: forward (output and each row's mean and rstd),
// backward-data, backward-weights (the tiles' tasks add to the weight and bias gradients one after another, the
// first onto zeros, so that the sums do not depend on the tile count).
#pragma once

#include "codelets/common.hpp"

namespace dtnn::codelets {

// x, y: [n, ..., width]; stats: [n, rows per sample, 2]; w, b: [width], both null without the affine transform.
void submit_layer_norm_fwd(const TaskTag& tag, float eps, const Tensor& x, const Tensor* w, const Tensor* b,
                           Tensor& y, Tensor& stats, int tile);
// w: null without the affine transform.
void submit_layer_norm_bwd_data(const TaskTag& tag, const Tensor& x, const Tensor& stats, const Tensor* w,
                                const Tensor& dy, Tensor& dx, int tile);
// dw, db: [width], written by tile 0 and added to by the next tiles, which must be submitted in tile order.
// onto_existing != 0: tile 0 adds too, to what dw and db hold (another rank's partial sums in an ordered sum over the
// ranks).
void submit_layer_norm_bwd_weights(const TaskTag& tag, const Tensor& x, const Tensor& stats, const Tensor& dy,
                                   Tensor& dw, Tensor& db, int tile, int onto_existing = 0);

}  // namespace dtnn::codelets
