// SPDX-License-Identifier: Apache-2.0
// Scaled dot-product attention tasks, one per batch tile and pass (every head of the tile's samples in one task):
// forward (probabilities kept for backward, context) and backward-data (the packed q, k, v gradient). The
// projections around it are Dense tasks (codelets/dense.hpp).
#pragma once

#include "codelets/common.hpp"
#include "codelets/dropout.hpp"
#include "core/shapes.hpp"

namespace dtnn::codelets {

// qkv: [n, seq, 3E]; probs: [n, heads, seq, seq]; ctx: [n, seq, E]. drop: the attention dropout of this step, null
// for none; backward must get the same one. key_padding: int32 [n, seq] tiled as qkv, nonzero for a padded key
// (probability 0, hence no gradient in backward, which reads the probabilities); null for none.
void submit_attention_fwd(const TaskTag& tag, const AttentionShape& a, const DropoutDraw* drop, const Tensor& qkv,
                          Tensor& probs, Tensor& ctx, int tile, const Tensor* key_padding = nullptr);
// dctx: [n, seq, E]; dqkv: [n, seq, 3E].
void submit_attention_bwd_data(const TaskTag& tag, const AttentionShape& a, const DropoutDraw* drop,
                               const Tensor& qkv, const Tensor& probs, const Tensor& dctx, Tensor& dqkv, int tile);

}  // namespace dtnn::codelets
