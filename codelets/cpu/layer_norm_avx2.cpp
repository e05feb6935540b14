// SPDX-License-Identifier: Apache-2.0
// layer_norm_impl.hpp's rows compiled for AVX2 (CMake sets this file's flags).
#include "codelets/cpu/layer_norm.hpp"
#include "codelets/cpu/layer_norm_impl.hpp"

namespace dtnn::kernels::cpu {

void layer_norm_fwd_avx2(int rows, int width, float eps, const float* x, const float* w, const float* b, float* y,
                         float* stats) {
  layer_norm_fwd_rows(rows, width, eps, x, w, b, y, stats);
}

void layer_norm_bwd_data_avx2(int rows, int width, const float* x, const float* stats, const float* w,
                              const float* dy, float* dx) {
  layer_norm_bwd_data_rows(rows, width, x, stats, w, dy, dx);
}

void layer_norm_bwd_weights_avx2(int rows, int width, const float* x, const float* stats, const float* dy,
                                 int accumulate, float* dw, float* db) {
  layer_norm_bwd_weights_rows(rows, width, x, stats, dy, accumulate, dw, db);
}

}  // namespace dtnn::kernels::cpu
