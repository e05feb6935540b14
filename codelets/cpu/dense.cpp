// SPDX-License-Identifier: Apache-2.0
#include <blis.h>

#include <algorithm>
#include <cstddef>

#include "codelets/cpu/kernels.hpp"

namespace dtnn::kernels::cpu {
namespace {

// BLIS 0.9 takes non-const operand pointers even though it never writes A, B, alpha or beta.
void sgemm(dim_t m, dim_t n, dim_t k, const float* a, inc_t rsa, inc_t csa, const float* b, inc_t rsb, inc_t csb,
           float beta, float* c, inc_t rsc) {
  float alpha = 1.0f;
  bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &alpha, const_cast<float*>(a), rsa, csa,
            const_cast<float*>(b), rsb, csb, &beta, c, rsc, 1);
}

}  // namespace

void dense_fwd(int n, int in, int out, const float* x, const float* w, const float* b, int relu, float* y) {
  dense_fwd(n, in, out, x, w, b, y);
  if (relu != 0 && n > 0 && out > 0) {
    relu_fwd(static_cast<std::size_t>(n) * static_cast<std::size_t>(out), y, y);
  }
}

void dense_fwd(int n, int in, int out, const float* x, const float* w, const float* b, float* y) {
  if (n <= 0 || out <= 0) {
    return;
  }
  const auto rows = static_cast<std::size_t>(n);
  const auto cols = static_cast<std::size_t>(out);
  float beta = 0.0f;
  // Seeding y with the bias lets the GEMM add the product in place instead of a second pass over y.
  if (b != nullptr) {
    for (std::size_t i = 0; i < rows; ++i) {
      std::copy_n(b, cols, y + i * cols);
    }
    beta = 1.0f;
  }
  if (in <= 0) {
    if (b == nullptr) {
      std::fill_n(y, rows * cols, 0.0f);
    }
    return;
  }
  // w^T is read through swapped strides: element (kk, j) of w^T is w[j * in + kk].
  sgemm(n, out, in, x, in, 1, w, 1, in, beta, y, out);
}

void dense_bwd_data(int n, int in, int out, const float* dy, const float* w, float* dx) {
  if (n <= 0 || in <= 0) {
    return;
  }
  if (out <= 0) {
    std::fill_n(dx, static_cast<std::size_t>(n) * static_cast<std::size_t>(in), 0.0f);
    return;
  }
  sgemm(n, in, out, dy, out, 1, w, in, 1, 0.0f, dx, in);
}

void dense_bwd_weights(int n, int in, int out, const float* x, const float* dy, float* dw, float* db) {
  if (out <= 0) {
    return;
  }
  const auto cols = static_cast<std::size_t>(out);
  if (in > 0) {
    if (n <= 0) {
      std::fill_n(dw, cols * static_cast<std::size_t>(in), 0.0f);
    } else {
      // dy^T through swapped strides: element (j, i) of dy^T is dy[i * out + j].
      sgemm(out, in, n, dy, 1, out, x, in, 1, 0.0f, dw, in);
    }
  }
  if (db != nullptr) {
    std::fill_n(db, cols, 0.0f);
    // Row by row keeps the summation order over samples fixed while the inner loop vectorises across outputs.
    for (std::size_t i = 0; i < static_cast<std::size_t>(std::max(n, 0)); ++i) {
      const float* row = dy + i * cols;
      for (std::size_t j = 0; j < cols; ++j) {
        db[j] += row[j];
      }
    }
  }
}

void dense_bwd_weights_in_order(int groups, int rows, int in, int out, const float* x, const float* dy, int accumulate,
                                float* dw, float* db) {
  if (out <= 0) {
    return;
  }
  const auto cols = static_cast<std::size_t>(out);
  const std::size_t all_rows =
      static_cast<std::size_t>(std::max(groups, 0)) * static_cast<std::size_t>(std::max(rows, 0));
  if (db != nullptr) {
    if (accumulate == 0) std::fill_n(db, cols, 0.0f);
    for (std::size_t i = 0; i < all_rows; ++i) {
      const float* row = dy + i * cols;
      for (std::size_t j = 0; j < cols; ++j) db[j] += row[j];
    }
  }
  if (in <= 0) {
    return;
  }
  if (accumulate == 0) {
    std::fill_n(dw, cols * static_cast<std::size_t>(in), 0.0f);
  }
  if (rows <= 0) {
    return;
  }
  for (std::size_t g = 0; g < static_cast<std::size_t>(std::max(groups, 0)); ++g) {
    const std::size_t first = g * static_cast<std::size_t>(rows);
    sgemm(out, in, rows, dy + first * cols, 1, out, x + first * static_cast<std::size_t>(in), in, 1, 1.0f, dw, in);
  }
}

}  // namespace dtnn::kernels::cpu
