// SPDX-License-Identifier: Apache-2.0
// The instruction sets' entry points of nn_kernels.hpp's layer_norm_fwd, layer_norm_bwd_data and
// layer_norm_bwd_weights (layer_norm_impl.hpp's rows compiled for plain x86-64, AVX2 and AVX-512), for their
// dispatch and the tests; the three give the same bits. Same arguments as nn_kernels.hpp's.
#pragma once

namespace dtnn::kernels::cpu {

void layer_norm_fwd_generic(int rows, int width, float eps, const float* x, const float* w, const float* b, float* y,
                            float* stats);
void layer_norm_fwd_avx2(int rows, int width, float eps, const float* x, const float* w, const float* b, float* y,
                         float* stats);
void layer_norm_fwd_avx512(int rows, int width, float eps, const float* x, const float* w, const float* b, float* y,
                           float* stats);

void layer_norm_bwd_data_generic(int rows, int width, const float* x, const float* stats, const float* w,
                                 const float* dy, float* dx);
void layer_norm_bwd_data_avx2(int rows, int width, const float* x, const float* stats, const float* w,
                              const float* dy, float* dx);
void layer_norm_bwd_data_avx512(int rows, int width, const float* x, const float* stats, const float* w,
                                const float* dy, float* dx);

void layer_norm_bwd_weights_generic(int rows, int width, const float* x, const float* stats, const float* dy,
                                    int accumulate, float* dw, float* db);
void layer_norm_bwd_weights_avx2(int rows, int width, const float* x, const float* stats, const float* dy,
                                 int accumulate, float* dw, float* db);
void layer_norm_bwd_weights_avx512(int rows, int width, const float* x, const float* stats, const float* dy,
                                   int accumulate, float* dw, float* db);

}  // namespace dtnn::kernels::cpu
