// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "codelets/cpu/kernels.hpp"

namespace dtnn::kernels::cpu {
namespace {

using std::size_t;

// Calls fn(oy, ox, index of the first maximum within the plane, or -1 when the window lies wholly in padding).
// Padded cells are skipped rather than read as -inf, so they can never win. The forward and backward passes
// share it so that the cell receiving the gradient is exactly the one the forward pass selected.
template <typename Fn>
void for_each_window_argmax(const Pool2dShape& sh, const float* plane, Fn&& fn) {
  const int oh = sh.out_h();
  const int ow = sh.out_w();
  for (int oy = 0; oy < oh; ++oy) {
    const int y0 = oy * sh.stride_h - sh.pad_h;
    const int ylo = std::max(y0, 0);
    const int yhi = std::min(y0 + sh.kh, sh.h);
    for (int ox = 0; ox < ow; ++ox) {
      const int x0 = ox * sh.stride_w - sh.pad_w;
      const int xlo = std::max(x0, 0);
      const int xhi = std::min(x0 + sh.kw, sh.w);
      std::ptrdiff_t best = -1;
      float best_value = -std::numeric_limits<float>::infinity();
      for (int iy = ylo; iy < yhi; ++iy) {
        const float* row = plane + static_cast<size_t>(iy) * static_cast<size_t>(sh.w);
        for (int ix = xlo; ix < xhi; ++ix) {
          // Strict ">" keeps the first maximum in row-major order; "best < 0" lets a window of -inf values still
          // pick a real cell; the first NaN wins and stays, so a divergence propagates instead of vanishing.
          const float v = row[ix];
          if (best < 0 || v > best_value || (std::isnan(v) && !std::isnan(best_value))) {
            best_value = v;
            best = static_cast<std::ptrdiff_t>(iy) * sh.w + ix;
          }
        }
      }
      fn(oy, ox, best);
    }
  }
}

// The same rule as above for one value: strictly greater wins (first maximum), and the first NaN wins.
inline bool beats(float v, float best) { return v > best || (v != v && best == best); }

// 2x2 windows with stride 2 and no padding (the common case) go row by row without bounds checks. This gives
// the index of the winner within a window (0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right) by the
// exact rule, for the rare rows that hold a NaN.
inline int argmax2x2(const float* r0, const float* r1, int j) {
  const float a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], d = r1[2 * j + 1];
  int best = 0;
  float v = a;
  if (beats(b, v)) { best = 1; v = b; }
  if (beats(c, v)) { best = 2; v = c; }
  return beats(d, v) ? 3 : best;
}

bool is_plain_2x2(const Pool2dShape& sh) {
  return sh.kh == 2 && sh.kw == 2 && sh.stride_h == 2 && sh.stride_w == 2 && sh.pad_h == 0 && sh.pad_w == 0 &&
         2 * sh.out_h() <= sh.h && 2 * sh.out_w() <= sh.w;  // ceil mode's partial windows take the general path
}

}  // namespace

void maxpool2d_fwd(const Pool2dShape& sh, const float* x, float* y) {
  const int oh = sh.out_h();
  const int ow = sh.out_w();
  if (oh <= 0 || ow <= 0) {
    return;
  }
  const size_t in_plane = static_cast<size_t>(sh.h) * static_cast<size_t>(sh.w);
  const size_t out_plane = static_cast<size_t>(oh) * static_cast<size_t>(ow);
  const size_t planes = static_cast<size_t>(std::max(sh.n, 0)) * static_cast<size_t>(std::max(sh.c, 0));
  if (is_plain_2x2(sh)) {
    for (size_t p = 0; p < planes; ++p) {
      for (int i = 0; i < oh; ++i) {
        const float* r0 = x + p * in_plane + static_cast<size_t>(2 * i) * sh.w;
        const float* r1 = r0 + sh.w;
        float* yr = y + p * out_plane + static_cast<size_t>(i) * ow;
        float probe = 0.0f;  // NaN after the loop iff some window held a NaN (or +inf with -inf)
        for (int j = 0; j < ow; ++j) {
          // Ties give the same value whichever cell wins, so the forward pass needs no index.
          const float a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], d = r1[2 * j + 1];
          const float top = b > a ? b : a;
          const float bottom = d > c ? d : c;
          yr[j] = bottom > top ? bottom : top;
          probe += (a + b) + (c + d);
        }
        if (std::isnan(probe)) [[unlikely]] {
          for (int j = 0; j < ow; ++j) {
            const int w = argmax2x2(r0, r1, j);
            yr[j] = (w < 2 ? r0 : r1)[2 * j + (w & 1)];
          }
        }
      }
    }
    return;
  }
  for (size_t p = 0; p < planes; ++p) {
    const float* xp = x + p * in_plane;
    float* yp = y + p * out_plane;
    for_each_window_argmax(sh, xp, [&](int oy, int ox, std::ptrdiff_t best) {
      yp[static_cast<size_t>(oy) * static_cast<size_t>(ow) + static_cast<size_t>(ox)] =
          best < 0 ? -std::numeric_limits<float>::infinity() : xp[best];
    });
  }
}

void maxpool2d_bwd_data(const Pool2dShape& sh, const float* x, const float* dy, float* dx) {
  const int oh = sh.out_h();
  const int ow = sh.out_w();
  const size_t in_plane = static_cast<size_t>(std::max(sh.h, 0)) * static_cast<size_t>(std::max(sh.w, 0));
  const size_t planes = static_cast<size_t>(std::max(sh.n, 0)) * static_cast<size_t>(std::max(sh.c, 0));
  const size_t out_plane = static_cast<size_t>(std::max(oh, 0)) * static_cast<size_t>(std::max(ow, 0));
  if (is_plain_2x2(sh) && oh > 0 && ow > 0) {
    // Disjoint windows: every input cell is written exactly once (odd trailing rows/columns are zeroed).
    for (size_t p = 0; p < planes; ++p) {
      float* dxp = dx + p * in_plane;
      for (int i = 0; i < oh; ++i) {
        const float* r0 = x + p * in_plane + static_cast<size_t>(2 * i) * sh.w;
        const float* r1 = r0 + sh.w;
        float* d0 = dxp + static_cast<size_t>(2 * i) * sh.w;
        float* d1 = d0 + sh.w;
        const float* g = dy + p * out_plane + static_cast<size_t>(i) * ow;
        float probe = 0.0f;  // NaN after the loop iff some window held a NaN (or +inf with -inf)
        for (int j = 0; j < ow; ++j) {
          const float a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], d = r1[2 * j + 1];
          // The first cell equal to the maximum, as masks combined without short-circuits: branches on random
          // activations would be mispredicted half of the time.
          const float top = b > a ? b : a;
          const float bottom = d > c ? d : c;
          const float m = bottom > top ? bottom : top;
          const bool ia = a == m;
          const bool ib = (b == m) & !ia;
          const bool ic = (c == m) & !ia & !ib;
          const bool id = !(ia | ib | ic);
          probe += (a + b) + (c + d);
          const float gj = g[j];
          d0[2 * j] = ia ? gj : 0.0f;
          d0[2 * j + 1] = ib ? gj : 0.0f;
          d1[2 * j] = ic ? gj : 0.0f;
          d1[2 * j + 1] = id ? gj : 0.0f;
        }
        // Rows with a NaN are redone with the exact rule. The check is a running sum, not a test per window:
        // a per-window test turns the loop's selects into mispredicted branches (10x slower, measured).
        if (std::isnan(probe)) [[unlikely]] {
          for (int j = 0; j < ow; ++j) {
            const int w = argmax2x2(r0, r1, j);
            d0[2 * j] = w == 0 ? g[j] : 0.0f;
            d0[2 * j + 1] = w == 1 ? g[j] : 0.0f;
            d1[2 * j] = w == 2 ? g[j] : 0.0f;
            d1[2 * j + 1] = w == 3 ? g[j] : 0.0f;
          }
        }
        if (sh.w > 2 * ow) {
          std::fill(d0 + 2 * ow, d0 + sh.w, 0.0f);
          std::fill(d1 + 2 * ow, d1 + sh.w, 0.0f);
        }
      }
      if (sh.h > 2 * oh) {
        std::fill(dxp + static_cast<size_t>(2 * oh) * sh.w, dxp + in_plane, 0.0f);
      }
    }
    return;
  }
  std::fill_n(dx, planes * in_plane, 0.0f);
  if (oh <= 0 || ow <= 0) {
    return;
  }
  for (size_t p = 0; p < planes; ++p) {
    float* dxp = dx + p * in_plane;
    const float* dyp = dy + p * out_plane;
    // Overlapping windows may share a winner; their gradients add up in output order.
    for_each_window_argmax(sh, x + p * in_plane, [&](int oy, int ox, std::ptrdiff_t best) {
      if (best >= 0) {
        dxp[best] += dyp[static_cast<size_t>(oy) * static_cast<size_t>(ow) + static_cast<size_t>(ox)];
      }
    });
  }
}

}  // namespace dtnn::kernels::cpu
