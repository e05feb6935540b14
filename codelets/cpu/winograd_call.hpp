// SPDX-License-Identifier: Apache-2.0
// What winograd.cpp hands to the per-instruction-set compilations of winograd_impl.hpp (internal to the kernels).
#pragma once

#include <cstddef>

namespace dtnn::kernels::cpu {

// Which kernels the weights tensor holds for this call.
enum class WinogradWeights {
  kForward,  // w [k, c, 3, 3]: the call's own
  kFlipped,  // w [c, k, 3, 3] of the forward convolution whose backward-data this call is: swapped and flipped
};

// in [n, c, h, w] convolved by 3x3 kernels into out [n, k, h + pad_top + pad_bottom - 2, w + pad_left + pad_right
// - 2], stride 1; bias (nullable) and ReLU (relu != 0) in the output transform.
struct WinogradCall {
  int n, c, h, w, k;
  int pad_top, pad_bottom, pad_left, pad_right;
  const float* in;
  const float* w_data;
  WinogradWeights weights;
  const float* bias;
  int relu;
  float* out;
};

// Output tiles per chunk: whole MR panels, the chunk's transformed input and products (16 x chunk x (c + k)
// floats) about the size of L2, at least one panel, not beyond the call's tiles.
std::size_t winograd_chunk_tiles(std::size_t tiles, int c, int k, int mr, int nr);

void winograd_convolve_avx512(const WinogradCall& call);
void winograd_convolve_avx2(const WinogradCall& call);

}  // namespace dtnn::kernels::cpu
