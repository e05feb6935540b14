// SPDX-License-Identifier: Apache-2.0
#include "codelets/cpu/shortcut_pad.hpp"

#include <algorithm>
#include <cstddef>

namespace dtnn::kernels::cpu {

void shortcut_pad_fwd(const ShortcutPadShape& sh, const float* x, float* y) {
  const int oh = sh.out_h();
  const int ow = sh.out_w();
  const std::size_t in_plane = static_cast<std::size_t>(sh.h) * sh.w;
  const std::size_t out_plane = static_cast<std::size_t>(oh) * ow;
  const int front = sh.pad_front();
  for (int i = 0; i < sh.n; ++i) {
    float* yi = y + static_cast<std::size_t>(i) * sh.k * out_plane;
    std::fill(yi, yi + static_cast<std::size_t>(front) * out_plane, 0.0f);
    std::fill(yi + static_cast<std::size_t>(front + sh.c) * out_plane, yi + static_cast<std::size_t>(sh.k) * out_plane,
              0.0f);
    for (int ch = 0; ch < sh.c; ++ch) {
      const float* xp = x + (static_cast<std::size_t>(i) * sh.c + ch) * in_plane;
      float* yp = yi + static_cast<std::size_t>(front + ch) * out_plane;
      for (int r = 0; r < oh; ++r) {
        const float* xr = xp + static_cast<std::size_t>(r) * sh.stride * sh.w;
        float* yr = yp + static_cast<std::size_t>(r) * ow;
        for (int q = 0; q < ow; ++q) yr[q] = xr[static_cast<std::size_t>(q) * sh.stride];
      }
    }
  }
}

void shortcut_pad_bwd_data(const ShortcutPadShape& sh, const float* dy, float* dx) {
  const int oh = sh.out_h();
  const int ow = sh.out_w();
  const std::size_t in_plane = static_cast<std::size_t>(sh.h) * sh.w;
  const std::size_t out_plane = static_cast<std::size_t>(oh) * ow;
  const int front = sh.pad_front();
  std::fill(dx, dx + static_cast<std::size_t>(sh.n) * sh.c * in_plane, 0.0f);
  for (int i = 0; i < sh.n; ++i) {
    for (int ch = 0; ch < sh.c; ++ch) {
      const float* gp = dy + (static_cast<std::size_t>(i) * sh.k + front + ch) * out_plane;
      float* dp = dx + (static_cast<std::size_t>(i) * sh.c + ch) * in_plane;
      for (int r = 0; r < oh; ++r) {
        const float* gr = gp + static_cast<std::size_t>(r) * ow;
        float* dr = dp + static_cast<std::size_t>(r) * sh.stride * sh.w;
        for (int q = 0; q < ow; ++q) dr[static_cast<std::size_t>(q) * sh.stride] = gr[q];
      }
    }
  }
}

}  // namespace dtnn::kernels::cpu
