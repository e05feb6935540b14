// SPDX-License-Identifier: Apache-2.0
// Conv2d tasks, one per batch tile. x [n, c, h, w], weights [k, c/groups, r, s], bias [k] (optional).
// The geometry comes as a Conv2dShape whose n is ignored (each task uses its tile's rows).
// Each algorithm has codelets of its own ("conv2d_fwd_convgemm", "conv2d_fwd_im2col", ...), so that traces
// and StarPU's performance models tell them apart.
#pragma once

#include "codelets/common.hpp"
#include "codelets/cpu/kernels.hpp"
#include "codelets/kinds.hpp"

namespace dtnn::codelets {

// y = conv(x, w) + b, followed by ReLU in the same task when relu != 0 (convgemm applies it in the GEMM
// epilogue; im2col in a pass over the tile's output).
// In bf16 (either kind), convgemm's and im2col's forward and backward-data are convgemm's bf16 passes
// ("conv2d_fwd_convgemm_bf16[_nobias]", "conv2d_bwd_data_convgemm_bf16", "..._bf16emu"), on CPU workers only;
// Winograd's stay fp32 (bf16 inside its transforms has had no accuracy study yet: docs/design.md). The onednn
// algorithm (bf16 and bf16-amx only) runs oneDNN's bf16 passes ("conv2d_fwd_onednn_bf16[_nobias]",
// "conv2d_bwd_data_onednn_bf16", "conv2d_bwd_weights_onednn_bf16[_nobias]"), on CPU workers only.
void submit_conv2d_fwd(const TaskTag& tag, ConvAlgorithm algorithm, const Conv2dShape& shape,
                       const Tensor& x, const Tensor& w, const Tensor* b, int relu, Tensor& y, int tile,
                       Precision precision = Precision::kFp32);
void submit_conv2d_bwd_data(const TaskTag& tag, ConvAlgorithm algorithm, const Conv2dShape& shape,
                            const Tensor& dy, const Tensor& w, Tensor& dx, int tile,
                            Precision precision = Precision::kFp32);
// dw_tiles [tiles, k, c/groups, r, s] and db_tiles [tiles, k] (nullable) hold one partial gradient per tile. In bf16
// (either kind) every algorithm's weight gradients are convgemm's bf16 ones ("conv2d_bwd_weights_convgemm_bf16",
// "..._bf16emu"), on CPU workers only.
void submit_conv2d_bwd_weights(const TaskTag& tag, ConvAlgorithm algorithm, const Conv2dShape& shape,
                               const Tensor& x, const Tensor& dy, Tensor& dw_tiles, Tensor* db_tiles, int tile,
                               Precision precision = Precision::kFp32);

// Whether the algorithm computes this geometry (Winograd: kernels::cpu::winograd_fits; onednn:
// kernels::cpu::onednn_bf16_fits, or any in a simulation; the others: every one).
bool conv_algorithm_fits(ConvAlgorithm a, const Conv2dShape& shape);

// Times each pass of each algorithm that may run it (below) on random data of the given geometry on this thread and
// returns the fastest of each pass (PyDTNN's BestOf, pass by pass). Results are cached per geometry and precision, so
// layers of the same shape are timed once. The candidates are the passes a layer of that precision runs (above): in
// fp32 convgemm, im2col and Winograd (forward and backward-data); in bf16 convgemm's bf16 passes, Winograd's fp32
// ones, and in bf16 and bf16-amx oneDNN's bf16 passes where it fits (im2col would run convgemm's bf16 passes too, so
// it is not a candidate there).
// io: timed with those tensors in bf16, as the layer's tasks will take them.
ConvPlan fastest_conv_plan(const Conv2dShape& shape, Precision precision = Precision::kFp32, ConvIo io = {});

}  // namespace dtnn::codelets
