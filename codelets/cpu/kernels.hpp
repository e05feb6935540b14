// SPDX-License-Identifier: Apache-2.0
// CPU kernels of dtnn: plain functions on raw fp32 buffers, NCHW row-major, no StarPU.
// Every kernel is single-threaded (parallelism comes from the task graph) and deterministic.
// Gradients are *overwritten* (never accumulated) unless the name says otherwise.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/loss_stats.hpp"
#include "core/params.hpp"
#include "core/shapes.hpp"

namespace dtnn::kernels::cpu {

// ---- Dense: y[n, out] = x[n, in] * w[out, in]^T + b[out]  (weights laid out as PyTorch's Linear) ----
void dense_fwd(int n, int in, int out, const float* x, const float* w, const float* b, float* y);
// The same, then ReLU ("v < 0 ? 0 : v") on y in the same call when relu != 0 (a ReLU fused into the layer).
void dense_fwd(int n, int in, int out, const float* x, const float* w, const float* b, int relu, float* y);
// dx[n, in] = dy[n, out] * w[out, in]
void dense_bwd_data(int n, int in, int out, const float* dy, const float* w, float* dx);
// dw[out, in] = dy^T * x ; db[out] = sum over n of dy (db may be null)
void dense_bwd_weights(int n, int in, int out, const float* x, const float* dy, float* dw, float* db);
// dw[out, in] (+)= dy^T * x group by group: `groups` GEMMs of `rows` rows each (a sample's positions), each adding
// to dw what the ones before it left (the first overwrites dw unless accumulate != 0); db[out] (+)= dy's rows, one
// after the other (db may be null). The bits depend on the groups' order only, not on how a batch is split into
// calls: the fixed-order weight gradients of Dense on sequences and of a tied head.
void dense_bwd_weights_in_order(int groups, int rows, int in, int out, const float* x, const float* dy, int accumulate,
                                float* dw, float* db);

// ---- Bias over channels of an NCHW tensor (plane = H*W; dense layers use plane = 1) ----
void bias_add_fwd(int n, int channels, std::size_t plane, const float* b, float* y);
// db[c] = sum over n and the plane of dy (overwrites db)
void bias_bwd_weights(int n, int channels, std::size_t plane, const float* dy, float* db);

// ---- Element-wise activations ----
void relu_fwd(std::size_t count, const float* x, float* y);
// dx = dy where y > 0, else 0 (y is the forward output)
void relu_bwd_data(std::size_t count, const float* y, const float* dy, float* dx);
// dx = other + (y > 0 ? dy : 0): the backward pass of a ReLU fused after a residual Add, added to the gradient of the
// block's other path (the identity shortcut's share of the block's input gradient). Bitwise relu_bwd_data followed
// by sum_fixed_order of {other, that}.
void relu_bwd_data_add(std::size_t count, const float* y, const float* dy, const float* other, float* dx);


// ---- Convolution (geometry: core/shapes.hpp) ----
// im2col of one sample: col[(c/groups * r * s) x (out_h * out_w)] for group g (zeros where the window is in padding).
void im2col(const Conv2dShape& sh, const float* x_sample, int group, float* col);
// Inverse scatter-add of im2col for one sample and group: dx_sample (that group's channels) += col2im(col).
void col2im_add(const Conv2dShape& sh, const float* col, int group, float* dx_sample);

// Convolution by explicit im2col + BLIS sgemm ("im2col" variant). x[n,c,h,w], w[k,c/g,r,s], b[k] (nullable),
// y[n,k,oh,ow]. Scratch memory is thread-local inside the kernel.
void conv2d_fwd_im2col(const Conv2dShape& sh, const float* x, const float* w, const float* b, float* y);
void conv2d_bwd_data_im2col(const Conv2dShape& sh, const float* dy, const float* w, float* dx);
// dw[k, c/g, r, s] = sum over the n samples; db[k] (nullable) = sum of dy over n and the plane.
void conv2d_bwd_weights_im2col(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db);

// ---- Pooling ----
void maxpool2d_fwd(const Pool2dShape& sh, const float* x, float* y);
// Routes dy to the first position (row-major within the window) holding the maximum of x; dx is overwritten.
void maxpool2d_bwd_data(const Pool2dShape& sh, const float* x, const float* dy, float* dx);

// ---- Losses fused with their output activation, and the metrics of the batch ----
// stats (overwritten): kLossStats sums over the rows, core/loss_stats.hpp.

// Softmax + categorical cross-entropy (numerically stable). logits, targets [n, classes] (targets one-hot or
// smoothed, rows summing to 1). dlogits = (softmax(logits) - targets) * grad_scale (1 / global batch size).
// dlogits may alias logits.
void softmax_xent_fwd_bwd(int n, int classes, const float* logits, const float* targets, float grad_scale,
                          float* dlogits, float* stats);
// Sigmoid + binary cross-entropy per class (multi-label), averaged over the classes of a row like PyTorch's
// BCEWithLogitsLoss: row loss = mean_j -[t log s(z) + (1 - t) log(1 - s(z))], computed from the logits without
// overflow; dlogits = (sigmoid(logits) - targets) * grad_scale / classes.
void sigmoid_bce_fwd_bwd(int n, int classes, const float* logits, const float* targets, float grad_scale,
                         float* dlogits, float* stats);

// Softmax + cross-entropy against token ids (core/params.hpp, TokenXentParams): logits, dlogits [n, classes],
// targets [n] int32. A counted row's loss is -sum_j t_j log softmax(z)_j with t its smoothed target distribution;
// dlogits = (softmax(logits) - t) * grad_scale (1 / the counted rows of the global batch, for PyTorch's mean),
// 0 on an ignored row. stats[kCounted] = the counted rows, the other stats their sums. A target outside
// [0, classes) that is not ignore_index throws DataError naming the row (dlogits are then unspecified).
void token_xent_fwd_bwd(int n, int classes, const float* logits, const std::int32_t* targets,
                        const TokenXentParams& p, float grad_scale, float* dlogits, float* stats);

// ---- Channel concatenation (graph containers) ----
// y[i] = concat over parts p of part[p][i] for each of n samples; part p has part_elems[p] values per sample
// (its C_p * H * W). split is the inverse: part[p][i] = the matching slice of y[i].
void concat_fwd(int n, int nparts, const float* const* parts, const std::int64_t* part_elems, float* y);
void concat_bwd_data(int n, int nparts, const float* dy, const std::int64_t* part_elems, float* const* parts);

// ---- Fixed-order sums ----
// dst[i] = src[0][i] + src[1][i] + ... + src[nsrc-1][i], summed in that order (bitwise reproducible).
void sum_fixed_order(std::size_t count, int nsrc, const float* const* src, float* dst);
// Same, accumulating into dst in the fixed order: dst = ((dst + src[0]) + src[1]) + ...
void accumulate_fixed_order(std::size_t count, int nsrc, const float* const* src, float* dst);
// sum_fixed_order, then ReLU ("v < 0 ? 0 : v") on each total in the same pass: a residual Add with its ReLU fused.
void sum_fixed_order_relu(std::size_t count, int nsrc, const float* const* src, float* dst);

}  // namespace dtnn::kernels::cpu
