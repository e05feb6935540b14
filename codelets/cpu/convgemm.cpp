// SPDX-License-Identifier: Apache-2.0
// convgemm and deconvgemm: see convgemm.hpp. The GEMM driver is BLIS's five loops (NC, KC, MC, then the NR and MR
// micro-tiles) around BLIS's own sgemm micro-kernel; only the packing routines and the micro-tile epilogues know
// about convolution.
#include "codelets/cpu/convgemm.hpp"

#include <blis.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "codelets/cpu/aligned_floats.hpp"
#include "codelets/cpu/bf16.hpp"
#include "codelets/cpu/convgemm_ukernels.hpp"
#include "core/cpu_features.hpp"
#include "core/errors.hpp"

namespace dtnn::kernels::cpu {
namespace {

using std::size_t;

// ---- Micro-kernels and their blocking ----

struct MicroKernel {
  const char* name = "";
  sgemm_ukr_ft ukr = nullptr;
  cntx_t* cntx = nullptr;
  GemmBlocking blocking{};
  // Micro-kernels store C fastest with unit stride along the dimension they prefer (rows of the MR side for
  // skx's 32x12 and our own kernels, columns of the NR side for haswell's 6x16); other layouts go through a
  // temporary inside the kernel. Each pass puts the index that is contiguous in its output on the preferred side.
  bool contiguous_on_mr = false;
};

// BLIS's, queried once: BLIS fixes its configuration (BLIS_ARCH_TYPE) at its first use anyway.
const MicroKernel& blis_kernel() {
  static const MicroKernel mk = [] {
    MicroKernel k;
    k.name = "blis";
    k.cntx = bli_gks_query_cntx();
    k.ukr = reinterpret_cast<sgemm_ukr_ft>(bli_cntx_get_l3_nat_ukr_dt(BLIS_FLOAT, BLIS_GEMM_UKR, k.cntx));
    const auto block = [&](bszid_t id) { return static_cast<int>(bli_cntx_get_blksz_def_dt(BLIS_FLOAT, id, k.cntx)); };
    k.blocking = {block(BLIS_MR), block(BLIS_NR), block(BLIS_KC), block(BLIS_MC), block(BLIS_NC)};
    k.contiguous_on_mr = !bli_cntx_l3_nat_ukr_prefers_rows_dt(BLIS_FLOAT, BLIS_GEMM_UKR, k.cntx);
    return k;
  }();
  return mk;
}

struct OwnKernel {
  MicroKernel mk;
  CpuIsa isa;
};

// convgemm's own kernels (convgemm_ukernels.hpp), with cache blocks of the BLIS configuration for the same
// instruction set (skx: KC 384, MC 480, NC 3072; zen3: KC 256, MC 144, NC 4080), MC and NC rounded to the
// register block.
const std::vector<OwnKernel>& own_kernels() {
  static const std::vector<OwnKernel> kernels = [] {
    std::vector<OwnKernel> k;
#if defined(__x86_64__)
    const auto own = [](const char* name, sgemm_ukr_ft ukr, int mr, int nr, CpuIsa isa) {
      const bool wide = isa == CpuIsa::kAvx512;
      const int kc = wide ? 384 : 256;
      const int mc = (wide ? 480 : 144) / mr * mr;
      const int nc = (wide ? 3072 : 4080) / nr * nr;
      return OwnKernel{{name, ukr, nullptr, {mr, nr, kc, mc, nc}, true}, isa};
    };
    k.push_back(own("avx512_32x8", sgemm_ukr_avx512_32x8, 32, 8, CpuIsa::kAvx512));
    k.push_back(own("avx512_48x8", sgemm_ukr_avx512_48x8, 48, 8, CpuIsa::kAvx512));
    k.push_back(own("avx2_24x4", sgemm_ukr_avx2_24x4, 24, 4, CpuIsa::kAvx2));
#endif
    return k;
  }();
  return kernels;
}

// The CPU's level capped by DTNN_MAX_CPU_ISA (core/cpu_features.hpp).
bool cpu_runs(CpuIsa isa) { return cpu_isa_setting().effective >= isa; }

const MicroKernel* find_kernel(std::string_view name) {
  if (name == "blis") {
    return &blis_kernel();
  }
  for (const OwnKernel& k : own_kernels()) {
    if (name == k.mk.name && cpu_runs(k.isa)) {
      return &k.mk;
    }
  }
  return nullptr;
}

// A micro-kernel every call uses (convgemm_force_ukernel, DTNN_CONVGEMM_UKERNEL); null: the selection.
std::atomic<const MicroKernel*>& forced_kernel() {
  static std::atomic<const MicroKernel*> forced = [] {
    const char* env = std::getenv("DTNN_CONVGEMM_UKERNEL");
    const MicroKernel* k = nullptr;
    if (env != nullptr && *env != '\0' && std::string_view(env) != "auto") {
      k = find_kernel(env);
      if (k == nullptr) {
        // Not an exception: this runs inside kernels, possibly on a worker thread; an unknown name is reported
        // once and ignored.
        std::fprintf(stderr,
                     "dtnn: DTNN_CONVGEMM_UKERNEL=%s: not a micro-kernel this CPU runs at level %s (DTNN_MAX_CPU_ISA "
                     "caps it); using the selection\n",
                     env, cpu_isa_name(cpu_isa_setting().effective));
      }
    }
    return k;
  }();
  return forced;
}

struct Blocking {
  dim_t mr, nr, kc, mc, nc;
};

Blocking default_blocking(const MicroKernel& mk) {
  const GemmBlocking& b = mk.blocking;
  return {b.mr, b.nr, b.kc, b.mc, b.nc};
}

// Backward-data keeps the whole reduction in one KC block, so that a micro-tile is final when its epilogue
// scatters it into dx and every dx element receives its contributions in one fixed order. MC and NC shrink so
// that the packed blocks keep the cache footprint BLIS chose for MC x KC and KC x NC.
Blocking whole_reduction_blocking(Blocking b, dim_t k) {
  if (k > b.kc) {
    b.mc = std::max(b.mr, b.mc * b.kc / k / b.mr * b.mr);
    b.nc = std::max(b.nr, b.nc * b.kc / k / b.nr * b.nr);
  }
  b.kc = std::max<dim_t>(k, 1);
  return b;
}
Blocking whole_reduction_blocking(const MicroKernel& mk, dim_t k) {
  return whole_reduction_blocking(default_blocking(mk), k);
}

// ---- Thread-local working memory ----

struct Workspace {
  AlignedFloats a, b, tile;
};

Workspace& workspace() {
  thread_local Workspace ws;
  return ws;
}

// ---- The five-loop GEMM driver ----
//
// The driver computes C(u, v) = sum over k of U(u, k) V(v, k) in the coordinates of the caller: u indexes the
// free dimension that is contiguous in the caller's output, v the other. It puts u on the side of the micro-kernel
// (MR or NR) along which the kernel stores C with unit stride, and loops as BLIS does: NC, KC (packing a block of
// the NR-side operand), MC (packing a block of the MR-side operand), then NR and MR micro-tiles.
//
// A packer fills micro-panels: pack(f0, fb, p0, pb, out) writes free indices [f0, f0 + fb) over the reduction
// range [p0, p0 + pb) as ceil(fb / out.width) micro-panels, element (f, p) of the block at out.column(f)[p *
// out.width]; free indices past fb in the last panel are zero.

// Where a packer writes: micro-panels of `width` free indices, `stride` floats apart.
struct Panels {
  float* base;
  int width;
  dim_t stride;
  [[nodiscard]] float* column(dim_t f) const { return base + f / width * stride + f % width; }
};

// One micro-tile, handed to the epilogue once per KC block.
struct MicroTile {
  dim_t u0, v0;      // first u and v of the tile
  dim_t mu, mv;      // extents, below the panel widths at the edges
  bool first, last;  // the tile's first / last KC block of the reduction
  float* buffer;     // a tile-sized scratch, element (u, v) at [u + v * buffer_ld]
  inc_t buffer_ld;

  // c(u, v) = beta * c(u, v) + this KC block's product, element (u, v) at c[u + v * ldc]. A beta of 0 never
  // reads c.
  void compute(float* c, inc_t ldc, float beta) const {
    if (bf16_ukr != nullptr) {
      bf16_ukr(mu, mv, kb, reinterpret_cast<const std::uint32_t*>(a), reinterpret_cast<const std::uint32_t*>(b), beta,
               c, ldc);
      return;
    }
    float one = 1.0f;
    if (mk->contiguous_on_mr) {
      mk->ukr(mu, mv, kb, &one, a, b, &beta, c, 1, ldc, aux, mk->cntx);
    } else {
      mk->ukr(mv, mu, kb, &one, a, b, &beta, c, ldc, 1, aux, mk->cntx);
    }
  }

  // Set by the driver for compute(). The bf16 driver sets bf16_ukr; then a and b point to pair words, kb counts
  // pairs, and u lies on the MR side.
  const MicroKernel* mk;
  dim_t kb;
  float* a;
  float* b;
  auxinfo_t* aux;
  bf16gemm_ukr_ft bf16_ukr;
};

template <typename PackU, typename PackV, typename Epilogue>
void gemm(const MicroKernel& mk, const Blocking& bs, dim_t nu, dim_t nv, dim_t k, PackU&& pack_u, PackV&& pack_v,
          Epilogue&& epilogue) {
  const bool u_is_m = mk.contiguous_on_mr;
  const dim_t m = u_is_m ? nu : nv;
  const dim_t n = u_is_m ? nv : nu;
  const auto pack_a = [&](dim_t f0, dim_t fb, dim_t p0, dim_t pb, const Panels& out) {
    u_is_m ? pack_u(f0, fb, p0, pb, out) : pack_v(f0, fb, p0, pb, out);
  };
  const auto pack_b = [&](dim_t f0, dim_t fb, dim_t p0, dim_t pb, const Panels& out) {
    u_is_m ? pack_v(f0, fb, p0, pb, out) : pack_u(f0, fb, p0, pb, out);
  };

  Workspace& ws = workspace();
  const dim_t kc = std::min(bs.kc, k);
  const dim_t a_panels = (std::min(bs.mc, m) + bs.mr - 1) / bs.mr;
  const dim_t b_panels = (std::min(bs.nc, n) + bs.nr - 1) / bs.nr;
  float* const a_block = ws.a.reserve(static_cast<size_t>(a_panels * bs.mr * kc));
  float* const b_block = ws.b.reserve(static_cast<size_t>(b_panels * bs.nr * kc));
  auxinfo_t aux{};
  MicroTile t{};
  t.mk = &mk;
  t.aux = &aux;
  t.buffer = ws.tile.reserve(static_cast<size_t>(bs.mr * bs.nr));
  t.buffer_ld = u_is_m ? bs.mr : bs.nr;

  for (dim_t jc = 0; jc < n; jc += bs.nc) {
    const dim_t nb = std::min(bs.nc, n - jc);
    for (dim_t pc = 0; pc < k; pc += bs.kc) {
      const dim_t kb = std::min(bs.kc, k - pc);
      const Panels b_out{b_block, static_cast<int>(bs.nr), bs.nr * kb};
      const Panels a_out{a_block, static_cast<int>(bs.mr), bs.mr * kb};
      pack_b(jc, nb, pc, kb, b_out);
      t.kb = kb;
      t.first = pc == 0;
      t.last = pc + kb == k;
      for (dim_t ic = 0; ic < m; ic += bs.mc) {
        const dim_t mb = std::min(bs.mc, m - ic);
        pack_a(ic, mb, pc, kb, a_out);
        for (dim_t jr = 0; jr < nb; jr += bs.nr) {
          float* const b_panel = b_out.column(jr);
          for (dim_t ir = 0; ir < mb; ir += bs.mr) {
            float* const a_panel = a_out.column(ir);
            // The micro-kernel prefetches the panels of the next call, as in BLIS's macro-kernel.
            const bool last_ir = ir + bs.mr >= mb;
            const bool last_jr = jr + bs.nr >= nb;
            bli_auxinfo_set_next_a(last_ir ? a_block : a_panel + a_out.stride, &aux);
            bli_auxinfo_set_next_b(last_ir ? (last_jr ? b_block : b_panel + b_out.stride) : b_panel, &aux);
            const dim_t i0 = ic + ir;
            const dim_t j0 = jc + jr;
            const dim_t mi = std::min(bs.mr, mb - ir);
            const dim_t nj = std::min(bs.nr, nb - jr);
            t.a = a_panel;
            t.b = b_panel;
            t.u0 = u_is_m ? i0 : j0;
            t.v0 = u_is_m ? j0 : i0;
            t.mu = u_is_m ? mi : nj;
            t.mv = u_is_m ? nj : mi;
            epilogue(static_cast<const MicroTile&>(t));
          }
        }
      }
    }
  }
}

// Size of the two packed blocks the driver uses for a product (the tile scratch is added by the caller).
size_t gemm_pack_bytes(const MicroKernel& mk, const Blocking& bs, dim_t nu, dim_t nv, dim_t k) {
  const bool u_is_m = mk.contiguous_on_mr;
  const dim_t m = u_is_m ? nu : nv;
  const dim_t n = u_is_m ? nv : nu;
  const dim_t kc = std::min(bs.kc, k);
  const dim_t floats =
      (std::min(bs.mc, m) + bs.mr - 1) / bs.mr * bs.mr * kc + (std::min(bs.nc, n) + bs.nr - 1) / bs.nr * bs.nr * kc;
  return static_cast<size_t>(floats) * sizeof(float);
}

// ---- Convolution geometry ----

struct Geom {
  int n, c, h, w, k, r, s;
  int stride_h, stride_w, pad_top, pad_left, dil_h, dil_w;
  int cg, kg, oh, ow;
  size_t plane, in_plane;
  size_t crs;  // rows of the implicit im2col matrix of a group: c/groups * r * s
  size_t x_sample, y_sample;
  dim_t npix;  // GEMM columns: every output pixel of every sample of the call
  // 1x1, stride 1, no padding: the im2col matrix of a sample is the input itself.
  bool identity;

  explicit Geom(const Conv2dShape& sh)
      : n(sh.n),
        c(sh.c),
        h(sh.h),
        w(sh.w),
        k(sh.k),
        r(sh.r),
        s(sh.s),
        stride_h(sh.stride_h),
        stride_w(sh.stride_w),
        pad_top(sh.pad_top),
        pad_left(sh.pad_left),
        dil_h(sh.dil_h),
        dil_w(sh.dil_w),
        cg(sh.c / sh.groups),
        kg(sh.k / sh.groups),
        oh(std::max(sh.out_h(), 0)),
        ow(std::max(sh.out_w(), 0)),
        plane(static_cast<size_t>(oh) * static_cast<size_t>(ow)),
        in_plane(static_cast<size_t>(sh.h) * static_cast<size_t>(sh.w)),
        crs(static_cast<size_t>(cg) * static_cast<size_t>(sh.r) * static_cast<size_t>(sh.s)),
        x_sample(static_cast<size_t>(sh.c) * in_plane),
        y_sample(static_cast<size_t>(sh.k) * plane),
        npix(static_cast<dim_t>(std::max(sh.n, 0)) * static_cast<dim_t>(plane)),
        identity(sh.r == 1 && sh.s == 1 && sh.stride_h == 1 && sh.stride_w == 1 && sh.pad_top == 0 &&
                 sh.pad_bottom == 0 && sh.pad_left == 0 && sh.pad_right == 0) {}

  [[nodiscard]] bool empty() const { return plane == 0; }
  // Groups of one input channel make GEMMs of a handful of rows; direct loops serve them better.
  [[nodiscard]] bool depthwise() const { return cg == 1 && kg < k; }
};

// ---- Which micro-kernel a pass runs ----

enum class Pass { kFwd, kBwdData, kBwdWeights };

const MicroKernel& own_kernel(std::string_view name) {
  const MicroKernel* k = find_kernel(name);
  return k != nullptr ? *k : blis_kernel();
}

// The forced kernel if any, else convgemm's own where it beat BLIS's in bench/conv_layers (docs/design.md,
// Convolution), else BLIS's. Our kernels' NR of 8 (AVX-512) and 4 (AVX2) divide every channel count of the zoo's
// networks, where skx's NR of 12 leaves a third of the last panel of 64 channels empty; backward-data's NR side
// is the im2col rows, which skx's 12 divides, and there BLIS's kernel was as fast or faster.
const MicroKernel& select_kernel(Pass pass, const Geom& g) {
  if (const MicroKernel* forced = forced_kernel().load(std::memory_order_relaxed)) {
    return *forced;
  }
  static const bool skx = cpu_runs(CpuIsa::kAvx512) && bli_arch_query_id() == BLIS_ARCH_SKX;
  static const bool avx2 = !skx && cpu_runs(CpuIsa::kAvx2) && blis_kernel().blocking.nr == 16;
  if (skx && g.kg % 8 == 0) {
    // Planes of fewer than 16 pixels (512 channels at 2x2) were a tie or a loss: each tile then spans samples.
    if (pass == Pass::kFwd && g.plane >= 16) {
      return own_kernel(g.kg <= 64 ? "avx512_48x8" : "avx512_32x8");
    }
    if (pass == Pass::kBwdWeights && g.kg <= 64) {
      return own_kernel("avx512_48x8");
    }
  }
  if (avx2) {
    // MR 24 on backward-weights' im2col rows: a whole number of panels for every 3x3 layer (crs = 9 c).
    if (pass == Pass::kBwdWeights && g.crs % 24 == 0) {
      return own_kernel("avx2_24x4");
    }
    if (pass == Pass::kFwd && g.kg <= 128 && g.kg % 4 == 0 && g.plane >= 256) {
      return own_kernel("avx2_24x4");
    }
  }
  return blis_kernel();
}

// [lo, hi) of the t in [0, count) whose input coordinate base + t * stride lies in [0, extent).
struct Range {
  int lo, hi;
};
Range valid_run(int base, int stride, int extent, int count) {
  int lo = 0;
  int hi = 0;
  if (stride == 1) {
    lo = std::max(0, -base);
    hi = std::min(count, extent - base);
  } else {
    lo = base >= 0 ? 0 : (-base + stride - 1) / stride;
    hi = base >= extent ? 0 : std::min(count, (extent - base + stride - 1) / stride);
  }
  hi = std::max(hi, 0);
  return {std::min(lo, hi), hi};
}

// Output pixels consecutive in GEMM column order within one output row of one sample: for each kernel tap their
// inputs are one strided row segment, so packing and scattering work run by run instead of element by element.
struct Run {
  int offset;  // from the first pixel of the visited range
  int count;
  dim_t sample;
  int oy, ox;
};

template <typename Fn>
void for_each_run(const Geom& g, dim_t q0, dim_t len, Fn&& fn) {
  const auto plane = static_cast<dim_t>(g.plane);
  dim_t sample = q0 / plane;
  const dim_t p = q0 - sample * plane;
  int oy = static_cast<int>(p / g.ow);
  int ox = static_cast<int>(p - static_cast<dim_t>(oy) * g.ow);
  for (dim_t done = 0; done < len;) {
    const int count = static_cast<int>(std::min<dim_t>(len - done, g.ow - ox));
    fn(Run{static_cast<int>(done), count, sample, oy, ox});
    done += count;
    ox = 0;
    if (++oy == g.oh) {
      oy = 0;
      ++sample;
    }
  }
}

// Same for tensors whose columns are whole planes (NCHW outputs, 1x1 inputs): runs end only at sample borders.
// fn(offset, count, sample, pixel).
template <typename Fn>
void for_each_plane_run(size_t plane, dim_t q0, dim_t len, Fn&& fn) {
  const auto pl = static_cast<dim_t>(plane);
  dim_t sample = q0 / pl;
  dim_t pixel = q0 - sample * pl;
  for (dim_t done = 0; done < len; ++sample, pixel = 0) {
    const int count = static_cast<int>(std::min(len - done, pl - pixel));
    fn(static_cast<int>(done), count, sample, static_cast<size_t>(pixel));
    done += count;
  }
}

// Valid part of a run for each kernel column.
const Range* column_ranges(const Geom& g, const Run& run) {
  thread_local std::vector<Range> ranges;
  ranges.resize(static_cast<size_t>(g.s));
  const int base = run.ox * g.stride_w - g.pad_left;
  for (int ks = 0; ks < g.s; ++ks) {
    ranges[static_cast<size_t>(ks)] = valid_run(base + ks * g.dil_w, g.stride_w, g.w, run.count);
  }
  return ranges.data();
}

// Row index of the im2col matrix of a group, decomposed into (input channel, kernel row, kernel column) and
// advanced without divisions.
struct Tap {
  int ci, kr, ks;
  Tap(const Geom& g, dim_t row)
      : ci(static_cast<int>(row / (g.r * g.s))),
        kr(static_cast<int>(row / g.s % g.r)),
        ks(static_cast<int>(row % g.s)) {}
  void next(const Geom& g) {
    if (++ks == g.s) {
      ks = 0;
      if (++kr == g.r) {
        kr = 0;
        ++ci;
      }
    }
  }
};

// GCC (12 and later, for __builtin_shufflevector) and Clang vector extension: 4 floats on any instruction set.
using Float4 = float __attribute__((vector_size(16)));

Float4 load4(const float* p) {
  Float4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store4(float* p, Float4 v) { std::memcpy(p, &v, sizeof v); }

// Copies and fills of runs, which are short (2 to a few dozen floats): explicit 4-float moves, because a call to
// memcpy, which a compiler makes of a plain copy loop, costs more than such a short move.
[[gnu::always_inline]] inline void copy_floats(const float* in, int count, float* out) {
  int t = 0;
  for (; t + 4 <= count; t += 4) {
    store4(out + t, load4(in + t));
  }
  for (; t < count; ++t) {
    out[t] = in[t];
  }
}

void zero_floats(float* out, int count) {
  int t = 0;
  for (; t + 4 <= count; t += 4) {
    store4(out + t, Float4{});
  }
  for (; t < count; ++t) {
    out[t] = 0.0f;
  }
}

// out[t] = row[col + t * stride] on the valid range, 0 elsewhere in [0, count). Indices rather than a shifted
// pointer, because col is negative in the left padding. Stride is a template argument for the common 1 and 2 (0:
// read it from `stride`), so that those loops are copies or vectorised.
template <int Stride>
[[gnu::always_inline]] inline void gather(const float* row, int col, int stride, Range valid, int count, float* out) {
  if (Stride == 1 && valid.lo == 0 && valid.hi == count) {
    copy_floats(row + col, count, out);
    return;
  }
  zero_floats(out, valid.lo);
  if constexpr (Stride == 1) {
    copy_floats(row + col + valid.lo, valid.hi - valid.lo, out + valid.lo);
  } else {
    const int step = Stride > 0 ? Stride : stride;
    for (int t = valid.lo; t < valid.hi; ++t) {
      out[t] = row[col + t * step];
    }
  }
  zero_floats(out + valid.hi, count - valid.hi);
}

// Calls fn(std::integral_constant<int, Stride>) with Stride 1, 2 or 0 (any other stride).
template <typename Fn>
void with_stride(int stride, Fn&& fn) {
  if (stride == 1) {
    fn(std::integral_constant<int, 1>{});
  } else if (stride == 2) {
    fn(std::integral_constant<int, 2>{});
  } else {
    fn(std::integral_constant<int, 0>{});
  }
}

void zero_columns(float* panel, int from, int width, dim_t rows) {
  if (from == width) {
    return;
  }
  for (dim_t p = 0; p < rows; ++p) {
    zero_floats(panel + p * width + from, width - from);
  }
}

// Zeroes the columns past the last free index fb of a block, in its last micro-panel.
void zero_tail(const Panels& out, dim_t fb, dim_t rows) {
  const dim_t last = fb - 1;
  zero_columns(out.column(last - last % out.width), static_cast<int>(last % out.width) + 1, out.width, rows);
}

// dst[t * width + i] = src[i * ld + t] for i < rows, t < cols, in 4 x 4 register blocks: the packing of an operand
// whose free index is not the contiguous one.
void transpose_into(const float* src, size_t ld, int rows, dim_t cols, float* dst, int width) {
  int i = 0;
  for (; i + 4 <= rows; i += 4) {
    const float* s0 = src + static_cast<size_t>(i) * ld;
    const float* s1 = s0 + ld;
    const float* s2 = s1 + ld;
    const float* s3 = s2 + ld;
    dim_t t = 0;
    for (; t + 4 <= cols; t += 4) {
      const Float4 r0 = load4(s0 + t), r1 = load4(s1 + t), r2 = load4(s2 + t), r3 = load4(s3 + t);
      const Float4 lo01 = __builtin_shufflevector(r0, r1, 0, 4, 1, 5);
      const Float4 hi01 = __builtin_shufflevector(r0, r1, 2, 6, 3, 7);
      const Float4 lo23 = __builtin_shufflevector(r2, r3, 0, 4, 1, 5);
      const Float4 hi23 = __builtin_shufflevector(r2, r3, 2, 6, 3, 7);
      float* d = dst + t * width + i;
      store4(d, __builtin_shufflevector(lo01, lo23, 0, 1, 4, 5));
      store4(d + width, __builtin_shufflevector(lo01, lo23, 2, 3, 6, 7));
      store4(d + 2 * width, __builtin_shufflevector(hi01, hi23, 0, 1, 4, 5));
      store4(d + 3 * width, __builtin_shufflevector(hi01, hi23, 2, 3, 6, 7));
    }
    for (; t < cols; ++t) {
      float* d = dst + t * width + i;
      d[0] = s0[t];
      d[1] = s1[t];
      d[2] = s2[t];
      d[3] = s3[t];
    }
  }
  for (; i < rows; ++i) {
    const float* s0 = src + static_cast<size_t>(i) * ld;
    for (dim_t t = 0; t < cols; ++t) {
      dst[t * width + i] = s0[t];
    }
  }
}

// ---- Packers ----
// Names say which index is free (the panel width) and which is reduced over. Pixel packers first cut their block
// into runs, then sweep the reduction index outermost: each source channel is then read as one stream per block
// (which hardware prefetchers follow), rather than as many interleaved short pieces, one per micro-panel.

// Output pixels of a block that lie in one micro-panel and in one output row of one sample (im2col sources) or
// one sample plane (plain NCHW sources).
struct BlockRun {
  float* dst;  // the run's first column in its micro-panel (pixel-free packers)
  int offset;  // the run's first pixel, from the start of the block
  int count;
  const float* src;  // channel 0 of the run's sample
  int iy0, ix0;      // input coordinates of the first pixel at kernel offset (0, 0) (output-row runs)
  int pixel;         // the first pixel's index in its plane (plane runs)
  int column;        // and its output column
};

// 'Same' convolutions with unit strides (ow == w): row (ci, kr, ks) of a sample's im2col matrix is channel ci of
// the input plane shifted by a constant, with zeros where the window leaves the input. Runs then span whole
// planes rather than output rows: one copy per run and tap instead of one per output row.
bool shifted_planes(const Geom& g) { return g.stride_h == 1 && g.stride_w == 1 && g.ow == g.w; }

// The shifted plane of a tap: pixel p reads input element p + shift of the channel when p lies in [lo, hi) (rows
// inside the input) and its column in [col_lo, col_hi).
struct ShiftedTap {
  std::ptrdiff_t shift;
  int lo, hi;
  int col_lo, col_hi;
};

ShiftedTap shifted_tap(const Geom& g, const Tap& tap) {
  const int dy = tap.kr * g.dil_h - g.pad_top;
  const int dx = tap.ks * g.dil_w - g.pad_left;
  const int row_lo = std::clamp(-dy, 0, g.oh);
  const int row_hi = std::clamp(g.h - dy, row_lo, g.oh);
  const auto shift = static_cast<std::ptrdiff_t>(dy) * g.w + dx;
  // Also within the channel's storage: pixels there are only in the padding columns, zeroed afterwards.
  const auto plane = static_cast<std::ptrdiff_t>(g.in_plane);
  const int lo = static_cast<int>(std::max<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(row_lo) * g.ow, -shift));
  const int hi = static_cast<int>(std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(row_hi) * g.ow, plane - shift));
  return {shift, lo, std::max(lo, hi), std::clamp(-dx, 0, g.ow), std::clamp(g.w - dx, 0, g.ow)};
}

// out[0, run.count) = the run's pixels of the shifted plane of channel `channel` (an offset into run.src).
[[gnu::always_inline]] inline void copy_shifted(const BlockRun& run, size_t channel, const ShiftedTap& tap, int ow,
                                                float* out) {
  const int a = std::clamp(tap.lo - run.pixel, 0, run.count);
  const int b = std::clamp(tap.hi - run.pixel, a, run.count);
  zero_floats(out, a);
  copy_floats(run.src + channel + (run.pixel + a + tap.shift), b - a, out + a);
  zero_floats(out + b, run.count - b);
  if (tap.col_lo == 0 && tap.col_hi == ow) {
    return;
  }
  for (int row = -run.column; row < b; row += ow) {
    for (int u = std::max(row, a); u < std::min(row + tap.col_lo, b); ++u) {
      out[u] = 0.0f;
    }
    for (int u = std::max(row + tap.col_hi, a); u < std::min(row + ow, b); ++u) {
      out[u] = 0.0f;
    }
  }
}

// Runs of pixels [q0, q0 + qb) of NCHW tensors (planes of `plane` pixels in rows of row_width), cut at multiples
// of cut.
void plane_runs(const float* t, size_t sample_stride, size_t plane, int row_width, dim_t q0, dim_t qb, dim_t cut,
                std::vector<BlockRun>& runs) {
  runs.clear();
  for (dim_t start = 0; start < qb; start += cut) {
    for_each_plane_run(plane, q0 + start, std::min(cut, qb - start),
                       [&](int offset, int count, dim_t sample, size_t pixel) {
                         const int p = static_cast<int>(pixel);
                         runs.push_back({nullptr, static_cast<int>(start) + offset, count,
                                         t + static_cast<size_t>(sample) * sample_stride, 0, 0, p, p % row_width});
                       });
  }
}

// Runs of pixels [q0, q0 + qb) of an im2col source, and the valid part of each for every kernel column
// (cols[run * s + ks]). Runs are cut at multiples of cut from q0 (the micro-panels of a pixel-free block).
void im2col_runs(const Geom& g, const float* xg, dim_t q0, dim_t qb, dim_t cut, std::vector<BlockRun>& runs,
                 std::vector<Range>& cols) {
  runs.clear();
  cols.clear();
  for (dim_t start = 0; start < qb; start += cut) {
    for_each_run(g, q0 + start, std::min(cut, qb - start), [&](const Run& run) {
      const int ix0 = run.ox * g.stride_w - g.pad_left;
      runs.push_back({nullptr, static_cast<int>(start) + run.offset, run.count,
                      xg + static_cast<size_t>(run.sample) * g.x_sample, run.oy * g.stride_h - g.pad_top, ix0, 0, 0});
      for (int ks = 0; ks < g.s; ++ks) {
        cols.push_back(valid_run(ix0 + ks * g.dil_w, g.stride_w, g.w, run.count));
      }
    });
  }
}

// Free: output pixels; reduction: im2col rows. The forward pass's implicit im2col matrix, gathered from x.
void pack_im2col_pixels(const Geom& g, const float* xg, dim_t q0, dim_t qb, dim_t p0, dim_t pb, const Panels& out) {
  thread_local std::vector<BlockRun> runs;
  thread_local std::vector<Range> cols;
  const int width = out.width;
  if (shifted_planes(g)) {
    plane_runs(xg, g.x_sample, g.plane, g.ow, q0, qb, width, runs);
    for (BlockRun& run : runs) {
      run.dst = out.column(run.offset);
    }
    zero_tail(out, qb, pb);
    Tap tap(g, p0);
    for (dim_t p = 0; p < pb; ++p, tap.next(g)) {
      const ShiftedTap shifted = shifted_tap(g, tap);
      const size_t channel = static_cast<size_t>(tap.ci) * g.in_plane;
      for (const BlockRun& run : runs) {
        copy_shifted(run, channel, shifted, g.ow, run.dst + p * width);
      }
    }
    return;
  }
  im2col_runs(g, xg, q0, qb, width, runs, cols);
  for (BlockRun& run : runs) {
    run.dst = out.column(run.offset);
  }
  zero_tail(out, qb, pb);
  with_stride(g.stride_w, [&](auto stride) {
    Tap tap(g, p0);
    for (dim_t p = 0; p < pb; ++p, tap.next(g)) {
      const size_t channel = static_cast<size_t>(tap.ci) * g.in_plane;
      const int dy = tap.kr * g.dil_h;
      const int dx = tap.ks * g.dil_w;
      const Range* col = cols.data() + tap.ks;
      for (const BlockRun& run : runs) {
        float* to = run.dst + p * width;
        const int iy = run.iy0 + dy;
        if (iy < 0 || iy >= g.h) {
          zero_floats(to, run.count);
        } else {
          gather<decltype(stride)::value>(run.src + channel + static_cast<size_t>(iy) * g.w, run.ix0 + dx, g.stride_w,
                                          *col, run.count, to);
        }
        col += g.s;
      }
    }
  });
}

// Im2col rows [f0, f0 + fb) over output pixels [q0, q0 + qb), gathered row-major (one stream per channel) width
// rows at a time: emit(pan, cnt, rows) receives rows f0 + pan to f0 + pan + cnt, row i at rows + i * qb.
template <typename Emit>
void gather_im2col_rows(const Geom& g, const float* xg, dim_t f0, dim_t fb, dim_t q0, dim_t qb, int width,
                        Emit&& emit) {
  thread_local std::vector<BlockRun> runs;
  thread_local std::vector<Range> cols;
  thread_local AlignedFloats rows;
  const bool shifted = shifted_planes(g);
  if (shifted) {
    plane_runs(xg, g.x_sample, g.plane, g.ow, q0, qb, qb, runs);
  } else {
    im2col_runs(g, xg, q0, qb, qb, runs, cols);
  }
  float* const gathered = rows.reserve(static_cast<size_t>(width) * static_cast<size_t>(qb));
  for (dim_t pan = 0; pan < fb; pan += width) {
    const int cnt = static_cast<int>(std::min<dim_t>(width, fb - pan));
    if (shifted) {
      Tap tap(g, f0 + pan);
      for (int i = 0; i < cnt; ++i, tap.next(g)) {
        const ShiftedTap window = shifted_tap(g, tap);
        const size_t channel = static_cast<size_t>(tap.ci) * g.in_plane;
        for (const BlockRun& run : runs) {
          copy_shifted(run, channel, window, g.ow, gathered + static_cast<size_t>(i) * qb + run.offset);
        }
      }
    } else
      with_stride(g.stride_w, [&](auto stride) {
        Tap tap(g, f0 + pan);
        for (int i = 0; i < cnt; ++i, tap.next(g)) {
          const size_t channel = static_cast<size_t>(tap.ci) * g.in_plane;
          const int dy = tap.kr * g.dil_h;
          const int dx = tap.ks * g.dil_w;
          const Range* col = cols.data() + tap.ks;
          float* row_out = gathered + static_cast<size_t>(i) * static_cast<size_t>(qb);
          for (const BlockRun& run : runs) {
            float* to = row_out + run.offset;
            const int iy = run.iy0 + dy;
            if (iy < 0 || iy >= g.h) {
              zero_floats(to, run.count);
            } else {
              gather<decltype(stride)::value>(run.src + channel + static_cast<size_t>(iy) * g.w, run.ix0 + dx,
                                              g.stride_w, *col, run.count, to);
            }
            col += g.s;
          }
        }
      });
    emit(pan, cnt, static_cast<const float*>(gathered));
  }
}

// Free: im2col rows; reduction: output pixels. The transposed implicit im2col of backward-weights: each
// micro-panel's rows are gathered row-major, then transposed into the panel.
void pack_im2col_rows(const Geom& g, const float* xg, dim_t f0, dim_t fb, dim_t q0, dim_t qb, const Panels& out) {
  gather_im2col_rows(g, xg, f0, fb, q0, qb, out.width, [&](dim_t pan, int cnt, const float* rows) {
    float* panel = out.column(pan);
    transpose_into(rows, static_cast<size_t>(qb), cnt, qb, panel, out.width);
    zero_columns(panel, cnt, out.width, qb);
  });
}

// Free: pixels; reduction: channels of an NCHW tensor t (dy, or x of a 1x1 convolution).
void pack_nchw_pixels(const float* t, size_t sample_stride, size_t plane, dim_t q0, dim_t qb, dim_t p0, dim_t pb,
                      const Panels& out) {
  thread_local std::vector<BlockRun> runs;
  plane_runs(t, sample_stride, plane, static_cast<int>(plane), q0, qb, out.width, runs);
  for (BlockRun& run : runs) {
    run.dst = out.column(run.offset);
    run.src += static_cast<size_t>(p0) * plane + static_cast<size_t>(run.pixel);
  }
  zero_tail(out, qb, pb);
  for (dim_t p = 0; p < pb; ++p) {
    for (const BlockRun& run : runs) {
      copy_floats(run.src + static_cast<size_t>(p) * plane, run.count, run.dst + p * out.width);
    }
  }
}

// Free: channels; reduction: pixels of an NCHW tensor t (dy, or x of a 1x1 convolution).
void pack_nchw_channels(const float* t, size_t sample_stride, size_t plane, dim_t f0, dim_t fb, dim_t q0, dim_t qb,
                        const Panels& out) {
  thread_local std::vector<BlockRun> runs;
  plane_runs(t, sample_stride, plane, static_cast<int>(plane), q0, qb, qb, runs);
  for (dim_t pan = 0; pan < fb; pan += out.width) {
    const int cnt = static_cast<int>(std::min<dim_t>(out.width, fb - pan));
    float* panel = out.column(pan);
    for (const BlockRun& run : runs) {
      transpose_into(run.src + static_cast<size_t>(f0 + pan) * plane + static_cast<size_t>(run.pixel), plane, cnt,
                     run.count, panel + static_cast<dim_t>(run.offset) * out.width, out.width);
    }
    zero_columns(panel, cnt, out.width, qb);
  }
}

// Free: rows of a row-major matrix a; reduction: its columns (the weights of the forward pass).
void pack_matrix_rows(const float* a, size_t lda, dim_t f0, dim_t fb, dim_t p0, dim_t pb, const Panels& out) {
  for (dim_t pan = 0; pan < fb; pan += out.width) {
    const int cnt = static_cast<int>(std::min<dim_t>(out.width, fb - pan));
    float* panel = out.column(pan);
    transpose_into(a + static_cast<size_t>(f0 + pan) * lda + p0, lda, cnt, pb, panel, out.width);
    zero_columns(panel, cnt, out.width, pb);
  }
}

// Free: columns of a row-major matrix a; reduction: its rows (the weights of backward-data).
void pack_matrix_columns(const float* a, size_t lda, dim_t f0, dim_t fb, dim_t p0, dim_t pb, const Panels& out) {
  for (dim_t pan = 0; pan < fb; pan += out.width) {
    const int cnt = static_cast<int>(std::min<dim_t>(out.width, fb - pan));
    float* panel = out.column(pan);
    for (dim_t p = 0; p < pb; ++p) {
      copy_floats(a + static_cast<size_t>(p0 + p) * lda + f0 + pan, cnt, panel + p * out.width);
    }
    zero_columns(panel, cnt, out.width, pb);
  }
}

// ---- Epilogues ----

// An NCHW tensor seen as the GEMM output C(u = sample * plane + pixel, v = channel).
struct NchwOutput {
  float* base;  // channel 0 of the group
  size_t sample_stride;
  size_t plane;
  const float* bias;  // of the group's channel 0; nullable
  int relu;
};

// Bias and ReLU once the last KC block is in, while the tile is still in cache. "x < 0 ? 0 : x" lets a NaN
// through, as relu_fwd does.
void finish(float* c, size_t ldc, int mu, dim_t mv, const float* bias, int relu) {
  if (bias == nullptr && relu == 0) {
    return;
  }
  for (dim_t v = 0; v < mv; ++v) {
    float* cv = c + static_cast<size_t>(v) * ldc;
    const float b = bias != nullptr ? bias[v] : 0.0f;
    if (relu != 0) {
      for (int u = 0; u < mu; ++u) {
        const float x = cv[u] + b;
        cv[u] = x < 0.0f ? 0.0f : x;
      }
    } else {
      for (int u = 0; u < mu; ++u) {
        cv[u] += b;
      }
    }
  }
}

// The micro-kernel writes straight into the tensor when the tile's pixels lie in one sample (then C is a plain
// strided matrix); a tile across samples goes through the tile buffer and is copied out run by run.
void store_nchw(const MicroTile& t, const NchwOutput& o) {
  const auto plane = static_cast<dim_t>(o.plane);
  const dim_t sample = t.u0 / plane;
  const dim_t pixel = t.u0 - sample * plane;
  const float* bias = o.bias != nullptr ? o.bias + t.v0 : nullptr;
  if (pixel + t.mu <= plane) {
    float* c = o.base + static_cast<size_t>(sample) * o.sample_stride + static_cast<size_t>(t.v0 * plane + pixel);
    t.compute(c, plane, t.first ? 0.0f : 1.0f);
    if (t.last) {
      finish(c, o.plane, static_cast<int>(t.mu), t.mv, bias, o.relu);
    }
    return;
  }
  t.compute(t.buffer, t.buffer_ld, 0.0f);
  for_each_plane_run(o.plane, t.u0, t.mu, [&](int offset, int count, dim_t s, size_t p) {
    float* c = o.base + static_cast<size_t>(s) * o.sample_stride + static_cast<size_t>(t.v0) * o.plane + p;
    for (dim_t v = 0; v < t.mv; ++v) {
      float* out = c + static_cast<size_t>(v) * o.plane;
      const float* in = t.buffer + offset + v * t.buffer_ld;
      if (t.first) {
        copy_floats(in, count, out);
      } else {
        for (int u = 0; u < count; ++u) {
          out[u] += in[u];
        }
      }
    }
    if (t.last) {
      finish(c, o.plane, count, t.mv, bias, o.relu);
    }
  });
}

// row[col + u * stride] += in[u] on the valid range: the inverse of gather.
template <int Stride>
void add_to_row(const float* in, float* row, int col, int stride, Range valid) {
  if constexpr (Stride == 1) {
    float* out = row + col;
    int u = valid.lo;
    for (; u + 4 <= valid.hi; u += 4) {
      store4(out + u, load4(out + u) + load4(in + u));
    }
    for (; u < valid.hi; ++u) {
      out[u] += in[u];
    }
  } else {
    const int step = Stride > 0 ? Stride : stride;
    for (int u = valid.lo; u < valid.hi; ++u) {
      row[col + u * step] += in[u];
    }
  }
}

// col2im fused into backward-data: tile(u = pixel, v = im2col row) is added into the dx elements it came from.
void scatter_add(const Geom& g, const MicroTile& t, float* dxg) {
  t.compute(t.buffer, t.buffer_ld, 0.0f);
  with_stride(g.stride_w, [&](auto stride) {
    for_each_run(g, t.u0, t.mu, [&](const Run& run) {
      const Range* cols = column_ranges(g, run);
      float* dxs = dxg + static_cast<size_t>(run.sample) * g.x_sample;
      const int iy0 = run.oy * g.stride_h - g.pad_top;
      const int ix0 = run.ox * g.stride_w - g.pad_left;
      Tap tap(g, t.v0);
      for (dim_t v = 0; v < t.mv; ++v, tap.next(g)) {
        const int iy = iy0 + tap.kr * g.dil_h;
        if (iy < 0 || iy >= g.h) {
          continue;
        }
        float* row = dxs + static_cast<size_t>(tap.ci) * g.in_plane + static_cast<size_t>(iy) * g.w;
        add_to_row<decltype(stride)::value>(t.buffer + run.offset + v * t.buffer_ld, row, ix0 + tap.ks * g.dil_w,
                                            g.stride_w, cols[tap.ks]);
      }
    });
  });
}

// ---- Depthwise (one input channel per group): direct loops ----

template <typename Fn>
void for_each_depthwise_row(const Geom& g, Fn&& fn) {
  for (int kr = 0; kr < g.r; ++kr) {
    for (int ks = 0; ks < g.s; ++ks) {
      const int col = ks * g.dil_w - g.pad_left;
      const Range valid = valid_run(col, g.stride_w, g.w, g.ow);
      for (int oy = 0; oy < g.oh; ++oy) {
        const int iy = oy * g.stride_h - g.pad_top + kr * g.dil_h;
        if (iy >= 0 && iy < g.h) {
          fn(kr * g.s + ks, static_cast<size_t>(oy) * g.ow, static_cast<size_t>(iy) * g.w, col, valid);
        }
      }
    }
  }
}

void depthwise_fwd(const Geom& g, const float* x, const float* w, const float* b, int relu, float* y) {
  const size_t taps = static_cast<size_t>(g.r) * g.s;
  for (int i = 0; i < g.n; ++i) {
    for (int kk = 0; kk < g.k; ++kk) {
      float* yp = y + static_cast<size_t>(i) * g.y_sample + static_cast<size_t>(kk) * g.plane;
      const float* xp = x + static_cast<size_t>(i) * g.x_sample + static_cast<size_t>(kk / g.kg) * g.in_plane;
      const float* wk = w + static_cast<size_t>(kk) * taps;
      std::fill_n(yp, g.plane, b != nullptr ? b[kk] : 0.0f);
      for_each_depthwise_row(g, [&](int tap, size_t yrow, size_t xrow, int col, Range valid) {
        const float wv = wk[tap];
        for (int ox = valid.lo; ox < valid.hi; ++ox) {
          yp[yrow + ox] += wv * xp[xrow + col + ox * g.stride_w];
        }
      });
      if (relu != 0) {
        for (size_t p = 0; p < g.plane; ++p) {
          yp[p] = yp[p] < 0.0f ? 0.0f : yp[p];
        }
      }
    }
  }
}

void depthwise_bwd_data(const Geom& g, const float* dy, const float* w, float* dx) {
  const size_t taps = static_cast<size_t>(g.r) * g.s;
  std::fill_n(dx, static_cast<size_t>(g.n) * g.x_sample, 0.0f);
  for (int i = 0; i < g.n; ++i) {
    for (int kk = 0; kk < g.k; ++kk) {
      const float* dyp = dy + static_cast<size_t>(i) * g.y_sample + static_cast<size_t>(kk) * g.plane;
      float* dxp = dx + static_cast<size_t>(i) * g.x_sample + static_cast<size_t>(kk / g.kg) * g.in_plane;
      const float* wk = w + static_cast<size_t>(kk) * taps;
      for_each_depthwise_row(g, [&](int tap, size_t yrow, size_t xrow, int col, Range valid) {
        const float wv = wk[tap];
        for (int ox = valid.lo; ox < valid.hi; ++ox) {
          dxp[xrow + col + ox * g.stride_w] += wv * dyp[yrow + ox];
        }
      });
    }
  }
}

void depthwise_bwd_weights(const Geom& g, const float* x, const float* dy, float* dw) {
  const size_t taps = static_cast<size_t>(g.r) * g.s;
  std::fill_n(dw, static_cast<size_t>(g.k) * taps, 0.0f);
  for (int i = 0; i < g.n; ++i) {
    for (int kk = 0; kk < g.k; ++kk) {
      const float* dyp = dy + static_cast<size_t>(i) * g.y_sample + static_cast<size_t>(kk) * g.plane;
      const float* xp = x + static_cast<size_t>(i) * g.x_sample + static_cast<size_t>(kk / g.kg) * g.in_plane;
      float* dwk = dw + static_cast<size_t>(kk) * taps;
      // Row partial sums keep the fp32 accumulation chains short.
      for_each_depthwise_row(g, [&](int tap, size_t yrow, size_t xrow, int col, Range valid) {
        float sum = 0.0f;
        for (int ox = valid.lo; ox < valid.hi; ++ox) {
          sum += xp[xrow + col + ox * g.stride_w] * dyp[yrow + ox];
        }
        dwk[tap] += sum;
      });
    }
  }
}

}  // namespace

GemmBlocking convgemm_blocking() { return blis_kernel().blocking; }

std::vector<std::string> convgemm_ukernels() {
  std::vector<std::string> names{"blis"};
  for (const OwnKernel& k : own_kernels()) {
    if (cpu_runs(k.isa)) {
      names.emplace_back(k.mk.name);
    }
  }
  return names;
}

std::vector<std::string> convgemm_own_ukernels() {
  std::vector<std::string> names;
  for (const OwnKernel& k : own_kernels()) {
    names.emplace_back(k.mk.name);
  }
  return names;
}

std::string convgemm_ukernel(const Conv2dShape& sh, ConvPass pass) {
  const Geom g(sh);
  const Pass p = pass == ConvPass::kFwd ? Pass::kFwd : pass == ConvPass::kBwdData ? Pass::kBwdData : Pass::kBwdWeights;
  return select_kernel(p, g).name;
}

void convgemm_force_ukernel(const std::string& name) {
  if (name.empty() || name == "auto") {
    forced_kernel().store(nullptr);
    return;
  }
  const MicroKernel* k = find_kernel(name);
  if (k == nullptr) {
    std::string known;
    for (const std::string& n : convgemm_ukernels()) {
      known += (known.empty() ? "" : ", ") + n;
    }
    throw InvalidArgument("convgemm micro-kernel: '" + name + "', expected auto or one this CPU runs at level " +
                          cpu_isa_name(cpu_isa_setting().effective) + ": " + known);
  }
  forced_kernel().store(k);
}

namespace {

// A GEMM runner, run(nu, nv, k, pack_u, pack_v, epilogue): the fp32 driver with a micro-kernel and blocking, or
// the bf16 driver (gemm_bf16_tiles below); the passes below are written once for both.
auto fp32_runner(const MicroKernel& mk, const Blocking& bs) {
  return [&mk, bs](dim_t nu, dim_t nv, dim_t k, auto&& pack_u, auto&& pack_v, auto&& epilogue) {
    gemm(mk, bs, nu, nv, k, pack_u, pack_v, epilogue);
  };
}

// The forward GEMMs of a non-depthwise convolution, group after group; pack_weights(grp, f0, fb, p0, pb, out) packs
// the weights of group grp with output channels free and the im2col rows reduced over.
template <typename PackWeights, typename Run>
void forward_with(const Geom& g, const float* x, const float* b, int relu, float* y, PackWeights&& pack_weights,
                  Run&& run) {
  const int groups = g.c / g.cg;
  for (int grp = 0; grp < groups; ++grp) {
    const float* xg = x + static_cast<size_t>(grp) * static_cast<size_t>(g.cg) * g.in_plane;
    const NchwOutput yg{y + static_cast<size_t>(grp) * static_cast<size_t>(g.kg) * g.plane, g.y_sample, g.plane,
                        b != nullptr ? b + static_cast<size_t>(grp) * static_cast<size_t>(g.kg) : nullptr, relu};
    const auto pack_group_weights = [&](dim_t f0, dim_t fb, dim_t p0, dim_t pb, const Panels& out) {
      pack_weights(grp, f0, fb, p0, pb, out);
    };
    const auto store = [&](const MicroTile& t) { store_nchw(t, yg); };
    const auto crs = static_cast<dim_t>(g.crs);
    if (g.identity) {
      run(
          g.npix, g.kg, crs,
          [&](dim_t f0, dim_t fb, dim_t p0, dim_t pb, const Panels& out) {
            pack_nchw_pixels(xg, g.x_sample, g.in_plane, f0, fb, p0, pb, out);
          },
          pack_group_weights, store);
    } else {
      run(
          g.npix, g.kg, crs,
          [&](dim_t f0, dim_t fb, dim_t p0, dim_t pb, const Panels& out) {
            pack_im2col_pixels(g, xg, f0, fb, p0, pb, out);
          },
          pack_group_weights, store);
    }
  }
}

// Backward-data of a stride-1 convolution is the forward convolution of dy by the weights flipped in both kernel
// axes, with input and output channels swapped, and padding d(r-1) - pad on each side ("full" minus the forward's
// padding). Run that way it takes the forward path (packing by shifted planes, tiles written straight into dx, no
// zeroing, no scatter-add), which measured 10% faster than the scatter-add path where the forward path's own
// kernel wins most, 64 channels in and out (docs/design.md, Convolution). From 128 channels it was within 3% either
// way, and worse where the channel counts differ (the dual's narrow side, or a longer reduction): those stay on
// the scatter-add path. Needs every padding at most d(r-1).
bool dual_forward_fits(const Conv2dShape& sh, const Geom& g) {
  const int span_h = sh.dil_h * (sh.r - 1);
  const int span_w = sh.dil_w * (sh.s - 1);
  return sh.stride_h == 1 && sh.stride_w == 1 && !g.identity && !g.depthwise() && sh.c == sh.k && g.cg >= 32 &&
         g.cg <= 64 && g.in_plane >= 256 && sh.pad_top <= span_h && sh.pad_bottom <= span_h &&
         sh.pad_left <= span_w && sh.pad_right <= span_w;
}

Conv2dShape dual_shape(const Conv2dShape& sh) {
  Conv2dShape d = sh;
  d.c = sh.k;
  d.k = sh.c;
  d.h = sh.out_h();
  d.w = sh.out_w();
  d.pad_top = sh.dil_h * (sh.r - 1) - sh.pad_top;
  d.pad_bottom = sh.dil_h * (sh.r - 1) - sh.pad_bottom;
  d.pad_left = sh.dil_w * (sh.s - 1) - sh.pad_left;
  d.pad_right = sh.dil_w * (sh.s - 1) - sh.pad_right;
  return d;
}

// Free: input channels ci of a group; reduction: (output channel kk, tap t) of the dual convolution, whose weight
// is the forward's w[kk, ci] at tap rs - 1 - t (the kernel flipped in both axes).
void pack_flipped_weights(const float* wg, int cg, int rs, dim_t f0, dim_t fb, dim_t p0, dim_t pb,
                          const Panels& out) {
  const auto taps = static_cast<size_t>(rs);
  for (dim_t pan = 0; pan < fb; pan += out.width) {
    const int cnt = static_cast<int>(std::min<dim_t>(out.width, fb - pan));
    float* panel = out.column(pan);
    for (dim_t p = 0; p < pb; ++p) {
      const dim_t row = p0 + p;
      const auto kk = static_cast<size_t>(row / rs);
      const auto t = static_cast<size_t>(row % rs);
      const float* src = wg + (kk * static_cast<size_t>(cg) + static_cast<size_t>(f0 + pan)) * taps + (taps - 1 - t);
      float* dst = panel + p * out.width;
      for (int i = 0; i < cnt; ++i) {
        dst[i] = src[static_cast<size_t>(i) * taps];
      }
    }
    zero_columns(panel, cnt, out.width, pb);
  }
}

}  // namespace

namespace {

// The forward pass of every precision: nothing to do without pixels or channels, depthwise convolutions by their
// own loop (in fp32), else forward_with the weights packed row by row and run_for(geometry)'s runner.
template <typename RunFor>
void forward_pass(const Conv2dShape& sh, const float* x, const float* w, const float* b, int relu, float* y,
                  RunFor&& run_for) {
  const Geom g(sh);
  if (g.npix == 0 || g.k <= 0) {
    return;
  }
  if (g.depthwise()) {
    depthwise_fwd(g, x, w, b, relu, y);
    return;
  }
  forward_with(
      g, x, b, relu, y,
      [&](int grp, dim_t f0, dim_t fb, dim_t p0, dim_t pb, const Panels& out) {
        pack_matrix_rows(w + static_cast<size_t>(grp) * static_cast<size_t>(g.kg) * g.crs, g.crs, f0, fb, p0, pb,
                         out);
      },
      run_for(g));
}

}  // namespace

void conv2d_fwd_convgemm(const Conv2dShape& sh, const float* x, const float* w, const float* b, int relu, float* y) {
  forward_pass(sh, x, w, b, relu, y, [](const Geom& g) {
    const MicroKernel& mk = select_kernel(Pass::kFwd, g);
    return fp32_runner(mk, default_blocking(mk));
  });
}

namespace {

// Backward-data of a non-depthwise convolution with pixels and weights: by the dual forward convolution where it
// fits, else by GEMMs over the whole reduction whose tiles are stored (1x1) or scattered into dx.
// run_forward(geom) is the runner of a forward pass of that geometry, run_whole(k) one whose KC block holds a
// reduction of k.
template <typename RunForward, typename RunWhole>
void backward_data_with(const Conv2dShape& sh, const Geom& g, const float* dy, const float* w, float* dx,
                        RunForward&& run_forward, RunWhole&& run_whole) {
  if (dual_forward_fits(sh, g)) {
    const Geom dual(dual_shape(sh));
    const int rs = sh.r * sh.s;
    forward_with(
        dual, dy, nullptr, 0, dx,
        [&](int grp, dim_t f0, dim_t fb, dim_t p0, dim_t pb, const Panels& out) {
          pack_flipped_weights(w + static_cast<size_t>(grp) * static_cast<size_t>(g.kg) * g.crs, g.cg, rs, f0, fb,
                               p0, pb, out);
        },
        run_forward(dual));
    return;
  }
  // A 1x1 identity geometry writes every dx element exactly once. Otherwise tiles add into dx, which is zeroed one
  // sample at a time just before the first tile that touches the sample (rather than all of it upfront, which
  // would have left L2 by the time the tiles come back to it); input cells no window reads (stride larger than
  // the kernel extent) are zeroed that way too.
  dim_t zeroed_samples = 0;
  const auto zero_dx_through = [&](dim_t last_pixel) {
    const dim_t sample = last_pixel / static_cast<dim_t>(g.plane);
    if (sample >= zeroed_samples) {
      std::fill(dx + static_cast<size_t>(zeroed_samples) * g.x_sample,
                dx + static_cast<size_t>(sample + 1) * g.x_sample, 0.0f);
      zeroed_samples = sample + 1;
    }
  };
  auto run = run_whole(static_cast<dim_t>(g.kg));
  for (int grp = 0; grp < sh.groups; ++grp) {
    const float* dyg = dy + static_cast<size_t>(grp) * static_cast<size_t>(g.kg) * g.plane;
    const float* wg = w + static_cast<size_t>(grp) * static_cast<size_t>(g.kg) * g.crs;
    float* dxg = dx + static_cast<size_t>(grp) * static_cast<size_t>(g.cg) * g.in_plane;
    const auto pack_dy = [&](dim_t f0, dim_t fb, dim_t p0, dim_t pb, const Panels& out) {
      pack_nchw_pixels(dyg, g.y_sample, g.plane, f0, fb, p0, pb, out);
    };
    const auto pack_weights = [&](dim_t f0, dim_t fb, dim_t p0, dim_t pb, const Panels& out) {
      pack_matrix_columns(wg, g.crs, f0, fb, p0, pb, out);
    };
    const auto crs = static_cast<dim_t>(g.crs);
    if (g.identity) {
      const NchwOutput dx_out{dxg, g.x_sample, g.in_plane, nullptr, 0};
      run(g.npix, crs, g.kg, pack_dy, pack_weights, [&](const MicroTile& t) { store_nchw(t, dx_out); });
    } else {
      run(g.npix, crs, g.kg, pack_dy, pack_weights, [&](const MicroTile& t) {
        zero_dx_through(t.u0 + t.mu - 1);
        scatter_add(g, t, dxg);
      });
    }
  }
}

// The cases of backward-data every precision shares that run no GEMM; true when dx is done.
bool bwd_data_without_gemm(const Geom& g, const float* dy, const float* w, float* dx) {
  if (g.n <= 0) {
    return true;
  }
  if (g.empty() || g.kg <= 0) {
    std::fill_n(dx, static_cast<size_t>(g.n) * g.x_sample, 0.0f);
    return true;
  }
  if (g.depthwise()) {
    depthwise_bwd_data(g, dy, w, dx);
    return true;
  }
  return false;
}

}  // namespace

void conv2d_bwd_data_convgemm(const Conv2dShape& sh, const float* dy, const float* w, float* dx) {
  const Geom g(sh);
  if (bwd_data_without_gemm(g, dy, w, dx)) {
    return;
  }
  backward_data_with(
      sh, g, dy, w, dx,
      [](const Geom& fg) {
        const MicroKernel& mk = select_kernel(Pass::kFwd, fg);
        return fp32_runner(mk, default_blocking(mk));
      },
      [&](dim_t k) {
        const MicroKernel& mk = select_kernel(Pass::kBwdData, g);
        return fp32_runner(mk, whole_reduction_blocking(mk, k));
      });
}

namespace {

// What the backward-weights passes of every precision share before their GEMMs: the bias gradient (an fp32 sum),
// and the cases with no GEMM to run (no weights, no pixels: zero gradients, depthwise: its own loop, in fp32).
// True when the weight gradient is done.
bool bwd_weights_without_gemm(const Conv2dShape& sh, const Geom& g, const float* x, const float* dy, float* dw,
                              float* db) {
  if (db != nullptr) {
    bias_bwd_weights(std::max(g.n, 0), g.k, g.plane, dy, db);
  }
  const size_t w_group = static_cast<size_t>(std::max(g.kg, 0)) * g.crs;
  if (w_group == 0) {
    return true;
  }
  if (g.npix == 0) {
    std::fill_n(dw, static_cast<size_t>(sh.groups) * w_group, 0.0f);
    return true;
  }
  if (g.depthwise()) {
    depthwise_bwd_weights(g, x, dy, dw);
    return true;
  }
  return false;
}

}  // namespace

namespace {

// Backward-weights' GEMMs with the fp32 packers, group after group: dw(v = output channel, u = im2col row) over the
// pixels, KC blocks of pixels visited in increasing order, each adding into dw (a fixed summation order). run is
// the fp32 driver or AMX's (whose v side is rows of pairs, which the vdpbf16ps kernel's own packers do not make).
template <typename Run>
void backward_weights_with(const Conv2dShape& sh, const Geom& g, const float* x, const float* dy, float* dw,
                           Run&& run) {
  const size_t w_group = static_cast<size_t>(g.kg) * g.crs;
  for (int grp = 0; grp < sh.groups; ++grp) {
    const float* xg = x + static_cast<size_t>(grp) * static_cast<size_t>(g.cg) * g.in_plane;
    const float* dyg = dy + static_cast<size_t>(grp) * static_cast<size_t>(g.kg) * g.plane;
    float* dwg = dw + static_cast<size_t>(grp) * w_group;
    const auto pack_dy = [&](dim_t f0, dim_t fb, dim_t p0, dim_t pb, const Panels& out) {
      pack_nchw_channels(dyg, g.y_sample, g.plane, f0, fb, p0, pb, out);
    };
    const auto store = [&](const MicroTile& t) {
      t.compute(dwg + static_cast<size_t>(t.v0) * g.crs + static_cast<size_t>(t.u0), static_cast<inc_t>(g.crs),
                t.first ? 0.0f : 1.0f);
    };
    const auto crs = static_cast<dim_t>(g.crs);
    if (g.identity) {
      run(
          crs, g.kg, g.npix,
          [&](dim_t f0, dim_t fb, dim_t p0, dim_t pb, const Panels& out) {
            pack_nchw_channels(xg, g.x_sample, g.in_plane, f0, fb, p0, pb, out);
          },
          pack_dy, store);
    } else {
      run(
          crs, g.kg, g.npix,
          [&](dim_t f0, dim_t fb, dim_t p0, dim_t pb, const Panels& out) {
            pack_im2col_rows(g, xg, f0, fb, p0, pb, out);
          },
          pack_dy, store);
    }
  }
}

}  // namespace

void conv2d_bwd_weights_convgemm(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db) {
  const Geom g(sh);
  if (bwd_weights_without_gemm(sh, g, x, dy, dw, db)) {
    return;
  }
  const MicroKernel& mk = select_kernel(Pass::kBwdWeights, g);
  backward_weights_with(sh, g, x, dy, dw, fp32_runner(mk, default_blocking(mk)));
}

namespace {

// ---- bf16: the driver of the pair-packed micro-kernels ----

struct Bf16Kernel {
  bf16gemm_ukr_ft ukr;
  Blocking blocking;
  // AMX: the v side packed as rows of pairs rather than panels, pairs of both sides padded with zeros to a multiple
  // of 16 (a tile's depth), and the tiles configured around each product.
  bool amx = false;
};

// MR 32 x NR 8 as avx512_32x8; the cache blocks of skx (KC even, so that pairs never straddle two KC blocks).
const Bf16Kernel& bf16_kernel(Bf16Math math) {
  static const Bf16Kernel native{bf16gemm_ukr_avx512bf16_32x8, {32, 8, 384, 480, 3072}};
  static const Bf16Kernel emulated{bf16gemm_ukr_emulated_32x8, {32, 8, 384, 480, 3072}};
  static const Bf16Kernel amx{bf16gemm_ukr_amx_32x32, {32, 32, 384, 480, 3072}, true};
  if (math == Bf16Math::kEmulated) {
    return emulated;
  }
  if (math == Bf16Math::kAmx) {
    if (!cpu_has_amx_bf16()) {
      throw InvalidArgument(std::string("bf16 convgemm: AMX: this CPU has no AMX-BF16 (TDPBF16PS)") +
                            (cpu_isa_setting().capped() ? " at the level DTNN_MAX_CPU_ISA caps it to" : "") +
                            " or Linux did not grant its tile state, expected an Intel Sapphire Rapids or later, or "
                            "AVX512-BF16 or the emulation");
    }
    return amx;
  }
  if (!cpu_has_avx512_bf16()) {
    throw InvalidArgument(std::string("bf16 convgemm: this CPU has no AVX512-BF16 (vdpbf16ps)") +
                          (cpu_isa_setting().capped() ? " at the level DTNN_MAX_CPU_ISA caps it to" : "") +
                          ", expected a CPU with it (Zen 4 or later, Cooper Lake, Sapphire Rapids) or the emulation");
  }
  return native;
}

struct Bf16Workspace {
  AlignedFloats a, b;
};

Bf16Workspace& bf16_workspace() {
  thread_local Bf16Workspace ws;
  return ws;
}

std::uint32_t* words(AlignedFloats& storage, size_t count) {
  return reinterpret_cast<std::uint32_t*>(storage.reserve(count));
}

// Micro-panels of pair words: `width` free indices, word (f, t) at column(f)[t * width].
struct PairPanels {
  std::uint32_t* base;
  int width;
  dim_t pairs;
  [[nodiscard]] std::uint32_t* column(dim_t f) const { return base + f / width * width * pairs + f % width; }
};

// The bf16 packers gather a micro-panel's rows row-major in fp32 as the fp32 packers do, round each row into pair
// words (its elements 2t and 2t + 1 make word t), and transpose the words into the panel: half the data of the
// fp32 transpose, and no second pass over the packed block. Rows cnt to width of the panel are zero.
void rows_to_pairs(const float* rows, dim_t qb, int cnt, const PairPanels& out, dim_t pan) {
  thread_local AlignedFloats storage;
  const dim_t pairs = (qb + 1) / 2;
  std::uint32_t* const row_words = words(storage, static_cast<size_t>(cnt * pairs));
  const auto round_pairs = cpu_has_avx512() ? round_to_bf16_pairs_avx512 : round_to_bf16_pairs;
  for (int i = 0; i < cnt; ++i) {
    round_pairs(rows + i * qb, qb, row_words + i * pairs);
  }
  // Words moved as floats: transpose_into only copies and shuffles, which keep every bit.
  auto* panel = reinterpret_cast<float*>(out.column(pan));
  transpose_into(reinterpret_cast<const float*>(row_words), static_cast<size_t>(pairs), cnt, pairs, panel, out.width);
  zero_columns(panel, cnt, out.width, pairs);
}

// Free: im2col rows; reduction: output pixels (pack_im2col_rows in pairs).
void pack_im2col_rows_bf16(const Geom& g, const float* xg, dim_t f0, dim_t fb, dim_t q0, dim_t qb,
                           const PairPanels& out) {
  gather_im2col_rows(g, xg, f0, fb, q0, qb, out.width,
                     [&](dim_t pan, int cnt, const float* rows) { rows_to_pairs(rows, qb, cnt, out, pan); });
}

// Free: channels; reduction: pixels of an NCHW tensor t (pack_nchw_channels in pairs). A pair may span two
// samples (planes of odd size), hence the rows are copied out first.
void pack_nchw_channels_bf16(const float* t, size_t sample_stride, size_t plane, dim_t f0, dim_t fb, dim_t q0,
                             dim_t qb, const PairPanels& out) {
  thread_local std::vector<BlockRun> runs;
  thread_local AlignedFloats storage;
  plane_runs(t, sample_stride, plane, static_cast<int>(plane), q0, qb, qb, runs);
  float* const rows = storage.reserve(static_cast<size_t>(out.width) * static_cast<size_t>(qb));
  for (dim_t pan = 0; pan < fb; pan += out.width) {
    const int cnt = static_cast<int>(std::min<dim_t>(out.width, fb - pan));
    for (int i = 0; i < cnt; ++i) {
      const size_t channel = static_cast<size_t>(f0 + pan + i) * plane;
      for (const BlockRun& run : runs) {
        copy_floats(run.src + channel + static_cast<size_t>(run.pixel), run.count, rows + i * qb + run.offset);
      }
    }
    rows_to_pairs(rows, qb, cnt, out, pan);
  }
}

// c(u, v) = sum over k of U(u, k) V(v, k), overwritten, element (u, v) at c[u + v * ldc]: BLIS's loops as gemm()
// runs them, u on the MR side, with the bf16 packers: pack(f0, fb, p0, pb, out) fills PairPanels.
template <typename PackU, typename PackV>
void gemm_bf16(const Bf16Kernel& mk, dim_t nu, dim_t nv, dim_t k, PackU&& pack_u, PackV&& pack_v, float* c,
               inc_t ldc) {
  const Blocking& bs = mk.blocking;
  Bf16Workspace& ws = bf16_workspace();
  const dim_t kpc = (std::min(bs.kc, k) + 1) / 2;
  const dim_t a_panels = (std::min(bs.mc, nu) + bs.mr - 1) / bs.mr;
  const dim_t b_panels = (std::min(bs.nc, nv) + bs.nr - 1) / bs.nr;
  std::uint32_t* const a_block = words(ws.a, static_cast<size_t>(a_panels * bs.mr * kpc));
  std::uint32_t* const b_block = words(ws.b, static_cast<size_t>(b_panels * bs.nr * kpc));
  for (dim_t jc = 0; jc < nv; jc += bs.nc) {
    const dim_t nb = std::min(bs.nc, nv - jc);
    for (dim_t pc = 0; pc < k; pc += bs.kc) {
      const dim_t kb = std::min(bs.kc, k - pc);
      const dim_t kp = (kb + 1) / 2;
      pack_v(jc, nb, pc, kb, PairPanels{b_block, static_cast<int>(bs.nr), kp});
      const float beta = pc == 0 ? 0.0f : 1.0f;
      for (dim_t ic = 0; ic < nu; ic += bs.mc) {
        const dim_t mb = std::min(bs.mc, nu - ic);
        pack_u(ic, mb, pc, kb, PairPanels{a_block, static_cast<int>(bs.mr), kp});
        for (dim_t jr = 0; jr < nb; jr += bs.nr) {
          for (dim_t ir = 0; ir < mb; ir += bs.mr) {
            mk.ukr(std::min(bs.mr, mb - ir), std::min(bs.nr, nb - jr), kp, a_block + ir * kp, b_block + jr * kp,
                   beta, c + (ic + ir) + (jc + jr) * ldc, ldc);
          }
        }
      }
    }
  }
}

// fp32 micro-panels (`width` free indices, kb reduction indices each, contiguous) -> pair panels of the same
// widths ((kb + 1) / 2 words each). Whole blocks at once when kb is even (then pairs never straddle two panels).
// Each pair panel holds kp_stride rows of words (kp_stride >= (kb + 1) / 2), the rows past the reduction zero.
void panels_to_pairs(const float* src, int width, dim_t kb, dim_t panels, dim_t kp_stride, std::uint32_t* dst) {
  const auto convert = cpu_has_avx512() ? rows_to_bf16_pairs_avx512 : rows_to_bf16_pairs;
  const dim_t kp = (kb + 1) / 2;
  if (kb % 2 == 0 && kp_stride == kp) {
    convert(src, width, panels * kb, dst);
    return;
  }
  for (dim_t p = 0; p < panels; ++p) {
    std::uint32_t* panel = dst + p * width * kp_stride;
    convert(src + p * width * kb, width, kb, panel);
    std::fill(panel + width * kp, panel + width * kp_stride, 0u);
  }
}

// fp32 micro-panels as above -> rows of pairs, AMX's v side: free index f of panel p at dst[(p * width + f) *
// kp_stride + t], pairs past the reduction zero. Each panel is paired as panels_to_pairs pairs it, then its words
// transposed (transpose_into only moves bits).
void panels_to_pair_rows(const float* src, int width, dim_t kb, dim_t panels, dim_t kp_stride, std::uint32_t* dst) {
  thread_local AlignedFloats storage;
  const dim_t kp = (kb + 1) / 2;
  std::uint32_t* const paired = words(storage, static_cast<size_t>(width * kp));
  const auto convert = cpu_has_avx512() ? rows_to_bf16_pairs_avx512 : rows_to_bf16_pairs;
  for (dim_t p = 0; p < panels; ++p) {
    convert(src + p * width * kb, width, kb, paired);
    std::uint32_t* const rows = dst + p * width * kp_stride;
    transpose_into(reinterpret_cast<const float*>(paired), static_cast<size_t>(width), static_cast<int>(kp), width,
                   reinterpret_cast<float*>(rows), static_cast<int>(kp_stride));
    if (kp_stride > kp) {
      for (int f = 0; f < width; ++f) {
        std::fill(rows + f * kp_stride + kp, rows + (f + 1) * kp_stride, 0u);
      }
    }
  }
}

// The u side's block as pair panels, packed by the fp32 packer `pack_u` a chunk of 32 reduction indices at a time
// and each chunk rounded into its 16 rows of pairs right away, while it is in cache (61 KB at MC 480, against 737 KB
// for a whole fp32 block of MC x KC). The same words as packing the whole block, then panels_to_pairs. Measured
// with AMX (conv_layers, one core, forward and backward-data): +6-11% on 3x3 layers of 64 to 512 channels and
// 1x1/2 projections against the whole block; chunks of 16 gain less (the packers' set-up per call), of 64 the same.
// A block of odd length (a whole reduction, kb odd) is packed whole.
template <typename PackU>
void pack_u_pairs(PackU&& pack_u, const Blocking& bs, dim_t ic, dim_t mb, dim_t pc, dim_t kb, dim_t kp_stride,
                  float* fp32, std::uint32_t* dst) {
  const int width = static_cast<int>(bs.mr);
  const dim_t panels = (mb + bs.mr - 1) / bs.mr;
  if (kb % 2 != 0) {
    pack_u(ic, mb, pc, kb, Panels{fp32, width, bs.mr * kb});
    panels_to_pairs(fp32, width, kb, panels, kp_stride, dst);
    return;
  }
  constexpr dim_t kChunk = 32;
  const auto convert = cpu_has_avx512() ? rows_to_bf16_pairs_avx512 : rows_to_bf16_pairs;
  for (dim_t k0 = 0; k0 < kb; k0 += kChunk) {
    const dim_t kc = std::min(kChunk, kb - k0);  // even: kb and kChunk are
    pack_u(ic, mb, pc + k0, kc, Panels{fp32, width, bs.mr * kc});
    for (dim_t p = 0; p < panels; ++p) {
      convert(fp32 + p * bs.mr * kc, width, kc, dst + p * bs.mr * kp_stride + k0 / 2 * bs.mr);
    }
  }
  const dim_t kp = kb / 2;
  if (kp_stride > kp) {
    for (dim_t p = 0; p < panels; ++p) {
      std::fill(dst + p * bs.mr * kp_stride + kp * bs.mr, dst + (p + 1) * bs.mr * kp_stride, 0u);
    }
  }
}

// gemm() with the bf16 micro-kernels, for the passes written against the fp32 packers and epilogues (forward and
// backward-data): each block is packed in fp32 by those packers, then rounded into pair panels (the u side's chunk
// by chunk, pack_u_pairs); tiles reach the epilogue as in gemm(), u on the MR side, and their compute() runs the bf16
// kernel. KC is even (but for a whole reduction of odd length, which is then one block) so that pairs never straddle
// two KC blocks.
template <typename PackU, typename PackV, typename Epilogue>
void gemm_bf16_tiles(const Bf16Kernel& mk, const Blocking& bs, dim_t nu, dim_t nv, dim_t k, PackU&& pack_u,
                     PackV&& pack_v, Epilogue&& epilogue) {
  Workspace& fp32 = workspace();
  Bf16Workspace& ws = bf16_workspace();
  const dim_t kc = std::min(bs.kc, k);
  // Pairs a panel holds: AMX's tiles take them 16 at a time.
  const auto padded = [&](dim_t kb) { return mk.amx ? ((kb + 1) / 2 + 15) / 16 * 16 : (kb + 1) / 2; };
  const dim_t a_panels = (std::min(bs.mc, nu) + bs.mr - 1) / bs.mr;
  const dim_t b_panels = (std::min(bs.nc, nv) + bs.nr - 1) / bs.nr;
  float* const a_fp32 = fp32.a.reserve(static_cast<size_t>(a_panels * bs.mr * kc));
  float* const b_fp32 = fp32.b.reserve(static_cast<size_t>(b_panels * bs.nr * kc));
  std::uint32_t* const a_block = words(ws.a, static_cast<size_t>(a_panels * bs.mr * padded(kc)));
  std::uint32_t* const b_block = words(ws.b, static_cast<size_t>(b_panels * bs.nr * padded(kc)));
  struct AmxTiles {
    bool on;
    explicit AmxTiles(bool amx) : on(amx) {
      if (on) bf16_amx_begin();
    }
    ~AmxTiles() {
      if (on) bf16_amx_end();
    }
    AmxTiles(const AmxTiles&) = delete;
    AmxTiles& operator=(const AmxTiles&) = delete;
  } tiles(mk.amx);
  MicroTile t{};
  t.bf16_ukr = mk.ukr;
  t.buffer = fp32.tile.reserve(static_cast<size_t>(bs.mr * bs.nr));
  t.buffer_ld = bs.mr;
  for (dim_t jc = 0; jc < nv; jc += bs.nc) {
    const dim_t nb = std::min(bs.nc, nv - jc);
    for (dim_t pc = 0; pc < k; pc += bs.kc) {
      const dim_t kb = std::min(bs.kc, k - pc);
      const dim_t kp = padded(kb);
      pack_v(jc, nb, pc, kb, Panels{b_fp32, static_cast<int>(bs.nr), bs.nr * kb});
      if (mk.amx) {
        panels_to_pair_rows(b_fp32, static_cast<int>(bs.nr), kb, (nb + bs.nr - 1) / bs.nr, kp, b_block);
      } else {
        panels_to_pairs(b_fp32, static_cast<int>(bs.nr), kb, (nb + bs.nr - 1) / bs.nr, kp, b_block);
      }
      t.kb = kp;
      t.first = pc == 0;
      t.last = pc + kb == k;
      for (dim_t ic = 0; ic < nu; ic += bs.mc) {
        const dim_t mb = std::min(bs.mc, nu - ic);
        pack_u_pairs(pack_u, bs, ic, mb, pc, kb, kp, a_fp32, a_block);
        for (dim_t jr = 0; jr < nb; jr += bs.nr) {
          for (dim_t ir = 0; ir < mb; ir += bs.mr) {
            t.a = reinterpret_cast<float*>(a_block + ir * kp);
            t.b = reinterpret_cast<float*>(b_block + jr * kp);
            t.u0 = ic + ir;
            t.v0 = jc + jr;
            t.mu = std::min(bs.mr, mb - ir);
            t.mv = std::min(bs.nr, nb - jr);
            epilogue(static_cast<const MicroTile&>(t));
          }
        }
      }
    }
  }
}

auto bf16_runner(const Bf16Kernel& mk, const Blocking& bs) {
  return [&mk, bs](dim_t nu, dim_t nv, dim_t k, auto&& pack_u, auto&& pack_v, auto&& epilogue) {
    gemm_bf16_tiles(mk, bs, nu, nv, k, pack_u, pack_v, epilogue);
  };
}

}  // namespace

void conv2d_fwd_convgemm_bf16(const Conv2dShape& sh, const float* x, const float* w, const float* b, int relu,
                              float* y, Bf16Math math) {
  const Bf16Kernel& mk = bf16_kernel(math);
  forward_pass(sh, x, w, b, relu, y, [&](const Geom&) { return bf16_runner(mk, mk.blocking); });
}

void conv2d_bwd_data_convgemm_bf16(const Conv2dShape& sh, const float* dy, const float* w, float* dx,
                                   Bf16Math math) {
  const Bf16Kernel& mk = bf16_kernel(math);
  const Geom g(sh);
  if (bwd_data_without_gemm(g, dy, w, dx)) {
    return;
  }
  backward_data_with(
      sh, g, dy, w, dx, [&](const Geom&) { return bf16_runner(mk, mk.blocking); },
      [&](dim_t k) { return bf16_runner(mk, whole_reduction_blocking(mk.blocking, k)); });
}

void conv2d_bwd_weights_convgemm_bf16(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db,
                                      Bf16Math math) {
  const Bf16Kernel& mk = bf16_kernel(math);
  const Geom g(sh);
  if (bwd_weights_without_gemm(sh, g, x, dy, dw, db)) {
    return;
  }
  if (mk.amx) {
    // AMX's v side is rows of pairs: the fp32 packers and the tile driver.
    backward_weights_with(sh, g, x, dy, dw, bf16_runner(mk, mk.blocking));
    return;
  }
  const size_t w_group = static_cast<size_t>(g.kg) * g.crs;
  const auto crs = static_cast<dim_t>(g.crs);
  for (int grp = 0; grp < sh.groups; ++grp) {
    const float* xg = x + static_cast<size_t>(grp) * static_cast<size_t>(g.cg) * g.in_plane;
    const float* dyg = dy + static_cast<size_t>(grp) * static_cast<size_t>(g.kg) * g.plane;
    float* dwg = dw + static_cast<size_t>(grp) * w_group;
    const auto pack_dy = [&](dim_t f0, dim_t fb, dim_t p0, dim_t pb, const PairPanels& out) {
      pack_nchw_channels_bf16(dyg, g.y_sample, g.plane, f0, fb, p0, pb, out);
    };
    if (g.identity) {
      gemm_bf16(
          mk, crs, g.kg, g.npix,
          [&](dim_t f0, dim_t fb, dim_t p0, dim_t pb, const PairPanels& out) {
            pack_nchw_channels_bf16(xg, g.x_sample, g.in_plane, f0, fb, p0, pb, out);
          },
          pack_dy, dwg, crs);
    } else {
      gemm_bf16(
          mk, crs, g.kg, g.npix,
          [&](dim_t f0, dim_t fb, dim_t p0, dim_t pb, const PairPanels& out) {
            pack_im2col_rows_bf16(g, xg, f0, fb, p0, pb, out);
          },
          pack_dy, dwg, crs);
    }
  }
}

std::size_t convgemm_bf16_workspace_bytes(const Conv2dShape& sh) {
  const Geom g(sh);
  if (g.npix == 0 || g.kg <= 0 || g.depthwise()) {
    return 0;
  }
  const Blocking& bs = bf16_kernel(Bf16Math::kEmulated).blocking;
  const auto crs = static_cast<dim_t>(g.crs);
  const dim_t kc = std::min(bs.kc, g.npix);
  const dim_t a = (std::min(bs.mc, crs) + bs.mr - 1) / bs.mr * bs.mr;
  const dim_t b = (std::min(bs.nc, static_cast<dim_t>(g.kg)) + bs.nr - 1) / bs.nr * bs.nr;
  // Backward-weights: the two blocks of pairs, the packers' fp32 rows of a micro-panel and their words.
  const dim_t bwd_weights = (a + b) * ((kc + 1) / 2) + bs.mr * kc * 2;
  // Forward and backward-data: the fp32 blocks as packed, their pairs, and the tile buffer.
  const auto packed = [&](const Blocking& b2, dim_t nu, dim_t nv, dim_t k) {
    const dim_t kb = std::min(b2.kc, k);
    const dim_t u = (std::min(b2.mc, nu) + b2.mr - 1) / b2.mr * b2.mr;
    const dim_t v = (std::min(b2.nc, nv) + b2.nr - 1) / b2.nr * b2.nr;
    return (u + v) * (kb + (kb + 1) / 2) + b2.mr * b2.nr;
  };
  const dim_t fwd = packed(bs, g.npix, g.kg, crs);
  dim_t bwd_data = packed(whole_reduction_blocking(bs, g.kg), g.npix, crs, g.kg);
  if (dual_forward_fits(sh, g)) {
    const Geom dual(dual_shape(sh));
    bwd_data = packed(bs, dual.npix, dual.kg, static_cast<dim_t>(dual.crs));
  }
  return static_cast<size_t>(std::max({bwd_weights, fwd, bwd_data})) * sizeof(float);
}

std::size_t convgemm_workspace_bytes(const Conv2dShape& sh) {
  const Geom g(sh);
  if (g.npix == 0 || g.kg <= 0 || g.depthwise()) {
    return 0;
  }
  const auto crs = static_cast<dim_t>(g.crs);
  const MicroKernel& mk_fwd = select_kernel(Pass::kFwd, g);
  const MicroKernel& mk_bwd_data = select_kernel(Pass::kBwdData, g);
  const MicroKernel& mk_bwd_weights = select_kernel(Pass::kBwdWeights, g);
  const size_t fwd = gemm_pack_bytes(mk_fwd, default_blocking(mk_fwd), g.npix, g.kg, crs);
  size_t bwd_data = gemm_pack_bytes(mk_bwd_data, whole_reduction_blocking(mk_bwd_data, g.kg), g.npix, crs, g.kg);
  if (dual_forward_fits(sh, g)) {
    const Geom dual(dual_shape(sh));
    const MicroKernel& mk = select_kernel(Pass::kFwd, dual);
    bwd_data = gemm_pack_bytes(mk, default_blocking(mk), dual.npix, dual.kg, static_cast<dim_t>(dual.crs));
  }
  // Backward-weights gathers each micro-panel of the transposed im2col matrix row-major before transposing it.
  const Blocking bs = default_blocking(mk_bwd_weights);
  const dim_t gathered = g.identity ? 0 : (mk_bwd_weights.contiguous_on_mr ? bs.mr : bs.nr) * std::min(bs.kc, g.npix);
  const size_t bwd_weights =
      gemm_pack_bytes(mk_bwd_weights, bs, crs, g.kg, g.npix) + static_cast<size_t>(gathered) * sizeof(float);
  size_t tile = 0;
  for (const MicroKernel* mk : {&mk_fwd, &mk_bwd_data, &mk_bwd_weights}) {
    tile = std::max(tile, static_cast<size_t>(mk->blocking.mr * mk->blocking.nr) * sizeof(float));
  }
  return std::max({fwd, bwd_data, bwd_weights}) + tile;
}

std::size_t im2col_workspace_bytes(const Conv2dShape& sh) {
  const Geom g(sh);
  if (g.npix == 0 || g.kg <= 0) {
    return 0;
  }
  // One sample and group at a time: the im2col matrix of that sample, then BLIS's packed blocks of each
  // per-sample GEMM (same block sizes as above).
  const auto crs = static_cast<dim_t>(g.crs);
  const auto plane = static_cast<dim_t>(g.plane);
  const MicroKernel& mk = blis_kernel();
  const Blocking bs = default_blocking(mk);
  const size_t col = g.identity ? 0 : g.crs * g.plane * sizeof(float);
  const size_t fwd = gemm_pack_bytes(mk, bs, plane, g.kg, crs);
  const size_t bwd_data = gemm_pack_bytes(mk, bs, plane, crs, g.kg);
  const size_t bwd_weights = gemm_pack_bytes(mk, bs, crs, g.kg, plane);
  return col + std::max({fwd, bwd_data, bwd_weights});
}

}  // namespace dtnn::kernels::cpu
