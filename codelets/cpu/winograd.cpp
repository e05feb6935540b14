// SPDX-License-Identifier: Apache-2.0
// Winograd's entry points: which instruction set runs a call (winograd_avx512.cpp, winograd_avx2.cpp), the shapes
// it serves and its working memory. The algorithm is in winograd_impl.hpp.
#include "codelets/cpu/winograd.hpp"

#include <algorithm>
#include <atomic>
#include <string>

#include "codelets/cpu/winograd_call.hpp"
#include "core/cpu_features.hpp"
#include "core/errors.hpp"

namespace dtnn::kernels::cpu {
namespace {

using std::size_t;

struct Variant {
  const char* name;  // the micro-kernel's, as convgemm names it
  void (*run)(const WinogradCall&);
  int mr, nr;
};

// Those this CPU runs at the level DTNN_MAX_CPU_ISA caps it to, the widest first (the selection).
const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = [] {
    std::vector<Variant> list;
#if defined(__x86_64__)
    if (cpu_has_avx512()) {
      list.push_back({"avx512_32x8", winograd_convolve_avx512, 32, 8});
    }
    if (cpu_has_avx2_fma()) {
      list.push_back({"avx2_24x4", winograd_convolve_avx2, 24, 4});
    }
#endif
    return list;
  }();
  return v;
}

std::atomic<const Variant*>& forced() {
  static std::atomic<const Variant*> v{nullptr};
  return v;
}

const Variant* variant() {
  if (const Variant* f = forced().load(std::memory_order_relaxed)) {
    return f;
  }
  return variants().empty() ? nullptr : &variants().front();
}

// The selection, for a call the caller has checked with winograd_fits.
const Variant& runnable_variant() {
  const Variant* v = variant();
  if (v == nullptr) {
    throw InvalidArgument(std::string("winograd: instruction-set level ") + cpu_isa_name(cpu_isa_setting().effective) +
                          ", expected avx2 or avx512 (winograd_fits is false: the caller must check it first)");
  }
  return *v;
}

WinogradCall forward_call(const Conv2dShape& sh) {
  return WinogradCall{sh.n,     sh.c,    sh.h,    sh.w, sh.k, sh.pad_top, sh.pad_bottom, sh.pad_left, sh.pad_right,
                      nullptr, nullptr, WinogradWeights::kForward, nullptr, 0, nullptr};
}

// Backward-data's dual: dy [n, k, oh, ow] convolved into dx [n, c, h, w] by the flipped, swapped weights, padding
// 2 - pad on each side.
WinogradCall dual_call(const Conv2dShape& sh) {
  return WinogradCall{sh.n,        sh.k,           sh.out_h(),      sh.out_w(),      sh.c,    2 - sh.pad_top,
                      2 - sh.pad_bottom, 2 - sh.pad_left, 2 - sh.pad_right, nullptr, nullptr, WinogradWeights::kFlipped,
                      nullptr,    0,              nullptr};
}

std::size_t round_up(std::size_t x, std::size_t to) { return (x + to - 1) / to * to; }

// Floats of transformed weights held at a time: 4 MiB. Up to c k = 256 x 256 they are all held for the whole call;
// beyond (512 x 512: 16 MiB of them per worker), blocks of output channels, each transformed and used for a chunk
// before the next. Calls of those deep layers are usually one chunk (kBlockedInputFloats), so each block is
// transformed once; where there are more, each chunk transforms the blocks again.
constexpr std::size_t kWeightBlockFloats = std::size_t{1} << 20;
// Floats of a chunk's transformed input and products together: about 1 MiB (Zen 5 and Zen 3 cores have 1 MiB and
// 512 KiB of L2).
constexpr std::size_t kChunkFloats = std::size_t{1} << 18;
// Where the weights go in blocks, a chunk takes every tile of the call up to 8 MiB of transformed input, so that
// each block is transformed once (512->512 @4, 256 tiles in two chunks: 0.9x of one).
constexpr std::size_t kBlockedInputFloats = std::size_t{1} << 21;
// The fewest output tiles a call needs for Winograd to pay (winograd_pays): the weight transform costs the same for
// any batch (16 c k floats written, 9 c k read), and below this it outweighs the GEMMs it saves.
constexpr int kMinTiles = 32;

}  // namespace

WinogradPlan winograd_plan(const WinogradCall& call, int mr, int nr) {
  WinogradPlan p{};
  p.oh = call.h + call.pad_top + call.pad_bottom - 2;
  p.ow = call.w + call.pad_left + call.pad_right - 2;
  p.th = (std::max(p.oh, 0) + 1) / 2;
  p.tw = (std::max(p.ow, 0) + 1) / 2;
  p.tiles = static_cast<size_t>(std::max(call.n, 0)) * static_cast<size_t>(p.th) * static_cast<size_t>(p.tw);
  const auto m = static_cast<size_t>(mr);
  const auto r = static_cast<size_t>(nr);
  const auto c = static_cast<size_t>(std::max(call.c, 1));
  p.kp = round_up(static_cast<size_t>(std::max(call.k, 0)), r);
  p.kb = std::min(p.kp, std::max(r, kWeightBlockFloats / (16 * c) / r * r));
  // The chunk: about kChunkFloats where the weights are small; where they are large, at least c kb / (c + kb)
  // tiles, so that reading the block of transformed weights once per chunk (16 c kb floats) costs no more than the
  // chunk's own traffic (measured in docs/design.md, Convolution); where they are in blocks, up to
  // kBlockedInputFloats. Whole MR panels, not beyond the call's tiles.
  const size_t by_cache = kChunkFloats / (16 * (c + p.kb));
  const size_t by_weights = c * p.kb / (c + p.kb);
  const size_t by_blocks = p.kb < p.kp ? kBlockedInputFloats / (16 * c) : 0;
  p.chunk = std::min(std::max(round_up(std::max({by_cache, by_weights, by_blocks}), m), m), round_up(p.tiles, m));
  return p;
}

size_t winograd_workspace_floats(const WinogradPlan& plan, int c, int mr) {
  const auto cc = static_cast<size_t>(std::max(c, 0));
  return 16 * (plan.kb * cc + plan.chunk * cc + plan.chunk * plan.kb + static_cast<size_t>(mr));
}

bool winograd_fits(const Conv2dShape& sh) {
  const auto pad_ok = [](int p) { return p >= 0 && p <= 2; };
  return variant() != nullptr && sh.r == 3 && sh.s == 3 && sh.stride_h == 1 && sh.stride_w == 1 && sh.dil_h == 1 &&
         sh.dil_w == 1 && sh.groups == 1 && pad_ok(sh.pad_top) && pad_ok(sh.pad_bottom) && pad_ok(sh.pad_left) &&
         pad_ok(sh.pad_right) && sh.out_h() > 0 && sh.out_w() > 0;
}

int winograd_min_batch(const Conv2dShape& sh) {
  if (!winograd_fits(sh) || sh.c < 16 || sh.k < 16 || sh.out_h() < 2 || sh.out_w() < 2) return 0;
  const int per_sample = ((sh.out_h() + 1) / 2) * ((sh.out_w() + 1) / 2);
  return (kMinTiles + per_sample - 1) / per_sample;
}

bool winograd_pays(const Conv2dShape& sh) {
  const int min_batch = winograd_min_batch(sh);
  return min_batch > 0 && sh.n >= min_batch;
}

void conv2d_fwd_winograd(const Conv2dShape& sh, const float* x, const float* w, const float* b, int relu, float* y) {
  const Variant* v = &runnable_variant();
  WinogradCall call = forward_call(sh);
  call.in = x;
  call.w_data = w;
  call.bias = b;
  call.relu = relu;
  call.out = y;
  v->run(call);
}

void conv2d_bwd_data_winograd(const Conv2dShape& sh, const float* dy, const float* w, float* dx) {
  const Variant* v = &runnable_variant();
  WinogradCall call = dual_call(sh);
  call.in = dy;
  call.w_data = w;
  call.out = dx;
  v->run(call);
}

std::size_t winograd_workspace_bytes(const Conv2dShape& sh) {
  const Variant* v = variant();
  if (v == nullptr || !winograd_fits(sh) || sh.n <= 0) {
    return 0;
  }
  const WinogradCall fwd = forward_call(sh);
  const WinogradCall dual = dual_call(sh);
  return std::max(winograd_workspace_floats(winograd_plan(fwd, v->mr, v->nr), fwd.c, v->mr),
                  winograd_workspace_floats(winograd_plan(dual, v->mr, v->nr), dual.c, v->mr)) *
         sizeof(float);
}

std::vector<std::string> winograd_ukernels() {
  std::vector<std::string> names;
  for (const Variant& v : variants()) {
    names.emplace_back(v.name);
  }
  return names;
}

void winograd_force_ukernel(const std::string& name) {
  if (name.empty() || name == "auto") {
    forced().store(nullptr);
    return;
  }
  for (const Variant& v : variants()) {
    if (name == v.name) {
      forced().store(&v);
      return;
    }
  }
  std::string known;
  for (const std::string& n : winograd_ukernels()) {
    known += (known.empty() ? "" : ", ") + n;
  }
  const std::string level = cpu_isa_name(cpu_isa_setting().effective);
  throw InvalidArgument("winograd micro-kernel: '" + name + "', expected auto" +
                        (known.empty() ? " (this CPU runs none at level " + level + ")"
                                       : " or one this CPU runs at level " + level + ": " + known));
}

}  // namespace dtnn::kernels::cpu
