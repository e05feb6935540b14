// SPDX-License-Identifier: Apache-2.0
// convgemm: convolution at BLIS GEMM speed without ever building the im2col matrix (the convGemm approach of
// San Juan, Barrachina et al., JPDC 2022). A BLIS-style five-loop GEMM calls the sgemm micro-kernel of the BLIS
// configuration in use; its packing routines gather the convolution operands straight from the NCHW tensors,
// and its micro-tile epilogues write NCHW outputs (forward, with bias and ReLU), weight gradients, or scatter-add
// into dx (backward-data, the fused col2im of "deconvgemm").
//
// Same contract as the im2col kernels of kernels.hpp: x[n,c,h,w], w[k,c/groups,r,s], y[n,k,oh,ow]; every kernel
// is single-threaded, overwrites its outputs and is bitwise deterministic for a given shape and BLIS
// configuration. Packing buffers are thread-local, grown on demand and kept. Kernels do not validate shapes.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "codelets/cpu/kernels.hpp"

namespace dtnn::kernels::cpu {

// y = conv(x, w) + b, then ReLU in the same epilogue when relu != 0. b is nullable.
void conv2d_fwd_convgemm(const Conv2dShape& sh, const float* x, const float* w, const float* b, int relu, float* y);
// dx = transposed convolution of dy (overwrites dx).
void conv2d_bwd_data_convgemm(const Conv2dShape& sh, const float* dy, const float* w, float* dx);
// dw = sum over the n samples (overwrites); db (nullable) = sum of dy over n and the plane.
void conv2d_bwd_weights_convgemm(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db);

// ---- bf16 (codelets/cpu/bf16.hpp) ----
// Which micro-kernel computes bf16 products: AVX512-BF16's vdpbf16ps, or its emulation, which gives the same
// results bit for bit on any x86-64 (slowly: for machines without the instruction, and for tests).
// kAmx: AMX's TDPBF16PS (Intel Sapphire Rapids and later), whose sums are its own (convgemm_ukernels.hpp): the
// same rounded inputs and fp32 accumulation, other bits, no emulation.
enum class Bf16Math { kAvx512Bf16, kEmulated, kAmx };
// dw as conv2d_bwd_weights_convgemm computes it, from x and dy rounded to bf16 (to nearest, ties to even) as they
// are packed, with fp32 accumulation: pairs of products added in the micro-kernel as vdpbf16ps adds them, KC
// blocks of pixels added in fp32 in increasing order. db is summed in fp32 from dy as it is. Depthwise
// convolutions run the fp32 loops (memory-bound; bf16 would not pay). Bitwise deterministic for a shape and math
// (vdpbf16ps and its emulation give the same bits, AMX bits of its own). dtnn::InvalidArgument for kAvx512Bf16 on a
// CPU without AVX512-BF16, for kAmx on one without AMX-BF16 (or with DTNN_MAX_CPU_ISA below avx512).
void conv2d_bwd_weights_convgemm_bf16(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db,
                                      Bf16Math math);
// The forward and backward-data passes of conv2d_fwd_convgemm and conv2d_bwd_data_convgemm from x, dy and w rounded
// to bf16 as they are packed, with fp32 accumulation as above: the reduction (im2col rows forward, output channels
// backward) in KC blocks of pairs added in order, bias and ReLU in fp32 after the last block. Depthwise
// convolutions run the fp32 loops. Bitwise deterministic for a shape whatever the math; forward's outputs are also
// the same whatever n (tiles of a batch compute what the whole batch would), backward-data's, as in fp32, are not.
void conv2d_fwd_convgemm_bf16(const Conv2dShape& sh, const float* x, const float* w, const float* b, int relu,
                              float* y, Bf16Math math);
void conv2d_bwd_data_convgemm_bf16(const Conv2dShape& sh, const float* dy, const float* w, float* dx, Bf16Math math);
// The working memory of the largest of the three bf16 passes: the packed blocks of pairs, the packers' fp32 rows or
// blocks, bounded by the cache blocks whatever the batch.
std::size_t convgemm_bf16_workspace_bytes(const Conv2dShape& sh);

// Bytes of working memory a call needs beyond its inputs and outputs, the largest of the three passes: packing
// buffers for convgemm; the im2col matrix plus the GEMM packing buffers (BLIS's, same block sizes) for im2col.
std::size_t convgemm_workspace_bytes(const Conv2dShape& sh);
std::size_t im2col_workspace_bytes(const Conv2dShape& sh);

// Register block (mr x nr micro-tile) and cache blocks of the BLIS sgemm configuration in use.
struct GemmBlocking {
  int mr, nr, kc, mc, nc;
};
GemmBlocking convgemm_blocking();

// Micro-kernels: "blis" (BLIS's, of the configuration in use) and convgemm's own (convgemm_ukernels.hpp, named
// <instruction set>_<MR>x<NR>: "avx512_32x8", "avx2_24x4", ...). Each pass picks one per shape, as measured
// (docs/design.md, Convolution); the results of different kernels differ in rounding only.
enum class ConvPass { kFwd, kBwdData, kBwdWeights };
// Those this CPU runs at the level DTNN_MAX_CPU_ISA caps it to (core/cpu_features.hpp), "blis" first.
std::vector<std::string> convgemm_ukernels();
// Every own kernel built in, whether this CPU runs it or not.
std::vector<std::string> convgemm_own_ukernels();
// The one a pass of this shape runs now.
std::string convgemm_ukernel(const Conv2dShape& sh, ConvPass pass);
// Makes every later call run this micro-kernel ("" or "auto": the selection again), for tests and benchmarks;
// dtnn::InvalidArgument for a name this CPU does not run. The environment variable DTNN_CONVGEMM_UKERNEL sets it
// at the first call.
void convgemm_force_ukernel(const std::string& name);

}  // namespace dtnn::kernels::cpu
