// SPDX-License-Identifier: Apache-2.0
// The dispatch of nn_kernels.hpp's layer_norm_* (AVX-512, AVX2 or plain x86-64, chosen at run time after checking
// the CPU, DTNN_MAX_CPU_ISA capping it as for the other kernels), and their plain x86-64 versions
// (layer_norm_impl.hpp's rows at the library's baseline flags).
#include "codelets/cpu/layer_norm.hpp"

#include "codelets/cpu/layer_norm_impl.hpp"
#include "codelets/cpu/nn_kernels.hpp"
#include "core/cpu_features.hpp"

namespace dtnn::kernels::cpu {

void layer_norm_fwd_generic(int rows, int width, float eps, const float* x, const float* w, const float* b, float* y,
                            float* stats) {
  layer_norm_fwd_rows(rows, width, eps, x, w, b, y, stats);
}

void layer_norm_bwd_data_generic(int rows, int width, const float* x, const float* stats, const float* w,
                                 const float* dy, float* dx) {
  layer_norm_bwd_data_rows(rows, width, x, stats, w, dy, dx);
}

void layer_norm_bwd_weights_generic(int rows, int width, const float* x, const float* stats, const float* dy,
                                    int accumulate, float* dw, float* db) {
  layer_norm_bwd_weights_rows(rows, width, x, stats, dy, accumulate, dw, db);
}

void layer_norm_fwd(int rows, int width, float eps, const float* x, const float* w, const float* b, float* y,
                    float* stats) {
#if defined(__x86_64__)
  if (cpu_has_avx512()) return layer_norm_fwd_avx512(rows, width, eps, x, w, b, y, stats);
  if (cpu_has_avx2_fma()) return layer_norm_fwd_avx2(rows, width, eps, x, w, b, y, stats);
#endif
  layer_norm_fwd_rows(rows, width, eps, x, w, b, y, stats);
}

void layer_norm_bwd_data(int rows, int width, const float* x, const float* stats, const float* w, const float* dy,
                         float* dx) {
#if defined(__x86_64__)
  if (cpu_has_avx512()) return layer_norm_bwd_data_avx512(rows, width, x, stats, w, dy, dx);
  if (cpu_has_avx2_fma()) return layer_norm_bwd_data_avx2(rows, width, x, stats, w, dy, dx);
#endif
  layer_norm_bwd_data_rows(rows, width, x, stats, w, dy, dx);
}

void layer_norm_bwd_weights(int rows, int width, const float* x, const float* stats, const float* dy, int accumulate,
                            float* dw, float* db) {
#if defined(__x86_64__)
  if (cpu_has_avx512()) return layer_norm_bwd_weights_avx512(rows, width, x, stats, dy, accumulate, dw, db);
  if (cpu_has_avx2_fma()) return layer_norm_bwd_weights_avx2(rows, width, x, stats, dy, accumulate, dw, db);
#endif
  layer_norm_bwd_weights_rows(rows, width, x, stats, dy, accumulate, dw, db);
}

}  // namespace dtnn::kernels::cpu
