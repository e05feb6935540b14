// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstddef>
#include <vector>

#include "codelets/cpu/nn_kernels.hpp"
#include "codelets/cpu/plane_sums.hpp"

namespace dtnn::kernels::cpu {
namespace {

using std::size_t;

// The cells of every window along one axis, computed once per call: windows are rectangles, so a window's input
// cells and its divisor are products of a row span and a column span.
struct Span {
  int lo, hi;   // the cells inside the input
  int counted;  // cells in the divisor: PyTorch clips to the padded input with count_include_pad, else to the input
};

std::vector<Span> spans(int out, int in, int kernel, int stride, int pad, int count_include_pad) {
  std::vector<Span> s(static_cast<size_t>(std::max(out, 0)));
  for (int o = 0; o < out; ++o) {
    const int start = o * stride - pad;
    const int end = std::min(start + kernel, in + pad);
    const int lo = std::max(start, 0);
    const int hi = std::min(end, in);
    s[static_cast<size_t>(o)] = Span{lo, hi, count_include_pad ? end - start : hi - lo};
  }
  return s;
}

// A window always holds an input cell when padding <= kernel / 2 (checked by the layer); the guard keeps a
// degenerate geometry from dividing by zero.
inline double divisor(const Span& r, const Span& c) { return static_cast<double>(std::max(r.counted * c.counted, 1)); }

// 2x2 windows with stride 2 and no padding (DenseNet's transitions, most downsampling) skip the span tables.
bool is_plain_2x2(const Pool2dShape& sh) {
  return sh.kh == 2 && sh.kw == 2 && sh.stride_h == 2 && sh.stride_w == 2 && sh.pad_h == 0 && sh.pad_w == 0;
}

}  // namespace

void avgpool2d_fwd(const Pool2dShape& sh, int count_include_pad, const float* x, float* y) {
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
  if (is_plain_2x2(sh)) {
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
