// SPDX-License-Identifier: Apache-2.0
// Dense (fully connected) tasks: one per batch tile. Weights [out, in], bias [out] (optional). The GEMM runs on the
// last axis: a sample of x holds row_elements / in rows (one per position of a sequence).
#pragma once

#include "codelets/common.hpp"

namespace dtnn::codelets {

// tf32: --precision tf32's codelets ("dense_fwd_tf32[_nobias]", "dense_bwd_data_tf32",
// "dense_bwd_weights_tf32[_nobias]"): cuBLAS's TF32 math on GPUs, the fp32 bodies on CPUs.
// y[tile] = x[tile] * w^T + b, then ReLU in the same task when relu != 0 (a ReLU fused into the layer)
void submit_dense_fwd(const TaskTag& tag, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, int tile,
                      int relu = 0, bool tf32 = false);
// dx[tile] = dy[tile] * w
void submit_dense_bwd_data(const TaskTag& tag, const Tensor& dy, const Tensor& w, Tensor& dx, int tile,
                           bool tf32 = false);
// dw_tiles[tile] = dy[tile]^T * x[tile]; db_tiles[tile] = column sums of dy[tile] (db_tiles may be null).
// dw_tiles has shape [tiles, out, in] (one partial gradient per tile), db_tiles [tiles, out].
void submit_dense_bwd_weights(const TaskTag& tag, const Tensor& x, const Tensor& dy, Tensor& dw_tiles,
                              Tensor* db_tiles, int tile, bool tf32 = false);

// dw[out, in] = the sum over the samples of the batch, in batch order, of dy[sample]^T * x[sample], and db[out] (may
// be null) the sum of dy's rows in batch order: tile 0 writes them, each next tile adds its samples to what the one
// before left, so the tiles must be submitted in order. The bits do not depend on the tile count (Dense on sequences;
// a weight shared with a layer that accumulates onto it the same way: a tied head). onto_existing != 0: tile 0 adds
// too, to what dw and db hold (another rank's partial sums in an ordered sum over the ranks).
void submit_dense_bwd_weights_in_order(const TaskTag& tag, const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db,
                                       int tile, int onto_existing = 0);

}  // namespace dtnn::codelets
