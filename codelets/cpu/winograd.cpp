// SPDX-License-Identifier: Apache-2.0
// Winograd's entry points: which instruction set runs a call (winograd_avx512.cpp, winograd_avx2.cpp), the shapes
// it serves and its working memory. The algorithm is in winograd_impl.hpp.
#include "codelets/cpu/winograd.hpp"

#include <algorithm>
#include <atomic>
#include <stdexcept>

#include "codelets/cpu/winograd_call.hpp"
#include "core/cpu_features.hpp"

namespace dtnn::kernels::cpu {
namespace {

using std::size_t;

struct Variant {
  const char* name;  // the micro-kernel's, as convgemm names it
  void (*run)(const WinogradCall&);
  int mr, nr;
};

// Those this CPU runs, the widest first (the selection).
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
    throw std::logic_error("winograd: no micro-kernel on this CPU (winograd_fits is false; the caller must check)");
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

size_t workspace_floats(const WinogradCall& call, const Variant& v) {
  const int oh = call.h + call.pad_top + call.pad_bottom - 2;
  const int ow = call.w + call.pad_left + call.pad_right - 2;
  const size_t tiles = static_cast<size_t>(call.n) * static_cast<size_t>((oh + 1) / 2) *
                       static_cast<size_t>((ow + 1) / 2);
  const size_t chunk = winograd_chunk_tiles(tiles, call.c, call.k, v.mr, v.nr);
  const size_t kp = (static_cast<size_t>(call.k) + static_cast<size_t>(v.nr) - 1) / static_cast<size_t>(v.nr) *
                    static_cast<size_t>(v.nr);
  const auto c = static_cast<size_t>(call.c);
  return 16 * (kp * c + chunk * c + chunk * kp + static_cast<size_t>(v.mr));
}

}  // namespace

size_t winograd_chunk_tiles(size_t tiles, int c, int k, int mr, int nr) {
  // The chunk's transformed input and products, 16 x chunk x (c + k) floats, about 1 MiB (Zen 5 and Zen 3 cores
  // have 1 MiB and 512 KiB of L2) where the weights are small; where they are large, at least c k / (c + k) tiles,
  // so that reading the transformed weights once per chunk (16 c k floats) costs no more than the chunk's own
  // traffic (measured in docs/design.md, Convolution).
  constexpr size_t kBudgetFloats = size_t{1} << 18;
  const auto m = static_cast<size_t>(mr);
  const auto cc = static_cast<size_t>(std::max(c, 1));
  const size_t kp = (static_cast<size_t>(std::max(k, 0)) + static_cast<size_t>(nr) - 1) / static_cast<size_t>(nr) *
                    static_cast<size_t>(nr);
  const size_t by_cache = kBudgetFloats / (16 * (cc + kp));
  const size_t by_weights = cc * kp / (cc + kp);
  const size_t want = (std::max(by_cache, by_weights) + m - 1) / m * m;
  return std::min(std::max(want, m), (tiles + m - 1) / m * m);
}

bool winograd_fits(const Conv2dShape& sh) {
  const auto pad_ok = [](int p) { return p >= 0 && p <= 2; };
  return variant() != nullptr && sh.r == 3 && sh.s == 3 && sh.stride_h == 1 && sh.stride_w == 1 && sh.dil_h == 1 &&
         sh.dil_w == 1 && sh.groups == 1 && pad_ok(sh.pad_top) && pad_ok(sh.pad_bottom) && pad_ok(sh.pad_left) &&
         pad_ok(sh.pad_right) && sh.out_h() > 0 && sh.out_w() > 0;
}

bool winograd_pays(const Conv2dShape& sh) {
  return winograd_fits(sh) && sh.c >= 16 && sh.k >= 16 && sh.out_h() * sh.out_w() >= 16;
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
  return std::max(workspace_floats(forward_call(sh), *v), workspace_floats(dual_call(sh), *v)) * sizeof(float);
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
  throw std::invalid_argument("winograd: micro-kernel '" + name + "' is not one this CPU runs, expected auto" +
                              (known.empty() ? std::string() : " or one of " + known));
}

}  // namespace dtnn::kernels::cpu
