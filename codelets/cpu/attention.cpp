// SPDX-License-Identifier: Apache-2.0
#include <blis.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "codelets/cpu/nn_kernels.hpp"
#include "codelets/cpu/vector_math.hpp"

namespace dtnn::kernels::cpu {
namespace {

// C (m x n, strides rsc, csc) = alpha A B + beta C, A and B through their strides: a head's slice of the packed
// q, k, v columns is read in place, transposed or not, without a copy. BLIS 0.9 takes non-const operands.
void sgemm(dim_t m, dim_t n, dim_t k, float alpha, const float* a, inc_t rsa, inc_t csa, const float* b, inc_t rsb,
           inc_t csb, float* c, inc_t rsc, inc_t csc) {
  float beta = 0.0f;
  bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &alpha, const_cast<float*>(a), rsa, csa,
            const_cast<float*>(b), rsb, csb, &beta, c, rsc, csc);
}

// The dropout mask of head h of sample `row` (element (h seq + r) seq + c of dropout_draw), the scale or 0 in
// mask, and the kept probabilities p * mask in dropped.
void drop_probabilities(const DropoutParams& drop, std::int64_t row, int h, dim_t s, const float* p, float* mask,
                        float* dropped) {
  const auto base = static_cast<std::uint64_t>(h) * static_cast<std::uint64_t>(s * s);
  for (dim_t k = 0; k < s * s; ++k) {
    const bool keep = dropout_draw(drop.seed, drop.step, row, base + static_cast<std::uint64_t>(k)) >= drop.threshold;
    mask[k] = keep ? drop.scale : 0.0f;
    dropped[k] = p[k] * mask[k];
  }
}

// Each row of p (scores) becomes the softmax over its keys that are neither padded nor (causal) after the query;
// the others get 0, and a row with none left is all 0.
void softmax_unpadded_keys(const AttentionShape& a, dim_t s, const std::int32_t* padded, float* p) {
  for (dim_t r = 0; r < s; ++r) {
    float* pr = p + r * s;
    const dim_t keys = a.causal ? r + 1 : s;
    float m = -std::numeric_limits<float>::infinity();
    for (dim_t c = 0; c < keys; ++c) {
      if (padded[c] == 0) m = pr[c] > m ? pr[c] : m;
    }
    double sum = 0.0;
    if (m != -std::numeric_limits<float>::infinity()) exp_shifted(static_cast<std::size_t>(keys), pr, m, pr);
    for (dim_t c = 0; c < keys; ++c) {
      if (padded[c] != 0) pr[c] = 0.0f;
      sum += pr[c];
    }
    const float inv = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
    for (dim_t c = 0; c < keys; ++c) pr[c] *= inv;
    for (dim_t c = keys; c < s; ++c) pr[c] = 0.0f;
  }
}

}  // namespace

void attention_fwd(const AttentionShape& a, int n, std::int64_t first_row, const DropoutParams* drop,
                   const float* qkv, float* probs, float* ctx, const std::int32_t* key_padding) {
  const dim_t s = a.seq;
  const dim_t d = a.head_dim;
  const dim_t e = static_cast<dim_t>(a.heads) * d;
  const dim_t row = 3 * e;
  const std::size_t scratch = drop != nullptr ? static_cast<std::size_t>(s * s) : 0;
  std::vector<float> mask(scratch), dropped(scratch);
  for (int i = 0; i < n; ++i) {
    const float* sample = qkv + static_cast<std::size_t>(i) * static_cast<std::size_t>(s * row);
    for (int h = 0; h < a.heads; ++h) {
      const float* q = sample + h * d;
      const float* k = sample + e + h * d;
      const float* v = sample + 2 * e + h * d;
      float* p = probs + (static_cast<std::size_t>(i) * a.heads + h) * static_cast<std::size_t>(s * s);
      // p = scale q k^T; k^T through swapped strides.
      sgemm(s, s, d, a.scale, q, row, 1, k, 1, row, p, s, 1);
      if (key_padding != nullptr) {
        softmax_unpadded_keys(a, s, key_padding + static_cast<std::size_t>(i) * static_cast<std::size_t>(s), p);
      }
      for (dim_t r = 0; r < s && key_padding == nullptr; ++r) {
        float* pr = p + r * s;
        const dim_t keys = a.causal ? r + 1 : s;
        float m = pr[0];
        for (dim_t c = 1; c < keys; ++c) m = pr[c] > m ? pr[c] : m;
        exp_shifted(static_cast<std::size_t>(keys), pr, m, pr);
        double sum = 0.0;
        for (dim_t c = 0; c < keys; ++c) sum += pr[c];
        const auto inv = static_cast<float>(1.0 / sum);
        for (dim_t c = 0; c < keys; ++c) pr[c] *= inv;
        for (dim_t c = keys; c < s; ++c) pr[c] = 0.0f;
      }
      const float* weights = p;
      if (drop != nullptr) {
        drop_probabilities(*drop, first_row + i, h, s, p, mask.data(), dropped.data());
        weights = dropped.data();
      }
      float* c = ctx + static_cast<std::size_t>(i) * static_cast<std::size_t>(s * e) + h * d;
      sgemm(s, d, s, 1.0f, weights, s, 1, v, row, 1, c, e, 1);
    }
  }
}

void attention_bwd_data(const AttentionShape& a, int n, std::int64_t first_row, const DropoutParams* drop,
                        const float* qkv, const float* probs, const float* dctx, float* dqkv) {
  const dim_t s = a.seq;
  const dim_t d = a.head_dim;
  const dim_t e = static_cast<dim_t>(a.heads) * d;
  const dim_t row = 3 * e;
  std::vector<float> ds(static_cast<std::size_t>(s * s));
  const std::size_t scratch = drop != nullptr ? static_cast<std::size_t>(s * s) : 0;
  std::vector<float> mask(scratch), dropped(scratch);
  for (int i = 0; i < n; ++i) {
    const float* sample = qkv + static_cast<std::size_t>(i) * static_cast<std::size_t>(s * row);
    float* dsample = dqkv + static_cast<std::size_t>(i) * static_cast<std::size_t>(s * row);
    const float* dc_sample = dctx + static_cast<std::size_t>(i) * static_cast<std::size_t>(s * e);
    for (int h = 0; h < a.heads; ++h) {
      const float* q = sample + h * d;
      const float* k = sample + e + h * d;
      const float* v = sample + 2 * e + h * d;
      const float* dc = dc_sample + h * d;
      const float* p = probs + (static_cast<std::size_t>(i) * a.heads + h) * static_cast<std::size_t>(s * s);
      const float* weights = p;
      if (drop != nullptr) {
        drop_probabilities(*drop, first_row + i, h, s, p, mask.data(), dropped.data());
        weights = dropped.data();
      }
      // dv = (p m)^T dctx
      sgemm(s, d, s, 1.0f, weights, 1, s, dc, e, 1, dsample + 2 * e + h * d, row, 1);
      // dp = (dctx v^T) m, then the softmax's backward in place: ds = p (dp - sum_c p dp) scale.
      sgemm(s, s, d, 1.0f, dc, e, 1, v, 1, row, ds.data(), s, 1);
      if (drop != nullptr) {
        for (std::size_t k = 0; k < scratch; ++k) ds[k] *= mask[k];
      }
      for (dim_t r = 0; r < s; ++r) {
        const float* pr = p + r * s;
        float* dr = ds.data() + r * s;
        double dot = 0.0;
        for (dim_t c = 0; c < s; ++c) dot += static_cast<double>(pr[c]) * dr[c];
        const auto shift = static_cast<float>(dot);
        for (dim_t c = 0; c < s; ++c) dr[c] = pr[c] * (dr[c] - shift) * a.scale;
      }
      // dq = ds k, dk = ds^T q
      sgemm(s, d, s, 1.0f, ds.data(), s, 1, k, row, 1, dsample + h * d, row, 1);
      sgemm(s, d, s, 1.0f, ds.data(), 1, s, q, row, 1, dsample + e + h * d, row, 1);
    }
  }
}

}  // namespace dtnn::kernels::cpu
