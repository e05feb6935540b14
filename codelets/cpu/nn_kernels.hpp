// SPDX-License-Identifier: Apache-2.0
// CPU kernels of the layers that VGG, ResNet, DenseNet and Inception need besides convolution: average pooling,
// batch normalisation, dropout, element-wise activations and softmax, and those of sequence models: layer
// normalisation and embeddings. The rules of kernels.hpp hold: plain functions on raw fp32 NCHW buffers (int32
// for token ids), no StarPU, single-threaded, deterministic, outputs overwritten.
// A "plane" is H*W of an NCHW tensor; per-feature tensors (N, C) use plane = 1.
#pragma once

#include <cstddef>
#include <cstdint>

#include "codelets/cpu/kernels.hpp"

namespace dtnn::kernels::cpu {

// ---- Average pooling ----
// count_include_pad != 0: a window divides by its size clipped to the padded input (PyTorch's default, which is
// kh * kw whenever padding <= kernel / 2); 0: by the number of its cells inside the input.
void avgpool2d_fwd(const Pool2dShape& sh, int count_include_pad, const float* x, float* y);
// Each output's gradient is spread over its window, windows added in output order.
void avgpool2d_bwd_data(const Pool2dShape& sh, int count_include_pad, const float* dy, float* dx);
// y[i, c] = mean of the plane x[i, c, :] (accumulated in double): PyTorch's AdaptiveAvgPool2d(1).
void global_avgpool2d_fwd(int n, int c, std::size_t plane, const float* x, float* y);
// dx[i, c, :] = dy[i, c] / plane
void global_avgpool2d_bwd_data(int n, int c, std::size_t plane, const float* dy, float* dx);

// ---- Batch normalisation ----
// Training statistics are reduced in two levels so that they do not depend on how the batch is tiled: every
// sample gets its own per-channel partial sum (accumulated in double over its plane, rounded once), then the
// partials are added in sample order in double. Per-sample partials are computed tile by tile in parallel; the
// sample-order sums are the only serial part and cost n * c additions.

// partials[i * c + ch] = sum over the plane of x[i, ch, :]
void batch_norm_sums(int n, int c, std::size_t plane, const float* x, float* partials);
// partials[i * c + ch] = sum over the plane of (x[i, ch, :] - mean[ch])^2   (the second pass: no cancellation)
void batch_norm_sqdev_sums(int n, int c, std::size_t plane, const float* x, const float* mean, float* partials);
// acc[j] += partials[i * width + j] for i = 0, 1, ..., rows - 1 in that order.
void batch_norm_accumulate(int rows, int width, const float* partials, double* acc);
// mean[ch] = sum[ch] / count
void batch_norm_finish_mean(int c, double count, const double* sum, float* mean);

// From the sums of squared deviations: var = sqdev / count (biased, for normalising), invstd = 1 / sqrt(var + eps);
// running_mean and running_var move towards the batch's mean and *unbiased* variance (var * count / (count - 1)),
// as PyTorch's. count must exceed 1.
void batch_norm_finish_var(int c, const BatchNormUpdate& u, const double* sqdev, const float* mean, float* invstd,
                           float* running_mean, float* running_var);
// y = (x - mean) * (invstd * gamma) + beta per channel; gamma and beta may be null (no affine transform).
void batch_norm_fwd(int n, int c, std::size_t plane, const float* x, const float* mean, const float* invstd,
                    const float* gamma, const float* beta, float* y);
// Fused epilogues (models/fusion.hpp): v = (x - mean) * (invstd * gamma) + beta as above, then v + residual[e]
// when residual is not null (a residual block's other path), then ReLU ("v < 0 ? 0 : v") when relu != 0. Every
// step is rounded as the separate passes round it (BatchNorm, then the Add, then the ReLU), so the fused pass
// writes their bits.
void batch_norm_fwd_fused(int n, int c, std::size_t plane, const float* x, const float* mean, const float* invstd,
                          const float* gamma, const float* beta, const float* residual, int relu, float* y);
// Inference as one multiply-add per element: scale = gamma / sqrt(var + eps), shift = beta - mean * scale
// (computed in double, rounded once). The same values fold a BatchNorm into the preceding convolution.
void batch_norm_scale_shift(int c, double eps, const float* mean, const float* var, const float* gamma,
                            const float* beta, float* scale, float* shift);
// y = x * scale + shift with scale and shift from batch_norm_scale_shift of the running statistics.
void batch_norm_infer_fwd(int n, int c, std::size_t plane, double eps, const float* x, const float* mean,
                          const float* var, const float* gamma, const float* beta, float* y);
// The same with the epilogue of batch_norm_fwd_fused.
void batch_norm_infer_fwd_fused(int n, int c, std::size_t plane, double eps, const float* x, const float* mean,
                                const float* var, const float* gamma, const float* beta, const float* residual,
                                int relu, float* y);
// invstd = 1 / sqrt(var + eps): the running statistics in the layout of the batch statistics, for the backward
// pass of a BatchNorm in evaluation mode (frozen statistics).
void batch_norm_invstd(int c, double eps, const float* var, float* invstd);
// Per-sample partials of the backward pass, partials [n, 2c]: partials[i * 2c + ch] = sum over the plane of dy,
// partials[i * 2c + c + ch] = sum over the plane of dy * xhat with xhat = (x - mean) * invstd.
void batch_norm_bwd_sums(int n, int c, std::size_t plane, const float* x, const float* dy, const float* mean,
                         const float* invstd, float* partials);
// Backward of a BatchNorm whose output went through a fused ReLU: dy is the gradient of the ReLU's output
// relu_y, and the BatchNorm's own output gradient is dy where relu_y > 0, else 0 (kernels::cpu::relu_bwd_data),
// formed element by element inside the pass. relu_y null: dy as it is. Bitwise the unfused passes' results.
void batch_norm_bwd_sums_masked(int n, int c, std::size_t plane, const float* x, const float* relu_y, const float* dy,
                                const float* mean, const float* invstd, float* partials);
// From the sample-order sums (sums[0, c) of dy, sums[c, 2c) of dy * xhat): mean_dy and mean_dy_xhat (over count)
// for the data gradient, and dbeta = sum dy, dgamma = sum dy * xhat (either may be null).
void batch_norm_finish_bwd(int c, double count, const double* sums, float* mean_dy, float* mean_dy_xhat,
                           float* dgamma, float* dbeta);
// dx = gamma * invstd * (dy - mean_dy - xhat * mean_dy_xhat). gamma may be null (1). mean_dy and mean_dy_xhat are
// null for frozen statistics (evaluation mode), where the statistics do not depend on x: dx = gamma * invstd * dy.
void batch_norm_bwd_data(int n, int c, std::size_t plane, const float* x, const float* dy, const float* mean,
                         const float* invstd, const float* gamma, const float* mean_dy, const float* mean_dy_xhat,
                         float* dx);

// The data gradient with the ReLU mask of batch_norm_bwd_sums_masked (relu_y null: dy as it is).
void batch_norm_bwd_data_masked(int n, int c, std::size_t plane, const float* x, const float* relu_y, const float* dy,
                                const float* mean, const float* invstd, const float* gamma, const float* mean_dy,
                                const float* mean_dy_xhat, float* dx);

// bf16 activations (core/dtype.hpp's kBFloat16, std::uint16_t here): x (and dx) and y (and dy, relu_y) each fp32 or
// bf16, instantiated for the three pairs with bf16 (fp32 and fp32 are the functions above). Each computes on the
// exact fp32 values of bf16 inputs, and rounds a bf16 output (float_to_bf16) from the fp32 value the fp32 pass
// computes: bit for bit the fp32 pass on widened inputs, rounded.
void batch_norm_sums(int n, int c, std::size_t plane, const std::uint16_t* x, float* partials);
void batch_norm_sqdev_sums(int n, int c, std::size_t plane, const std::uint16_t* x, const float* mean,
                           float* partials);
template <class X, class Y>
void batch_norm_fwd_fused(int n, int c, std::size_t plane, const X* x, const float* mean, const float* invstd,
                          const float* gamma, const float* beta, const float* residual, int relu, Y* y);
template <class X, class Y>
void batch_norm_infer_fwd_fused(int n, int c, std::size_t plane, double eps, const X* x, const float* mean,
                                const float* var, const float* gamma, const float* beta, const float* residual,
                                int relu, Y* y);
template <class X, class Y>
void batch_norm_bwd_sums_masked(int n, int c, std::size_t plane, const X* x, const Y* relu_y, const Y* dy,
                                const float* mean, const float* invstd, float* partials);
template <class X, class Y>
void batch_norm_bwd_data_masked(int n, int c, std::size_t plane, const X* x, const Y* relu_y, const Y* dy,
                                const float* mean, const float* invstd, const float* gamma, const float* mean_dy,
                                const float* mean_dy_xhat, X* dx);

// ---- Dropout ----
// The keep decision of element e of batch row `row` at step `step` is a pure function of (seed, step, row, e):
// a counter-based hash (splitmix64), so that neither the tiling nor the order of tasks changes a mask.
DropoutParams dropout_params(std::uint64_t seed, std::int64_t step, double rate);
// The 32-bit draw deciding element e of row `row`: one half of the splitmix64 output number e / 2 + 1 of the
// row's stream (high half for even e). Exposed for tests.
std::uint32_t dropout_draw(std::uint64_t seed, std::int64_t step, std::int64_t row, std::uint64_t e);
// Rows [first_row, first_row + rows) of a batch: mask = kept ? scale : 0, y = x * mask.
void dropout_fwd(const DropoutParams& p, std::int64_t first_row, int rows, std::size_t row_elements, const float* x,
                 float* mask, float* y);
// dx = dy * mask
void dropout_bwd_data(std::size_t count, const float* mask, const float* dy, float* dx);

// ---- Element-wise activations (backward passes take what their derivative is best computed from) ----
// 1 / (1 + exp(-x)), evaluated so that exp never overflows.
void sigmoid_fwd(std::size_t count, const float* x, float* y);
// dx = dy * y * (1 - y)
void sigmoid_bwd_data(std::size_t count, const float* y, const float* dy, float* dx);
void tanh_fwd(std::size_t count, const float* x, float* y);
// dx = dy * (1 - y^2)
void tanh_bwd_data(std::size_t count, const float* y, const float* dy, float* dx);
// x > 0 ? x : slope * x
void leaky_relu_fwd(std::size_t count, float slope, const float* x, float* y);
void leaky_relu_bwd_data(std::size_t count, float slope, const float* x, const float* dy, float* dx);
// x > 0 ? x : alpha * (exp(x) - 1)
void elu_fwd(std::size_t count, float alpha, const float* x, float* y);
// dx = dy * (x > 0 ? 1 : alpha * exp(x))
void elu_bwd_data(std::size_t count, float alpha, const float* x, const float* dy, float* dx);
// Exact GELU: x * Phi(x), Phi the standard normal CDF (PyTorch's default, approximate='none').
void gelu_fwd(std::size_t count, const float* x, float* y);
// dx = dy * (Phi(x) + x * phi(x))
void gelu_bwd_data(std::size_t count, const float* x, const float* dy, float* dx);
// PyTorch's GELU(approximate='tanh'): y = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))); backward from x.
void gelu_tanh_fwd(std::size_t count, const float* x, float* y);
void gelu_tanh_bwd_data(std::size_t count, const float* x, const float* dy, float* dx);

// ---- Layer normalisation over the last axis (rows of `width` values) ----
// Per row: mean and biased variance accumulated in double (two passes), rstd = 1 / sqrt(var + eps);
// y = (x - mean) * rstd * w + b, or without w and b (both null) no affine transform. stats[2 i] = mean,
// stats[2 i + 1] = rstd of row i, for the backward passes.
void layer_norm_fwd(int rows, int width, float eps, const float* x, const float* w, const float* b, float* y,
                    float* stats);
// g = dy * w (dy when w is null), xhat = (x - mean) * rstd:
// dx = rstd * (g - mean over the row of g - xhat * mean over the row of g * xhat).
void layer_norm_bwd_data(int rows, int width, const float* x, const float* stats, const float* w, const float* dy,
                         float* dx);
// dw[j] += dy * xhat and db[j] += dy for each row in row order, onto zeros when accumulate == 0 or onto dw and db
// as they are otherwise: tiles accumulated one after another add every row of the batch in one order. dw and db
// overlap neither each other nor the inputs.
void layer_norm_bwd_weights(int rows, int width, const float* x, const float* stats, const float* dy, int accumulate,
                            float* dw, float* db);

// ---- Embedding: rows of a [num, dim] table picked by int32 ids ----
// y[i] = w[ids[i]] for the `rows` ids; an id outside [0, num) throws DataError naming it and its row.
void embedding_fwd(int rows, int dim, int num, const std::int32_t* ids, const float* w, float* y);
// dw[ids[i]] += dy[i] for i = 0, 1, ..., rows - 1 in that order, onto zeros when accumulate == 0 or onto dw as
// it is otherwise, skipping the ids equal to padding_idx (-1: none), whose row gets no gradient (PyTorch's
// padding_idx).
void embedding_bwd_weights(int rows, int dim, int num, int padding_idx, const std::int32_t* ids, const float* dy,
                           int accumulate, float* dw);

// ---- Positional encodings: a [max_len, dim] table added to the positions of (seq, dim) samples ----
// y[i, s, :] = x[i, s, :] + table[s, :] for the n samples.
void positional_add_fwd(int n, int seq, int dim, const float* x, const float* table, float* y);
// dw[s, :] += dy[i, s, :] for the n samples in order, onto zeros (the whole [max_len, dim] table, rows past seq
// included) when accumulate == 0 or onto dw as it is otherwise.
void positional_bwd_weights(int n, int seq, int dim, int max_len, const float* dy, int accumulate, float* dw);

// ---- Scaled dot-product attention (core/shapes.hpp, AttentionShape), n samples of one tile ----
// Per sample and head: probs = softmax(scale * q k^T) over the keys (causal: keys after the query get probability
// 0), ctx = dropout(probs) v. qkv [n, seq, 3E]; probs [n, heads, seq, seq] (kept for backward, before dropout);
// ctx [n, seq, E]. drop (null: none) drops probability (h, r, c) of sample first_row + i by dropout_draw's element
// (h seq + r) seq + c, so that neither the tile count nor the pass (backward draws it again) changes a mask.
// key_padding (null: none) [n, seq]: a nonzero entry is a padded key, which gets probability 0 from every query (and
// so, in backward, no gradient); a query left with no key gets probabilities 0 and a zero context (PyTorch: NaN).
void attention_fwd(const AttentionShape& a, int n, std::int64_t first_row, const DropoutParams* drop,
                   const float* qkv, float* probs, float* ctx, const std::int32_t* key_padding = nullptr);
// From dctx [n, seq, E], with m the dropout's scale-or-0 mask (1 without dropout): dv = (probs m)^T dctx,
// dp = (dctx v^T) m, ds = probs * (dp - rowsum(dp * probs)) * scale, dq = ds k, dk = ds^T q, written side by side
// into dqkv [n, seq, 3E] (overwritten).
void attention_bwd_data(const AttentionShape& a, int n, std::int64_t first_row, const DropoutParams* drop,
                        const float* qkv, const float* probs, const float* dctx, float* dqkv);

// ---- Softmax over the channels of x[n, c, plane] (PyTorch's dim=1; plane = 1 for (N, F) inputs) ----
void softmax_fwd(int n, int c, std::size_t plane, const float* x, float* y);
// dx = y * (dy - sum over channels of dy * y)
void softmax_bwd_data(int n, int c, std::size_t plane, const float* y, const float* dy, float* dx);

}  // namespace dtnn::kernels::cpu
