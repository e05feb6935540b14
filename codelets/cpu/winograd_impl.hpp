// SPDX-License-Identifier: Apache-2.0
// The Winograd F(2x2, 3x3) convolution of winograd.hpp, written once over a vector type V (GCC vector extension)
// and compiled per instruction set by winograd_avx512.cpp and winograd_avx2.cpp, each with its flags and its
// micro-kernel. Everything here has internal linkage, so the two compilations never meet at link time.
//
// One call: `in` [n, c, h, w] convolved by 3x3 kernels into `out` [n, k, oh, ow], stride 1, paddings given. The
// output's 2x2 tiles are numbered sample by sample, row by row, and taken in chunks of whole MR panels. For each
// chunk: the 4x4 input patch of every tile is gathered into lanes (MR tiles side by side, per input channel) and
// transformed with whole vectors into the micro-kernel's A panels; then, per block of output channels, the 16 GEMMs
// (one per transformed position, reducing over the input channels against the transformed weights, packed as B
// panels: once per call where one block holds them all, winograd_plan) write the products panel by panel, and the
// output transform reads them back with whole vectors and scatters the 2x2 results.
#pragma once

#include <blis.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "codelets/cpu/aligned_floats.hpp"
#include "codelets/cpu/winograd_call.hpp"

namespace dtnn::kernels::cpu {
namespace {

using std::size_t;

constexpr int kPositions = 16;

template <typename V>
V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename V>
void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

struct Geom : WinogradPlan {
  int n, c, h, w, k, pad_top, pad_left, mr, nr;
};

Geom geom(const WinogradCall& call, int mr, int nr) {
  Geom g{};
  static_cast<WinogradPlan&>(g) = winograd_plan(call, mr, nr);
  g.n = call.n;
  g.c = call.c;
  g.h = call.h;
  g.w = call.w;
  g.k = call.k;
  g.pad_top = call.pad_top;
  g.pad_left = call.pad_left;
  g.mr = mr;
  g.nr = nr;
  return g;
}

struct Workspace {
  AlignedFloats weights, input, products, lanes;
};

Workspace& workspace() {
  thread_local Workspace ws;
  return ws;
}

// The transformed weights of output channels [k0, k0 + kw) as B panels: position-major (kb c floats each), then NR
// panels of output channels, then input channels, NR output channels contiguous; channels past k are zero. U = G g
// G^T of each 3x3 kernel g, G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1], computed with vectors VB of NR floats:
// the NR output channels of a panel side by side, so that each of the 16 positions receives one whole vector per
// input channel. (Scalar, with the branches inside, this took ~40 ns per kernel: a third of a 512->512 @4 call.)
template <typename VB>
void transform_weights(const WinogradCall& call, const Geom& g, size_t k0, size_t kw, float* u) {
  constexpr int kNr = sizeof(VB) / sizeof(float);
  const size_t per_position = g.kb * static_cast<size_t>(g.c);
  const auto c = static_cast<size_t>(g.c);
  const auto k = static_cast<size_t>(g.k);
  const float* w = call.w_data;
  alignas(64) float kern[9][kNr];
  for (size_t panel = 0; panel < kw; panel += kNr) {
    const size_t first = k0 + panel;
    const int live = static_cast<int>(std::min(static_cast<size_t>(kNr), k > first ? k - first : 0));
    if (live < kNr) {
      std::fill(&kern[0][0], &kern[0][0] + 9 * kNr, 0.0f);
    }
    for (size_t cc = 0; cc < c; ++cc) {
      if (call.weights == WinogradWeights::kForward) {
        for (int l = 0; l < live; ++l) {
          const float* src = w + ((first + static_cast<size_t>(l)) * c + cc) * 9;
          for (int i = 0; i < 9; ++i) kern[i][l] = src[i];
        }
      } else {
        // The dual of backward-data: output channel kk is the forward's input channel, input channel cc the
        // forward's output channel (w is the forward's [k, c, 3, 3], read at [cc, kk]), the kernel flipped in both
        // axes.
        for (int l = 0; l < live; ++l) {
          const float* src = w + (cc * k + first + static_cast<size_t>(l)) * 9;
          for (int i = 0; i < 9; ++i) kern[i][l] = src[8 - i];
        }
      }
      // t = G g: rows 0..3 of each of the 3 columns.
      VB t[12];
      for (int j = 0; j < 3; ++j) {
        const VB g0 = load<VB>(kern[j]), g1 = load<VB>(kern[3 + j]), g2 = load<VB>(kern[6 + j]);
        t[j] = g0;
        t[3 + j] = 0.5f * (g0 + g1 + g2);
        t[6 + j] = 0.5f * (g0 - g1 + g2);
        t[9 + j] = g2;
      }
      float* dst = u + panel * c + cc * static_cast<size_t>(kNr);
      for (int i = 0; i < 4; ++i) {
        float* row = dst + static_cast<size_t>(4 * i) * per_position;
        const VB t0 = t[3 * i], t1 = t[3 * i + 1], t2 = t[3 * i + 2];
        store(row, t0);
        store(row + per_position, 0.5f * (t0 + t1 + t2));
        store(row + 2 * per_position, 0.5f * (t0 - t1 + t2));
        store(row + 3 * per_position, t2);
      }
    }
  }
}

// Tiles [first, first + count) of the call, at lanes [lane, lane + count) of an MR panel: consecutive tiles of row
// ty of sample img from column tx0.
struct Segment {
  size_t first;
  int img, ty, tx0, count, lane;
};

// The segments of the panel that starts at tile t0 (tiles past the call's last belong to none).
void panel_segments(const Geom& g, size_t t0, std::vector<Segment>& out) {
  out.clear();
  const size_t t1 = std::min(g.tiles, t0 + static_cast<size_t>(g.mr));
  const auto tw = static_cast<size_t>(g.tw);
  for (size_t t = t0; t < t1;) {
    const size_t row = t / tw;
    const auto tx = static_cast<int>(t % tw);
    const auto count = static_cast<int>(std::min(t1 - t, tw - static_cast<size_t>(tx)));
    out.push_back({t, static_cast<int>(row / static_cast<size_t>(g.th)), static_cast<int>(row % static_cast<size_t>(g.th)),
                   tx, count, static_cast<int>(t - t0)});
    t += static_cast<size_t>(count);
  }
}

// d[4 i + j][lane]: input row 2 ty - pad_top + i, column 2 tx - pad_left + j of each tile of the segments, zero
// outside the input. Columns inside the input take a loop without conditions.
void gather_patches(const Geom& g, const float* plane_of_channel, const std::vector<Segment>& segs, int mr,
                    float* d) {
  const auto w = static_cast<size_t>(g.w);
  const size_t in_plane = static_cast<size_t>(g.h) * w;
  for (const Segment& s : segs) {
    const float* src = plane_of_channel + static_cast<size_t>(s.img) * static_cast<size_t>(g.c) * in_plane;
    const int col0 = 2 * s.tx0 - g.pad_left;
    // Tiles x in [lo, hi) have all four columns inside the input.
    const int lo = std::clamp((g.pad_left - 2 * s.tx0 + 1) / 2, 0, s.count);
    const int last = g.w - 4 - col0;  // the last tile inside has 2 x <= last
    const int hi = std::clamp(last < 0 ? 0 : last / 2 + 1, lo, s.count);
    for (int i = 0; i < 4; ++i) {
      const int y = 2 * s.ty - g.pad_top + i;
      float* row[4];
      for (int j = 0; j < 4; ++j) {
        row[j] = d + static_cast<size_t>(4 * i + j) * static_cast<size_t>(mr) + s.lane;
      }
      if (y < 0 || y >= g.h) {
        for (int j = 0; j < 4; ++j) {
          std::fill_n(row[j], s.count, 0.0f);
        }
        continue;
      }
      const float* line = src + static_cast<size_t>(y) * w;
      const auto edge = [&](int x) {
        for (int j = 0; j < 4; ++j) {
          const int col = col0 + 2 * x + j;
          row[j][x] = col >= 0 && col < g.w ? line[col] : 0.0f;
        }
      };
      for (int x = 0; x < lo; ++x) edge(x);
      const float* base = line + col0;
      float* __restrict r0 = row[0];
      float* __restrict r1 = row[1];
      float* __restrict r2 = row[2];
      float* __restrict r3 = row[3];
      for (int x = lo; x < hi; ++x) {
        r0[x] = base[2 * x];
        r1[x] = base[2 * x + 1];
        r2[x] = base[2 * x + 2];
        r3[x] = base[2 * x + 3];
      }
      for (int x = hi; x < s.count; ++x) edge(x);
    }
  }
}

// V = B^T d B, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], on whole vectors of lanes; v[p * stride + lane].
template <typename V>
void transform_patches(const float* d, int mr, float* v, size_t stride) {
  constexpr int kW = sizeof(V) / sizeof(float);
  const auto m = static_cast<size_t>(mr);
  for (int l = 0; l < mr; l += kW) {
    V q[16];
    for (int p = 0; p < 16; ++p) {
      q[p] = load<V>(d + static_cast<size_t>(p) * m + static_cast<size_t>(l));
    }
    // Rows of B^T d.
    V t[16];
    for (int j = 0; j < 4; ++j) {
      t[j] = q[j] - q[8 + j];
      t[4 + j] = q[4 + j] + q[8 + j];
      t[8 + j] = q[8 + j] - q[4 + j];
      t[12 + j] = q[4 + j] - q[12 + j];
    }
    float* o = v + l;
    for (int i = 0; i < 4; ++i) {
      const V* r = t + 4 * i;
      store(o + static_cast<size_t>(4 * i + 0) * stride, r[0] - r[2]);
      store(o + static_cast<size_t>(4 * i + 1) * stride, r[1] + r[2]);
      store(o + static_cast<size_t>(4 * i + 2) * stride, r[2] - r[1]);
      store(o + static_cast<size_t>(4 * i + 3) * stride, r[1] - r[3]);
    }
  }
}

// The chunk's A panels: position-major, then MR panels of tiles, then input channels, MR tiles contiguous.
template <typename V>
void transform_input(const Geom& g, const float* in, size_t t0, float* v, std::vector<Segment>& segs) {
  const auto mr = static_cast<size_t>(g.mr);
  const auto c = static_cast<size_t>(g.c);
  const size_t per_position = g.chunk * c;
  const size_t in_plane = static_cast<size_t>(g.h) * static_cast<size_t>(g.w);
  float* d = workspace().lanes.reserve(kPositions * mr);
  for (size_t panel = 0; panel < g.chunk; panel += mr) {
    panel_segments(g, t0 + panel, segs);
    const int filled = segs.empty() ? 0 : segs.back().lane + segs.back().count;
    if (filled < g.mr) {
      for (int p = 0; p < kPositions; ++p) {
        std::fill(d + static_cast<size_t>(p) * mr + filled, d + static_cast<size_t>(p + 1) * mr, 0.0f);
      }
    }
    for (size_t cc = 0; cc < c; ++cc) {
      gather_patches(g, in + cc * in_plane, segs, g.mr, d);
      transform_patches<V>(d, g.mr, v + panel * c + cc * mr, per_position);
    }
  }
}

// The 16 products of the chunk with the block of kw output channels: m[position][panel][kk][lane] (kb output
// channels per panel) = sum over the input channels, in order, of V U.
void multiply(const Geom& g, sgemm_ukr_ft ukr, const float* u, size_t kw, float* v, float* m) {
  const auto c = static_cast<size_t>(g.c);
  const auto mr = static_cast<size_t>(g.mr);
  const auto nr = static_cast<size_t>(g.nr);
  auxinfo_t aux{};
  float one = 1.0f;
  float zero = 0.0f;
  for (int p = 0; p < kPositions; ++p) {
    float* vp = v + static_cast<size_t>(p) * g.chunk * c;
    const float* up = u + static_cast<size_t>(p) * g.kb * c;
    float* mp = m + static_cast<size_t>(p) * g.kb * g.chunk;
    for (size_t j = 0; j < kw; j += nr) {
      auto* b = const_cast<float*>(up + j * c);
      for (size_t i = 0; i < g.chunk; i += mr) {
        float* a = vp + i * c;
        const bool last_i = i + mr >= g.chunk;
        bli_auxinfo_set_next_a(last_i ? vp : a + mr * c, &aux);
        bli_auxinfo_set_next_b(last_i && j + nr < kw ? b + nr * c : b, &aux);
        ukr(static_cast<dim_t>(mr), static_cast<dim_t>(nr), static_cast<dim_t>(c), &one, a, b, &zero,
            mp + i * g.kb + j * mr, 1, static_cast<inc_t>(mr), &aux, nullptr);
      }
    }
  }
}

// y tile = A^T M A, A^T = [1 1 1 0; 0 1 -1 -1], plus the bias, then ReLU when asked, on whole vectors of lanes;
// then each segment's 2x2 results go to their places (parts of a tile past an odd output extent are dropped).
template <typename V>
void transform_output(const Geom& g, const float* m, size_t t0, int k0, int k1, const float* bias, int relu,
                      float* out, std::vector<Segment>& segs) {
  constexpr int kW = sizeof(V) / sizeof(float);
  const auto mr = static_cast<size_t>(g.mr);
  const size_t per_position = g.kb * g.chunk;
  const size_t plane = static_cast<size_t>(g.oh) * static_cast<size_t>(g.ow);
  const auto ow = static_cast<size_t>(g.ow);
  float* q = workspace().lanes.reserve(kPositions * mr);
  float* __restrict q00 = q;
  float* __restrict q01 = q + mr;
  float* __restrict q10 = q + 2 * mr;
  float* __restrict q11 = q + 3 * mr;
  const V zero{};
  for (size_t panel = 0; panel < g.chunk && t0 + panel < g.tiles; panel += mr) {
    panel_segments(g, t0 + panel, segs);
    for (int kk = k0; kk < k1; ++kk) {
      const float* s = m + panel * g.kb + static_cast<size_t>(kk - k0) * mr;
      V b{};
      b += bias != nullptr ? bias[kk] : 0.0f;
      for (int l = 0; l < g.mr; l += kW) {
        V r[16];
        for (int p = 0; p < 16; ++p) {
          r[p] = load<V>(s + static_cast<size_t>(p) * per_position + static_cast<size_t>(l));
        }
        V u[4], w[4];
        for (int j = 0; j < 4; ++j) {
          u[j] = r[j] + r[4 + j] + r[8 + j];
          w[j] = r[4 + j] - r[8 + j] - r[12 + j];
        }
        V a = u[0] + u[1] + u[2] + b;
        V c = u[1] - u[2] - u[3] + b;
        V d = w[0] + w[1] + w[2] + b;
        V e = w[1] - w[2] - w[3] + b;
        if (relu != 0) {
          a = a < zero ? zero : a;
          c = c < zero ? zero : c;
          d = d < zero ? zero : d;
          e = e < zero ? zero : e;
        }
        store(q00 + l, a);
        store(q01 + l, c);
        store(q10 + l, d);
        store(q11 + l, e);
      }
      for (const Segment& sg : segs) {
        const int y0 = 2 * sg.ty;
        float* __restrict dst0 = out + (static_cast<size_t>(sg.img) * static_cast<size_t>(g.k) + static_cast<size_t>(kk)) * plane +
                                 static_cast<size_t>(y0) * ow + 2 * static_cast<size_t>(sg.tx0);
        // A tile of one column ends the segment where the output width is odd.
        const int full = 2 * (sg.tx0 + sg.count) > g.ow ? sg.count - 1 : sg.count;
        // One output row: the left and right results of each tile, interleaved.
        const auto put_row = [&](float* __restrict dst, const float* left, const float* right) {
          for (int x = 0; x < full; ++x) {
            dst[2 * x] = left[x];
            dst[2 * x + 1] = right[x];
          }
          if (full < sg.count) dst[2 * full] = left[full];
        };
        put_row(dst0, q00 + sg.lane, q01 + sg.lane);
        if (y0 + 1 < g.oh) {
          put_row(dst0 + ow, q10 + sg.lane, q11 + sg.lane);
        }
      }
    }
  }
}

// The whole call with vector types V (tiles' lanes) and VB (NR floats) and micro-kernel ukr (MR x NR, storing C
// with unit stride along MR).
template <typename V, typename VB>
void winograd_convolve(const WinogradCall& call, sgemm_ukr_ft ukr, int mr) {
  constexpr int nr = sizeof(VB) / sizeof(float);
  const Geom g = geom(call, mr, nr);
  if (g.tiles == 0 || g.k <= 0) {
    return;
  }
  Workspace& ws = workspace();
  const auto c = static_cast<size_t>(g.c);
  float* u = ws.weights.reserve(kPositions * g.kb * c);
  float* v = ws.input.reserve(kPositions * g.chunk * c);
  float* m = ws.products.reserve(kPositions * g.chunk * g.kb);
  thread_local std::vector<Segment> segs;
  const bool blocked = g.kb < g.kp;
  for (size_t t0 = 0; t0 < g.tiles; t0 += g.chunk) {
    transform_input<V>(g, call.in, t0, v, segs);
    for (size_t k0 = 0; k0 < g.kp; k0 += g.kb) {
      const size_t kw = std::min(g.kb, g.kp - k0);
      if (blocked || t0 == 0) {
        transform_weights<VB>(call, g, k0, kw, u);
      }
      multiply(g, ukr, u, kw, v, m);
      transform_output<V>(g, m, t0, static_cast<int>(k0), static_cast<int>(std::min(k0 + kw, static_cast<size_t>(g.k))),
                          call.bias, call.relu, call.out, segs);
    }
  }
}

}  // namespace
}  // namespace dtnn::kernels::cpu
