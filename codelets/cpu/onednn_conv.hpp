// SPDX-License-Identifier: Apache-2.0
// Convolutions in bf16 by oneDNN (Intel's library, Debian's libdnnl-dev), for the per-layer choice of --conv auto
// and for --conv onednn (issue 37): inputs rounded to bf16 (to nearest, ties to even), sums in fp32, by the kernels
// oneDNN picks for this CPU (AMX's TDPBF16PS on Sapphire Rapids and later, vdpbf16ps where there is only
// AVX512-BF16). Same tensors as the other convolutions (fp32 NCHW x and y, OIHW weights, fp32 bias and gradients):
// each call reorders its inputs into the blocked bf16 layouts that oneDNN chose for the shape and its outputs back,
// on the calling thread alone (oneDNN's OpenMP limited to one thread there), with working memory that only grows.
// Bitwise deterministic for a shape on a CPU; the bits are oneDNN's own (no emulation). The primitives of each shape
// are created once per thread.
#pragma once

#include <string>

#include "codelets/cpu/convgemm.hpp"
#include "core/shapes.hpp"

namespace dtnn::kernels::cpu {

// Whether this build has oneDNN (CMake found libdnnl; otherwise every call below but these two throws).
bool onednn_built();
// Whether oneDNN computes all three passes of this geometry in bf16 on this CPU (it has no bf16 convolution below
// AVX-512): false without oneDNN. Cached per geometry.
bool onednn_bf16_fits(const Conv2dShape& sh);
// The implementation oneDNN runs for a pass, e.g. "brgconv:avx512_core_amx_bf16" ("" where it does not fit).
std::string onednn_bf16_impl(const Conv2dShape& sh, ConvPass pass);

// Gives back the calling thread's working memory (its primitives stay): for a thread that will run no more oneDNN
// convolutions for a while, as the thread that times --conv auto's candidates.
void onednn_release_thread_memory();

// As conv2d_fwd_convgemm (bias and ReLU in fp32, fused), conv2d_bwd_data_convgemm and conv2d_bwd_weights_convgemm
// (dw and db overwritten; db summed by oneDNN from dy as it rounded it). dtnn::InvalidArgument naming the geometry
// where onednn_bf16_fits is false.
// bf16_x: x (forward, weight gradients) or dx (backward-data) is a bf16 NCHW tensor (core/dtype.hpp's kBFloat16)
// instead of fp32; bf16_y: y (forward) or dy (backward). oneDNN reads bf16 operands as they are (a reorder of half
// the bytes into its blocked layout, or none) and rounds bf16 outputs as it stores them (bias and ReLU applied
// first).
void conv2d_fwd_onednn_bf16(const Conv2dShape& sh, const void* x, const float* w, const float* b, int relu, void* y,
                            bool bf16_x = false, bool bf16_y = false);
void conv2d_bwd_data_onednn_bf16(const Conv2dShape& sh, const void* dy, const float* w, void* dx, bool bf16_x = false,
                                 bool bf16_y = false);
void conv2d_bwd_weights_onednn_bf16(const Conv2dShape& sh, const void* x, const void* dy, float* dw, float* db,
                                    bool bf16_x = false, bool bf16_y = false);

}  // namespace dtnn::kernels::cpu
