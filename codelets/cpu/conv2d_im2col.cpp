// SPDX-License-Identifier: Apache-2.0
#include <blis.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "codelets/cpu/kernels.hpp"

namespace dtnn::kernels::cpu {
namespace {

using std::size_t;

// BLIS 0.9 takes non-const operand pointers even though it never writes A, B, alpha or beta.
void sgemm(dim_t m, dim_t n, dim_t k, const float* a, inc_t rsa, inc_t csa, const float* b, inc_t rsb, inc_t csb,
           float beta, float* c, inc_t rsc) {
  float alpha = 1.0f;
  bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &alpha, const_cast<float*>(a), rsa, csa,
            const_cast<float*>(b), rsb, csb, &beta, c, rsc, 1);
}

// Grown on demand and kept, so steady-state training does no allocation; one per worker thread.
float* scratch(size_t count) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < count) {
    buffer.resize(count);
  }
  return buffer.data();
}

// Per-group sizes derived once from the shape.
struct Geometry {
  int cg, kg, oh, ow;
  size_t crs;    // rows of col: c/groups * r * s
  size_t plane;  // oh * ow
  size_t in_plane;
  bool identity;  // 1x1, stride 1, no padding: col is the input itself, so im2col/col2im can be skipped

  explicit Geometry(const Conv2dShape& sh)
      : cg(sh.c / sh.groups),
        kg(sh.k / sh.groups),
        oh(sh.out_h()),
        ow(sh.out_w()),
        crs(static_cast<size_t>(cg) * static_cast<size_t>(sh.r) * static_cast<size_t>(sh.s)),
        plane(static_cast<size_t>(std::max(oh, 0)) * static_cast<size_t>(std::max(ow, 0))),
        in_plane(static_cast<size_t>(sh.h) * static_cast<size_t>(sh.w)),
        identity(sh.r == 1 && sh.s == 1 && sh.stride_h == 1 && sh.stride_w == 1 && sh.pad_top == 0 &&
                 sh.pad_bottom == 0 && sh.pad_left == 0 && sh.pad_right == 0) {}
  [[nodiscard]] bool empty() const { return oh <= 0 || ow <= 0; }
};

// Half-open range [lo, hi) of output positions whose input coordinate o * stride + offset lies in [0, extent).
struct Range {
  int lo, hi;
};
Range valid_range(int offset, int stride, int extent, int outputs) {
  const int lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int hi = extent - offset <= 0 ? 0 : (extent - offset + stride - 1) / stride;
  const int h = std::min(hi, outputs);
  return {std::min(lo, h), h};
}

// Visits every (col row, input channel plane, kernel offsets) of one group; shared by im2col and col2im so that
// both walk exactly the same geometry.
template <typename RowFn>
void for_each_col_row(const Conv2dShape& sh, int group, RowFn&& fn) {
  const int cg = sh.c / sh.groups;
  size_t row = 0;
  for (int ci = 0; ci < cg; ++ci) {
    const size_t channel = static_cast<size_t>(group) * static_cast<size_t>(cg) + static_cast<size_t>(ci);
    for (int kr = 0; kr < sh.r; ++kr) {
      for (int ks = 0; ks < sh.s; ++ks, ++row) {
        fn(row, channel, kr * sh.dil_h - sh.pad_top, ks * sh.dil_w - sh.pad_left);
      }
    }
  }
}

}  // namespace

void im2col(const Conv2dShape& sh, const float* x_sample, int group, float* col) {
  const int oh = sh.out_h();
  const int ow = sh.out_w();
  if (oh <= 0 || ow <= 0) {
    return;
  }
  const size_t plane = static_cast<size_t>(oh) * static_cast<size_t>(ow);
  const size_t in_plane = static_cast<size_t>(sh.h) * static_cast<size_t>(sh.w);
  const int sw = sh.stride_w;
  for_each_col_row(sh, group, [&](size_t row, size_t channel, int off_y, int off_x) {
    const float* src = x_sample + channel * in_plane;
    float* dst = col + row * plane;
    const Range ry = valid_range(off_y, sh.stride_h, sh.h, oh);
    const Range rx = valid_range(off_x, sw, sh.w, ow);
    std::fill(dst, dst + static_cast<size_t>(ry.lo) * static_cast<size_t>(ow), 0.0f);
    for (int oy = ry.lo; oy < ry.hi; ++oy) {
      float* out = dst + static_cast<size_t>(oy) * static_cast<size_t>(ow);
      const float* in = src + static_cast<size_t>(oy * sh.stride_h + off_y) * static_cast<size_t>(sh.w);
      std::fill(out, out + rx.lo, 0.0f);
      if (sw == 1) {
        std::copy(in + rx.lo + off_x, in + rx.hi + off_x, out + rx.lo);
      } else {
        for (int ox = rx.lo; ox < rx.hi; ++ox) {
          out[ox] = in[ox * sw + off_x];
        }
      }
      std::fill(out + rx.hi, out + ow, 0.0f);
    }
    std::fill(dst + static_cast<size_t>(ry.hi) * static_cast<size_t>(ow), dst + plane, 0.0f);
  });
}

void col2im_add(const Conv2dShape& sh, const float* col, int group, float* dx_sample) {
  const int oh = sh.out_h();
  const int ow = sh.out_w();
  if (oh <= 0 || ow <= 0) {
    return;
  }
  const size_t plane = static_cast<size_t>(oh) * static_cast<size_t>(ow);
  const size_t in_plane = static_cast<size_t>(sh.h) * static_cast<size_t>(sh.w);
  const int sw = sh.stride_w;
  for_each_col_row(sh, group, [&](size_t row, size_t channel, int off_y, int off_x) {
    float* dst = dx_sample + channel * in_plane;
    const float* src = col + row * plane;
    const Range ry = valid_range(off_y, sh.stride_h, sh.h, oh);
    const Range rx = valid_range(off_x, sw, sh.w, ow);
    for (int oy = ry.lo; oy < ry.hi; ++oy) {
      const float* in = src + static_cast<size_t>(oy) * static_cast<size_t>(ow);
      float* out = dst + static_cast<size_t>(oy * sh.stride_h + off_y) * static_cast<size_t>(sh.w);
      for (int ox = rx.lo; ox < rx.hi; ++ox) {
        out[ox * sw + off_x] += in[ox];
      }
    }
  });
}

void conv2d_fwd_im2col(const Conv2dShape& sh, const float* x, const float* w, const float* b, float* y) {
  const Geometry g(sh);
  if (g.empty() || sh.n <= 0 || sh.k <= 0) {
    return;
  }
  float* col = g.identity ? nullptr : scratch(g.crs * g.plane);
  const size_t w_group = static_cast<size_t>(g.kg) * g.crs;
  for (int i = 0; i < sh.n; ++i) {
    const float* xs = x + static_cast<size_t>(i) * static_cast<size_t>(sh.c) * g.in_plane;
    float* ys = y + static_cast<size_t>(i) * static_cast<size_t>(sh.k) * g.plane;
    float beta = 0.0f;
    // Seeding y with the bias lets the GEMM add the product in place instead of a second pass over y.
    if (b != nullptr) {
      for (int kk = 0; kk < sh.k; ++kk) {
        std::fill_n(ys + static_cast<size_t>(kk) * g.plane, g.plane, b[kk]);
      }
      beta = 1.0f;
    }
    for (int grp = 0; grp < sh.groups; ++grp) {
      float* yg = ys + static_cast<size_t>(grp) * static_cast<size_t>(g.kg) * g.plane;
      if (g.crs == 0) {
        if (b == nullptr) {
          std::fill_n(yg, static_cast<size_t>(g.kg) * g.plane, 0.0f);
        }
        continue;
      }
      const float* cols = xs + static_cast<size_t>(grp) * static_cast<size_t>(g.cg) * g.in_plane;
      if (!g.identity) {
        im2col(sh, xs, grp, col);
        cols = col;
      }
      sgemm(g.kg, static_cast<dim_t>(g.plane), static_cast<dim_t>(g.crs), w + static_cast<size_t>(grp) * w_group,
            static_cast<inc_t>(g.crs), 1, cols, static_cast<inc_t>(g.plane), 1, beta, yg, static_cast<inc_t>(g.plane));
    }
  }
}

void conv2d_bwd_data_im2col(const Conv2dShape& sh, const float* dy, const float* w, float* dx) {
  const Geometry g(sh);
  if (sh.n <= 0) {
    return;
  }
  const size_t x_sample = static_cast<size_t>(sh.c) * g.in_plane;
  // Identity geometry writes every dx element through the GEMM (beta = 0); otherwise col2im adds into dx, and
  // input cells no window touches (possible with stride > kernel extent) must end up zero too.
  if (!g.identity || g.empty() || g.kg == 0) {
    std::fill_n(dx, static_cast<size_t>(sh.n) * x_sample, 0.0f);
  }
  if (g.empty() || g.kg == 0 || g.crs == 0) {
    return;
  }
  float* col = g.identity ? nullptr : scratch(g.crs * g.plane);
  const size_t w_group = static_cast<size_t>(g.kg) * g.crs;
  for (int i = 0; i < sh.n; ++i) {
    const float* dys = dy + static_cast<size_t>(i) * static_cast<size_t>(sh.k) * g.plane;
    float* dxs = dx + static_cast<size_t>(i) * x_sample;
    for (int grp = 0; grp < sh.groups; ++grp) {
      const float* dyg = dys + static_cast<size_t>(grp) * static_cast<size_t>(g.kg) * g.plane;
      // W_g^T through swapped strides: element (row, kk) of W_g^T is W_g[kk * crs + row].
      const float* wg = w + static_cast<size_t>(grp) * w_group;
      float* target = g.identity ? dxs + static_cast<size_t>(grp) * static_cast<size_t>(g.cg) * g.in_plane : col;
      sgemm(static_cast<dim_t>(g.crs), static_cast<dim_t>(g.plane), g.kg, wg, 1, static_cast<inc_t>(g.crs), dyg,
            static_cast<inc_t>(g.plane), 1, 0.0f, target, static_cast<inc_t>(g.plane));
      if (!g.identity) {
        col2im_add(sh, col, grp, dxs);
      }
    }
  }
}

void conv2d_bwd_weights_im2col(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db) {
  const Geometry g(sh);
  const size_t w_group = static_cast<size_t>(std::max(g.kg, 0)) * g.crs;
  if (db != nullptr) {
    bias_bwd_weights(std::max(sh.n, 0), sh.k, g.plane, dy, db);
  }
  if (w_group == 0) {
    return;
  }
  if (sh.n <= 0 || g.empty()) {
    std::fill_n(dw, static_cast<size_t>(sh.groups) * w_group, 0.0f);
    return;
  }
  float* col = g.identity ? nullptr : scratch(g.crs * g.plane);
  // Samples in increasing order, the first overwriting (beta = 0) and the rest accumulating: a fixed order of
  // floating-point additions, so dw is bitwise reproducible.
  for (int i = 0; i < sh.n; ++i) {
    const float* xs = x + static_cast<size_t>(i) * static_cast<size_t>(sh.c) * g.in_plane;
    const float* dys = dy + static_cast<size_t>(i) * static_cast<size_t>(sh.k) * g.plane;
    const float beta = i == 0 ? 0.0f : 1.0f;
    for (int grp = 0; grp < sh.groups; ++grp) {
      const float* cols = xs + static_cast<size_t>(grp) * static_cast<size_t>(g.cg) * g.in_plane;
      if (!g.identity) {
        im2col(sh, xs, grp, col);
        cols = col;
      }
      // col^T through swapped strides: element (p, row) of col^T is col[row * plane + p].
      sgemm(g.kg, static_cast<dim_t>(g.crs), static_cast<dim_t>(g.plane),
            dys + static_cast<size_t>(grp) * static_cast<size_t>(g.kg) * g.plane, static_cast<inc_t>(g.plane), 1,
            cols, 1, static_cast<inc_t>(g.plane), beta, dw + static_cast<size_t>(grp) * w_group,
            static_cast<inc_t>(g.crs));
    }
  }
}

}  // namespace dtnn::kernels::cpu
