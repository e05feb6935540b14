// SPDX-License-Identifier: Apache-2.0
// CPU kernels of dtnn: plain functions on raw fp32 buffers, NCHW row-major, no StarPU.
// Every kernel is single-threaded (parallelism comes from the task graph) and deterministic.
// Gradients are *overwritten* (never accumulated) unless the name says otherwise.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtnn::kernels::cpu {

// ---- Dense: y[n, out] = x[n, in] * w[out, in]^T + b[out]  (weights laid out as PyTorch's Linear) ----
void dense_fwd(int n, int in, int out, const float* x, const float* w, const float* b, float* y);
// dx[n, in] = dy[n, out] * w[out, in]
void dense_bwd_data(int n, int in, int out, const float* dy, const float* w, float* dx);
// dw[out, in] = dy^T * x ; db[out] = sum over n of dy (db may be null)
void dense_bwd_weights(int n, int in, int out, const float* x, const float* dy, float* dw, float* db);

// ---- Bias over channels of an NCHW tensor (plane = H*W; dense layers use plane = 1) ----
void bias_add_fwd(int n, int channels, std::size_t plane, const float* b, float* y);
// db[c] = sum over n and the plane of dy (overwrites db)
void bias_bwd_weights(int n, int channels, std::size_t plane, const float* dy, float* db);

// ---- Element-wise activations ----
void relu_fwd(std::size_t count, const float* x, float* y);
// dx = dy where y > 0, else 0 (y is the forward output)
void relu_bwd_data(std::size_t count, const float* y, const float* dy, float* dx);

// ---- Convolution geometry, shared by every convolution variant ----
struct Conv2dShape {
  int n = 1;         // samples
  int c = 1;         // input channels
  int h = 1, w = 1;  // input height, width
  int k = 1;         // output channels
  int r = 1, s = 1;  // kernel height, width
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int dil_h = 1, dil_w = 1;
  int groups = 1;  // c and k are both divisible by groups; weights are [k, c/groups, r, s]

  [[nodiscard]] int out_h() const { return (h + pad_top + pad_bottom - dil_h * (r - 1) - 1) / stride_h + 1; }
  [[nodiscard]] int out_w() const { return (w + pad_left + pad_right - dil_w * (s - 1) - 1) / stride_w + 1; }
  // Multiply-adds x 2 of the forward pass (also the cost of each backward pass).
  [[nodiscard]] double flops() const {
    return 2.0 * n * k * out_h() * out_w() * (static_cast<double>(c) / groups) * r * s;
  }
};

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
struct Pool2dShape {
  int n = 1, c = 1, h = 1, w = 1;
  int kh = 2, kw = 2;
  int stride_h = 2, stride_w = 2;
  int pad_h = 0, pad_w = 0;  // symmetric; padded cells never win a max
  // 1: PyTorch's ceil_mode: a last, partial window is kept when it starts inside the input or its left padding.
  int ceil_mode = 0;
  [[nodiscard]] int out_h() const { return out_size(h, kh, stride_h, pad_h); }
  [[nodiscard]] int out_w() const { return out_size(w, kw, stride_w, pad_w); }
  [[nodiscard]] int out_size(int in, int k, int s, int p) const {
    const int span = in + 2 * p - k;
    if (!ceil_mode) return span / s + 1;
    int out = (span + s - 1) / s + 1;
    if ((out - 1) * s >= in + p) --out;
    return out;
  }
};
void maxpool2d_fwd(const Pool2dShape& sh, const float* x, float* y);
// Routes dy to the first position (row-major within the window) holding the maximum of x; dx is overwritten.
void maxpool2d_bwd_data(const Pool2dShape& sh, const float* x, const float* dy, float* dx);

// ---- Losses fused with their output activation, and the metrics of the batch ----
// stats (overwritten), per call, sums over the rows:
inline constexpr int kLossStats = 5;
enum LossStat : int {
  kLossSum = 0,      // the loss of each row
  kCorrect = 1,      // rows whose argmax(logits) == argmax(targets) (first index on ties)
  kTop5Correct = 2,  // rows whose target class has fewer than 5 logits strictly above its own
  kSquaredError = 3, // each row's mean over classes of (probability - target)^2
  kAbsoluteError = 4 // each row's mean over classes of |probability - target|
};

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

// ---- Channel concatenation (graph containers) ----
// y[i] = concat over parts p of part[p][i] for each of n samples; part p has part_elems[p] values per sample
// (its C_p * H * W). split is the inverse: part[p][i] = the matching slice of y[i].
void concat_fwd(int n, int nparts, const float* const* parts, const std::int64_t* part_elems, float* y);
void concat_bwd_data(int n, int nparts, const float* dy, const std::int64_t* part_elems, float* const* parts);

// ---- Reductions and updates ----
// dst[i] = src[0][i] + src[1][i] + ... + src[nsrc-1][i], summed in that order (bitwise reproducible).
void sum_fixed_order(std::size_t count, int nsrc, const float* const* src, float* dst);
// Same, accumulating into dst in the fixed order: dst = ((dst + src[0]) + src[1]) + ...
void accumulate_fixed_order(std::size_t count, int nsrc, const float* const* src, float* dst);

// SGD with momentum (PyTorch's formulation): g' = g + weight_decay * w; v = momentum * v + g';
// w -= lr * (nesterov ? g' + momentum * v : v).
struct SgdParams {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  int nesterov = 0;
};
void sgd_update(std::size_t count, const SgdParams& p, float* w, const float* g, float* v);

}  // namespace dtnn::kernels::cpu
