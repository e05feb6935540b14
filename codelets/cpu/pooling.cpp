// SPDX-License-Identifier: Apache-2.0
// Max, average and global average pooling. The windows come from core/shapes.hpp (pool_span), as on CUDA.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "codelets/cpu/kernels.hpp"
#include "codelets/cpu/nn_kernels.hpp"
#include "codelets/cpu/plane_sums.hpp"

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
    const PoolSpan r = pool_span(oy, sh.h, sh.kh, sh.stride_h, sh.pad_h);
    for (int ox = 0; ox < ow; ++ox) {
      const PoolSpan c = pool_span(ox, sh.w, sh.kw, sh.stride_w, sh.pad_w);
      std::ptrdiff_t best = -1;
      float best_value = -std::numeric_limits<float>::infinity();
      for (int iy = r.lo; iy < r.hi; ++iy) {
        const float* row = plane + static_cast<size_t>(iy) * static_cast<size_t>(sh.w);
        for (int ix = c.lo; ix < c.hi; ++ix) {
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

// for_each_window_argmax without a branch per cell, for planes that hold no NaN: the first cell inside the window
// starts as the best, and each cell strictly greater replaces it (selects, not branches: on activations they would
// be mispredicted half of the time; 3x3/2 windows of resnet50's stem measured 6x slower). Without a NaN that is the
// exact rule's cell. A plane whose sum is NaN (a NaN, or both infinities) gets false and nothing called: the exact
// rule is the caller's.
template <typename Fn>
bool for_each_window_argmax_finite(const Pool2dShape& sh, const float* plane, Fn&& fn) {
  const size_t count = static_cast<size_t>(sh.h) * static_cast<size_t>(sh.w);
  float probe = 0.0f;
  for (size_t i = 0; i < count; ++i) probe += plane[i];
  if (std::isnan(probe)) return false;
  const int oh = sh.out_h();
  const int ow = sh.out_w();
  thread_local std::vector<PoolSpan> columns;
  columns.resize(static_cast<size_t>(ow));
  for (int ox = 0; ox < ow; ++ox) columns[static_cast<size_t>(ox)] = pool_span(ox, sh.w, sh.kw, sh.stride_w, sh.pad_w);
  for (int oy = 0; oy < oh; ++oy) {
    const PoolSpan r = pool_span(oy, sh.h, sh.kh, sh.stride_h, sh.pad_h);
    for (int ox = 0; ox < ow; ++ox) {
      const PoolSpan c = columns[static_cast<size_t>(ox)];
      if (r.lo >= r.hi || c.lo >= c.hi) {
        fn(oy, ox, std::ptrdiff_t{-1});
        continue;
      }
      std::ptrdiff_t best = static_cast<std::ptrdiff_t>(r.lo) * sh.w + c.lo;
      float best_value = plane[best];
      for (int iy = r.lo; iy < r.hi; ++iy) {
        const std::ptrdiff_t row = static_cast<std::ptrdiff_t>(iy) * sh.w;
        for (int ix = c.lo; ix < c.hi; ++ix) {
          const float v = plane[row + ix];
          const bool greater = v > best_value;
          best = greater ? row + ix : best;
          best_value = greater ? v : best_value;
        }
      }
      fn(oy, ox, best);
    }
  }
  return true;
}

// The same rule as above for one value: strictly greater wins (first maximum), and the first NaN wins.
inline bool beats(float v, float best) { return v > best || (v != v && best == best); }

// Disjoint 2x2 windows (Pool2dShape::plain_2x2, the common case) go row by row without bounds checks. This gives
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

// ---- Average pooling ----

// The cells of every window along one axis, computed once per call: windows are rectangles, so a window's input
// cells and its divisor are products of a row span and a column span.
struct Span {
  int lo, hi;   // the cells inside the input
  int counted;  // cells in the divisor: the padded window's with count_include_pad, else those inside the input
};

std::vector<Span> spans(int out, int in, int kernel, int stride, int pad, int count_include_pad) {
  std::vector<Span> s(static_cast<size_t>(std::max(out, 0)));
  for (int o = 0; o < out; ++o) {
    const PoolSpan w = pool_span(o, in, kernel, stride, pad);
    s[static_cast<size_t>(o)] = Span{w.lo, w.hi, count_include_pad ? w.padded : w.hi - w.lo};
  }
  return s;
}

// A window always holds an input cell when padding <= kernel / 2 (checked by the layer); the guard keeps a
// degenerate geometry from dividing by zero.
inline double divisor(const Span& r, const Span& c) { return static_cast<double>(std::max(r.counted * c.counted, 1)); }

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
  if (sh.plain_2x2()) {
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
    const auto store = [&](int oy, int ox, std::ptrdiff_t best) {
      yp[static_cast<size_t>(oy) * static_cast<size_t>(ow) + static_cast<size_t>(ox)] =
          best < 0 ? -std::numeric_limits<float>::infinity() : xp[best];
    };
    if (!for_each_window_argmax_finite(sh, xp, store)) for_each_window_argmax(sh, xp, store);
  }
}

void maxpool2d_bwd_data(const Pool2dShape& sh, const float* x, const float* dy, float* dx) {
  const int oh = sh.out_h();
  const int ow = sh.out_w();
  const size_t in_plane = static_cast<size_t>(std::max(sh.h, 0)) * static_cast<size_t>(std::max(sh.w, 0));
  const size_t planes = static_cast<size_t>(std::max(sh.n, 0)) * static_cast<size_t>(std::max(sh.c, 0));
  const size_t out_plane = static_cast<size_t>(std::max(oh, 0)) * static_cast<size_t>(std::max(ow, 0));
  if (sh.plain_2x2() && oh > 0 && ow > 0) {
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
    const auto add = [&](int oy, int ox, std::ptrdiff_t best) {
      if (best >= 0) {
        dxp[best] += dyp[static_cast<size_t>(oy) * static_cast<size_t>(ow) + static_cast<size_t>(ox)];
      }
    };
    if (!for_each_window_argmax_finite(sh, x + p * in_plane, add)) for_each_window_argmax(sh, x + p * in_plane, add);
  }
}

void avgpool2d_fwd(const Pool2dShape& sh, int count_include_pad, const float* x, float* y) {
  const int oh = sh.out_h();
  const int ow = sh.out_w();
  if (oh <= 0 || ow <= 0) {
    return;
  }
  const size_t in_plane = static_cast<size_t>(sh.h) * static_cast<size_t>(sh.w);
  const size_t out_plane = static_cast<size_t>(oh) * static_cast<size_t>(ow);
  const size_t planes = static_cast<size_t>(std::max(sh.n, 0)) * static_cast<size_t>(std::max(sh.c, 0));
  if (sh.plain_2x2()) {
    for (size_t p = 0; p < planes; ++p) {
      for (int i = 0; i < oh; ++i) {
        const float* r0 = x + p * in_plane + static_cast<size_t>(2 * i) * static_cast<size_t>(sh.w);
        const float* r1 = r0 + sh.w;
        float* yr = y + p * out_plane + static_cast<size_t>(i) * static_cast<size_t>(ow);
        for (int j = 0; j < ow; ++j) {
          yr[j] = ((r0[2 * j] + r0[2 * j + 1]) + (r1[2 * j] + r1[2 * j + 1])) * 0.25f;
        }
      }
    }
    return;
  }
  const auto rows = spans(oh, sh.h, sh.kh, sh.stride_h, sh.pad_h, count_include_pad);
  const auto cols = spans(ow, sh.w, sh.kw, sh.stride_w, sh.pad_w, count_include_pad);
  for (size_t p = 0; p < planes; ++p) {
    const float* xp = x + p * in_plane;
    float* yp = y + p * out_plane;
    for (int oy = 0; oy < oh; ++oy) {
      const Span& r = rows[static_cast<size_t>(oy)];
      for (int ox = 0; ox < ow; ++ox) {
        const Span& c = cols[static_cast<size_t>(ox)];
        double acc = 0.0;
        for (int iy = r.lo; iy < r.hi; ++iy) {
          const float* row = xp + static_cast<size_t>(iy) * static_cast<size_t>(sh.w);
          for (int ix = c.lo; ix < c.hi; ++ix) {
            acc += static_cast<double>(row[ix]);
          }
        }
        yp[static_cast<size_t>(oy) * static_cast<size_t>(ow) + static_cast<size_t>(ox)] =
            static_cast<float>(acc / divisor(r, c));
      }
    }
  }
}

void avgpool2d_bwd_data(const Pool2dShape& sh, int count_include_pad, const float* dy, float* dx) {
  const int oh = sh.out_h();
  const int ow = sh.out_w();
  const size_t in_plane = static_cast<size_t>(std::max(sh.h, 0)) * static_cast<size_t>(std::max(sh.w, 0));
  const size_t planes = static_cast<size_t>(std::max(sh.n, 0)) * static_cast<size_t>(std::max(sh.c, 0));
  if (oh <= 0 || ow <= 0) {
    std::fill_n(dx, planes * in_plane, 0.0f);
    return;
  }
  const size_t out_plane = static_cast<size_t>(oh) * static_cast<size_t>(ow);
  if (sh.plain_2x2()) {
    // Disjoint windows: every input cell is written exactly once (odd trailing rows and columns get zeros).
    for (size_t p = 0; p < planes; ++p) {
      float* dxp = dx + p * in_plane;
      for (int i = 0; i < oh; ++i) {
        float* d0 = dxp + static_cast<size_t>(2 * i) * static_cast<size_t>(sh.w);
        float* d1 = d0 + sh.w;
        const float* g = dy + p * out_plane + static_cast<size_t>(i) * static_cast<size_t>(ow);
        for (int j = 0; j < ow; ++j) {
          const float v = g[j] * 0.25f;
          d0[2 * j] = v;
          d0[2 * j + 1] = v;
          d1[2 * j] = v;
          d1[2 * j + 1] = v;
        }
        std::fill(d0 + 2 * ow, d0 + sh.w, 0.0f);
        std::fill(d1 + 2 * ow, d1 + sh.w, 0.0f);
      }
      std::fill(dxp + static_cast<size_t>(2 * oh) * static_cast<size_t>(sh.w), dxp + in_plane, 0.0f);
    }
    return;
  }
  std::fill_n(dx, planes * in_plane, 0.0f);
  const auto rows = spans(oh, sh.h, sh.kh, sh.stride_h, sh.pad_h, count_include_pad);
  const auto cols = spans(ow, sh.w, sh.kw, sh.stride_w, sh.pad_w, count_include_pad);
  for (size_t p = 0; p < planes; ++p) {
    float* dxp = dx + p * in_plane;
    const float* dyp = dy + p * out_plane;
    // Overlapping windows add into shared cells in output order.
    for (int oy = 0; oy < oh; ++oy) {
      const Span& r = rows[static_cast<size_t>(oy)];
      for (int ox = 0; ox < ow; ++ox) {
        const Span& c = cols[static_cast<size_t>(ox)];
        const float g = static_cast<float>(
            static_cast<double>(dyp[static_cast<size_t>(oy) * static_cast<size_t>(ow) + static_cast<size_t>(ox)]) /
            divisor(r, c));
        for (int iy = r.lo; iy < r.hi; ++iy) {
          float* row = dxp + static_cast<size_t>(iy) * static_cast<size_t>(sh.w);
          for (int ix = c.lo; ix < c.hi; ++ix) {
            row[ix] += g;
          }
        }
      }
    }
  }
}

void global_avgpool2d_fwd(int n, int c, std::size_t plane, const float* x, float* y) {
  const size_t planes = static_cast<size_t>(std::max(n, 0)) * static_cast<size_t>(std::max(c, 0));
  const double inv = plane > 0 ? 1.0 / static_cast<double>(plane) : 0.0;
  for (size_t p = 0; p < planes; ++p) {
    y[p] = static_cast<float>(detail::sum_plane(x + p * plane, plane) * inv);
  }
}

void global_avgpool2d_bwd_data(int n, int c, std::size_t plane, const float* dy, float* dx) {
  const size_t planes = static_cast<size_t>(std::max(n, 0)) * static_cast<size_t>(std::max(c, 0));
  for (size_t p = 0; p < planes; ++p) {
    const float g = static_cast<float>(static_cast<double>(dy[p]) / static_cast<double>(plane));
    std::fill_n(dx + p * plane, plane, g);
  }
}

}  // namespace dtnn::kernels::cpu
