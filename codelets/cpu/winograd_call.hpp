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

// How a call is cut, for a micro-kernel of MR x NR (computed once, in winograd.cpp, for the kernels and for the
// workspace bound alike).
struct WinogradPlan {
  int oh, ow;            // the output plane
  int th, tw;            // 2x2 tiles per column and per row of it
  std::size_t tiles;     // of the whole call: n th tw
  std::size_t kp;        // output channels rounded up to NR
  std::size_t kb;        // output channels whose transformed weights are held at a time (NR multiple, <= kp)
  std::size_t chunk;     // output tiles transformed and multiplied at a time (MR multiple)
};
WinogradPlan winograd_plan(const WinogradCall& call, int mr, int nr);

// Floats of working memory a call with this plan uses: a block of transformed weights (16 kb c), a chunk of
// transformed input (16 chunk c), its products with the block (16 chunk kb), and MR lanes of 16 positions.
std::size_t winograd_workspace_floats(const WinogradPlan& plan, int c, int mr);

void winograd_convolve_avx512(const WinogradCall& call);
void winograd_convolve_avx2(const WinogradCall& call);

}  // namespace dtnn::kernels::cpu
