// SPDX-License-Identifier: Apache-2.0
// Winograd F(2x2, 3x3) convolution (Lavin and Gray, CVPR 2016) for 3x3 stride-1 layers: each 2x2 block of outputs
// of each (input channel, output channel) pair costs 16 multiplications instead of 36. Input tiles of 4x4 and the
// weights are transformed, the 16 transformed positions become 16 GEMMs over the input channels (run by convgemm's
// own micro-kernels on panels that the transforms write already packed), and each output tile is transformed back
// in the epilogue, with the bias and an optional ReLU.
//
// Backward-data of a stride-1 convolution is the forward convolution of dy by the weights flipped in both kernel
// axes with the channel axes swapped, padded by 2 - pad: the same path.
//
// Same contract as convgemm.hpp: x[n,c,h,w], w[k,c,3,3], y[n,k,oh,ow]; single-threaded; outputs overwritten;
// bitwise deterministic for a shape and micro-kernel, and each sample's result independent of the samples beside
// it (how a batch is split into tiles changes nothing). Results differ from a direct convolution in rounding only
// (the transforms add a few additions per product; tests/kernels bound the difference). Working memory is
// thread-local, grown on demand and kept.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/shapes.hpp"

namespace dtnn::kernels::cpu {

// Whether the Winograd path serves this shape on this CPU: a 3x3 kernel, stride 1, dilation 1, one group, every
// padding at most 2 (backward-data needs 2 - pad >= 0), and AVX-512 or AVX2 + FMA for the micro-kernels (not capped
// below avx2 by DTNN_MAX_CPU_ISA).
bool winograd_fits(const Conv2dShape& sh);

// Whether it also pays for sh.n samples, as measured against convgemm (docs/design.md, Convolution;
// bench/conv_layers): at least 16 input and 16 output channels (3 input channels ran at 0.77x convgemm forward and
// 3 output channels at 0.48x backward-data: the GEMMs' reductions and panels are then mostly padding), an output
// plane of at least 2x2 (one whole tile per sample; a 1x1 plane would use a quarter of each tile), and at least
// winograd_min_batch samples. The winograd variant of a layer uses it for the tiles where this holds and convgemm
// for the others.
bool winograd_pays(const Conv2dShape& sh);
// The fewest samples (sh.n aside) for which winograd_pays holds: enough for 32 output tiles of 2x2, below which the
// weight transform, the same for any batch, costs more than the GEMMs save (512 -> 512 channels on a 2x2 plane:
// 1.2-1.3x convgemm at 32 samples, below 1x at 16); 0 where no batch pays.
int winograd_min_batch(const Conv2dShape& sh);

// y = conv(x, w) + b, then ReLU when relu != 0; b nullable.
void conv2d_fwd_winograd(const Conv2dShape& sh, const float* x, const float* w, const float* b, int relu, float* y);
// dx = transposed convolution of dy (overwrites dx).
void conv2d_bwd_data_winograd(const Conv2dShape& sh, const float* dy, const float* w, float* dx);

// Bytes of working memory the larger of the two passes needs: transformed weights, one chunk of transformed
// input tiles and the chunk's 16 products.
std::size_t winograd_workspace_bytes(const Conv2dShape& sh);

// The micro-kernels the Winograd GEMMs can run on this CPU ("avx512_32x8", "avx2_24x4"), the selection's first.
std::vector<std::string> winograd_ukernels();
// Makes later calls run this one ("" or "auto": the selection again), for tests and benchmarks;
// dtnn::InvalidArgument naming the known ones otherwise.
void winograd_force_ukernel(const std::string& name);

}  // namespace dtnn::kernels::cpu
