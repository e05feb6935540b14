// SPDX-License-Identifier: Apache-2.0
#include "codelets/cpu/onednn_conv.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "codelets/cpu/aligned_floats.hpp"
#include "core/errors.hpp"

#if DTNN_HAVE_ONEDNN
#include <omp.h>

#include <dnnl.hpp>
#endif

namespace dtnn::kernels::cpu {
namespace {

std::string geometry(const Conv2dShape& s) {
  const auto n = [](int v) { return std::to_string(v); };
  return n(s.n) + "x" + n(s.c) + "x" + n(s.h) + "x" + n(s.w) + " -> " + n(s.k) + " channels, " + n(s.r) + "x" +
         n(s.s) + " kernel, stride " + n(s.stride_h) + "x" + n(s.stride_w) + ", padding " + n(s.pad_top) + "," +
         n(s.pad_bottom) + "," + n(s.pad_left) + "," + n(s.pad_right) + ", dilation " + n(s.dil_h) + "x" +
         n(s.dil_w) + ", groups " + n(s.groups);
}

std::vector<int> key_of(const Conv2dShape& s) {
  return {s.n,        s.c,          s.h,           s.w,        s.k,         s.r,     s.s,     s.stride_h,
          s.stride_w, s.pad_top,    s.pad_bottom,  s.pad_left, s.pad_right, s.dil_h, s.dil_w, s.groups};
}

#if DTNN_HAVE_ONEDNN
using dnnl::memory;
using Tag = memory::format_tag;
using Type = memory::data_type;

// An operand of a primitive: the caller's fp32 tensor (user) and the layout the primitive takes (inner); where they
// differ, a reorder between them and a place in the working memory for the inner copy.
struct Operand {
  int arg = 0;
  memory::desc user, inner;
  std::optional<dnnl::reorder> reorder;
  std::size_t offset = 0;
};

// One pass of one geometry, ready to run: its inputs reordered before, its output after, the scratchpad and the
// inner copies in one block of working memory of `bytes`.
struct Prepared {
  dnnl::primitive conv;
  std::vector<Operand> inputs;
  Operand output;
  std::vector<std::pair<int, memory::desc>> direct;  // passed as they are (bias, bias gradient)
  memory::desc scratchpad;
  std::size_t scratch_offset = 0, bytes = 0;
  std::string impl;
};

// What every thread that runs oneDNN holds: an engine, a stream, the primitives it created, working memory.
struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<std::vector<int>, Prepared> prepared;
  AlignedFloats memory_block;
  Context() {
    // Debian's oneDNN is an OpenMP build: one thread here, as each task runs on one worker.
    omp_set_num_threads(1);
  }
};

// Created at the thread's first oneDNN convolution.
std::unique_ptr<Context>& this_thread() {
  thread_local std::unique_ptr<Context> c;
  return c;
}

Context& context() {
  std::unique_ptr<Context>& c = this_thread();
  if (!c) c = std::make_unique<Context>();
  return *c;
}

struct Descs {
  memory::desc x, w, b, y;  // the caller's: fp32 NCHW, (G)OIHW, X
  memory::dims x_dims, w_dims, y_dims, strides, dilates, pad_l, pad_r;
};

// bf16_x, bf16_y: x (and dx), y (and dy) are bf16 NCHW tensors (core/dtype.hpp's kBFloat16).
Descs descs(const Conv2dShape& s, bool bf16_x, bool bf16_y) {
  Descs d;
  d.x_dims = {s.n, s.c, s.h, s.w};
  d.y_dims = {s.n, s.k, s.out_h(), s.out_w()};
  const bool grouped = s.groups > 1;
  d.w_dims = grouped ? memory::dims{s.groups, s.k / s.groups, s.c / s.groups, s.r, s.s}
                     : memory::dims{s.k, s.c, s.r, s.s};
  d.x = memory::desc(d.x_dims, bf16_x ? Type::bf16 : Type::f32, Tag::nchw);
  d.y = memory::desc(d.y_dims, bf16_y ? Type::bf16 : Type::f32, Tag::nchw);
  d.w = memory::desc(d.w_dims, Type::f32, grouped ? Tag::goihw : Tag::oihw);
  d.b = memory::desc({s.k}, Type::f32, Tag::x);
  d.strides = {s.stride_h, s.stride_w};
  d.dilates = {s.dil_h - 1, s.dil_w - 1};
  d.pad_l = {s.pad_top, s.pad_left};
  d.pad_r = {s.pad_bottom, s.pad_right};
  return d;
}

memory::desc any(const memory::dims& dims, Type t) { return {dims, t, Tag::any}; }

constexpr std::size_t kAlign = 64;
std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

Operand operand(const dnnl::engine& e, int arg, const memory::desc& user, const memory::desc& inner, bool input,
                std::size_t& bytes) {
  Operand o;
  o.arg = arg;
  o.user = user;
  o.inner = inner;
  if (user != inner) {
    o.reorder = input ? dnnl::reorder(dnnl::reorder::primitive_desc(e, user, e, inner))
                      : dnnl::reorder(dnnl::reorder::primitive_desc(e, inner, e, user));
    o.offset = bytes;
    bytes += aligned(inner.get_size());
  }
  return o;
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::convolution_forward::primitive_desc forward_pd(const Descs& d, bool bias, int relu, const dnnl::engine& e) {
  const auto algo = dnnl::algorithm::convolution_direct;
  const auto prop = dnnl::prop_kind::forward_training;
  // A bf16 output is rounded by the convolution as it stores (no fp32 copy and reorder).
  const memory::desc x = any(d.x_dims, Type::bf16), w = any(d.w_dims, Type::bf16),
                     y = any(d.y_dims, d.y.data_type());
  dnnl::primitive_attr attr = user_scratchpad();
  if (relu != 0) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  return bias ? dnnl::convolution_forward::primitive_desc(
                    {prop, algo, x, w, d.b, y, d.strides, d.dilates, d.pad_l, d.pad_r}, attr, e)
              : dnnl::convolution_forward::primitive_desc(
                    {prop, algo, x, w, y, d.strides, d.dilates, d.pad_l, d.pad_r}, attr, e);
}

Prepared prepare(const Conv2dShape& s, ConvPass pass, bool bias, int relu, bool bf16_x, bool bf16_y,
                 const dnnl::engine& e) {
  const Descs d = descs(s, bf16_x, bf16_y);
  const auto algo = dnnl::algorithm::convolution_direct;
  Prepared p;
  std::size_t bytes = 0;
  if (pass == ConvPass::kFwd) {
    const auto pd = forward_pd(d, bias, relu, e);
    p.conv = dnnl::convolution_forward(pd);
    p.inputs = {operand(e, DNNL_ARG_SRC, d.x, pd.src_desc(), true, bytes),
                operand(e, DNNL_ARG_WEIGHTS, d.w, pd.weights_desc(), true, bytes)};
    p.output = operand(e, DNNL_ARG_DST, d.y, pd.dst_desc(), false, bytes);
    if (bias) p.direct.emplace_back(DNNL_ARG_BIAS, pd.bias_desc());
    p.scratchpad = pd.scratchpad_desc();
    p.impl = pd.impl_info_str();
  } else if (pass == ConvPass::kBwdData) {
    const auto hint = forward_pd(d, false, 0, e);
    const dnnl::convolution_backward_data::primitive_desc pd(
        {algo, any(d.x_dims, d.x.data_type()), any(d.w_dims, Type::bf16), any(d.y_dims, Type::bf16), d.strides,
         d.dilates, d.pad_l, d.pad_r},
        user_scratchpad(), e, hint);
    p.conv = dnnl::convolution_backward_data(pd);
    p.inputs = {operand(e, DNNL_ARG_DIFF_DST, d.y, pd.diff_dst_desc(), true, bytes),
                operand(e, DNNL_ARG_WEIGHTS, d.w, pd.weights_desc(), true, bytes)};
    p.output = operand(e, DNNL_ARG_DIFF_SRC, d.x, pd.diff_src_desc(), false, bytes);
    p.scratchpad = pd.scratchpad_desc();
    p.impl = pd.impl_info_str();
  } else {
    const auto hint = forward_pd(d, bias, 0, e);
    const memory::desc x = any(d.x_dims, Type::bf16), dw = any(d.w_dims, Type::f32), dy = any(d.y_dims, Type::bf16);
    const auto pd = bias ? dnnl::convolution_backward_weights::primitive_desc(
                               {algo, x, dw, d.b, dy, d.strides, d.dilates, d.pad_l, d.pad_r}, user_scratchpad(), e,
                               hint)
                         : dnnl::convolution_backward_weights::primitive_desc(
                               {algo, x, dw, dy, d.strides, d.dilates, d.pad_l, d.pad_r}, user_scratchpad(), e, hint);
    p.conv = dnnl::convolution_backward_weights(pd);
    p.inputs = {operand(e, DNNL_ARG_SRC, d.x, pd.src_desc(), true, bytes),
                operand(e, DNNL_ARG_DIFF_DST, d.y, pd.diff_dst_desc(), true, bytes)};
    p.output = operand(e, DNNL_ARG_DIFF_WEIGHTS, d.w, pd.diff_weights_desc(), false, bytes);
    if (bias) p.direct.emplace_back(DNNL_ARG_DIFF_BIAS, pd.diff_bias_desc());
    p.scratchpad = pd.scratchpad_desc();
    p.impl = pd.impl_info_str();
  }
  p.scratch_offset = bytes;
  p.bytes = bytes + aligned(p.scratchpad.get_size());
  return p;
}

// Created at the first call of a geometry, pass and epilogue on a thread.
Prepared& prepared(Context& c, const Conv2dShape& s, ConvPass pass, bool bias, int relu, bool bf16_x = false,
                   bool bf16_y = false) {
  std::vector<int> key = key_of(s);
  key.insert(key.end(), {static_cast<int>(pass), bias ? 1 : 0, relu != 0 ? 1 : 0, bf16_x ? 1 : 0, bf16_y ? 1 : 0});
  auto it = c.prepared.find(key);
  if (it == c.prepared.end()) {
    try {
      it = c.prepared.emplace(std::move(key), prepare(s, pass, bias, relu, bf16_x, bf16_y, c.engine)).first;
    } catch (const dnnl::error& e) {
      throw InvalidArgument("oneDNN: no bf16 convolution for " + geometry(s) + " on this CPU (" + e.what() +
                            "), expected a CPU with AVX-512 (AMX or AVX512-BF16 for speed), or another --conv");
    }
  }
  return it->second;
}

// inputs[i] and direct[i] are the caller's pointers of p.inputs and p.direct, output that of p.output.
void run(Context& c, const Prepared& p, std::initializer_list<const void*> inputs,
         std::initializer_list<const float*> direct, void* output) {
  auto* block = reinterpret_cast<char*>(c.memory_block.reserve((p.bytes + sizeof(float) - 1) / sizeof(float)));
  const auto mem = [&](const memory::desc& desc, const void* ptr) {
    return memory(desc, c.engine, const_cast<void*>(ptr));  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  };
  std::unordered_map<int, memory> args;
  const void* const* in = inputs.begin();
  for (const Operand& o : p.inputs) {
    const void* ptr = *in++;
    if (o.reorder) {
      memory user = mem(o.user, ptr);
      memory inner = mem(o.inner, block + o.offset);
      o.reorder->execute(c.stream, user, inner);
      args.emplace(o.arg, inner);
    } else {
      args.emplace(o.arg, mem(o.user, ptr));
    }
  }
  const float* const* dp = direct.begin();
  for (const auto& [arg, desc] : p.direct) {
    args.emplace(arg, mem(desc, *dp++));
  }
  memory out = p.output.reorder ? mem(p.output.inner, block + p.output.offset) : mem(p.output.user, output);
  args.emplace(p.output.arg, out);
  args.emplace(DNNL_ARG_SCRATCHPAD, mem(p.scratchpad, block + p.scratch_offset));
  p.conv.execute(c.stream, args);
  if (p.output.reorder) {
    memory user = mem(p.output.user, output);
    p.output.reorder->execute(c.stream, out, user);
  }
  c.stream.wait();
}
#endif

}  // namespace

#if DTNN_HAVE_ONEDNN
bool onednn_built() { return true; }

bool onednn_bf16_fits(const Conv2dShape& sh) {
  static std::mutex mutex;
  static std::map<std::vector<int>, bool> fits;
  std::lock_guard lock(mutex);
  const std::vector<int> key = key_of(sh);
  if (auto it = fits.find(key); it != fits.end()) return it->second;
  bool ok = sh.n > 0;
  try {
    Context& c = context();
    for (ConvPass pass : {ConvPass::kFwd, ConvPass::kBwdData, ConvPass::kBwdWeights}) {
      if (ok) prepared(c, sh, pass, pass != ConvPass::kBwdData, 0);
    }
  } catch (const InvalidArgument&) {
    ok = false;
  }
  fits.emplace(key, ok);
  return ok;
}

void onednn_release_thread_memory() {
  if (this_thread()) this_thread()->memory_block.release();
}

std::string onednn_bf16_impl(const Conv2dShape& sh, ConvPass pass) {
  if (!onednn_bf16_fits(sh)) return "";
  return prepared(context(), sh, pass, pass != ConvPass::kBwdData, 0).impl;
}

void conv2d_fwd_onednn_bf16(const Conv2dShape& sh, const void* x, const float* w, const float* b, int relu, void* y,
                            bool bf16_x, bool bf16_y) {
  Context& c = context();
  const Prepared& p = prepared(c, sh, ConvPass::kFwd, b != nullptr, relu, bf16_x, bf16_y);
  if (b != nullptr) {
    run(c, p, {x, w}, {b}, y);
  } else {
    run(c, p, {x, w}, {}, y);
  }
}

void conv2d_bwd_data_onednn_bf16(const Conv2dShape& sh, const void* dy, const float* w, void* dx, bool bf16_x,
                                 bool bf16_y) {
  Context& c = context();
  run(c, prepared(c, sh, ConvPass::kBwdData, false, 0, bf16_x, bf16_y), {dy, w}, {}, dx);
}

void conv2d_bwd_weights_onednn_bf16(const Conv2dShape& sh, const void* x, const void* dy, float* dw, float* db,
                                    bool bf16_x, bool bf16_y) {
  Context& c = context();
  const Prepared& p = prepared(c, sh, ConvPass::kBwdWeights, db != nullptr, 0, bf16_x, bf16_y);
  if (db != nullptr) {
    run(c, p, {x, dy}, {db}, dw);
  } else {
    run(c, p, {x, dy}, {}, dw);
  }
}
#else
bool onednn_built() { return false; }
void onednn_release_thread_memory() {}
bool onednn_bf16_fits(const Conv2dShape&) { return false; }
std::string onednn_bf16_impl(const Conv2dShape&, ConvPass) { return ""; }

namespace {
[[noreturn]] void not_built(const Conv2dShape& sh) {
  throw InvalidArgument("oneDNN: this dtnn was built without it (libdnnl-dev; scripts/setup.sh installs it), so it "
                        "has no bf16 convolution for " + geometry(sh) + ", expected another --conv");
}
}  // namespace

void conv2d_fwd_onednn_bf16(const Conv2dShape& sh, const void*, const float*, const float*, int, void*, bool, bool) {
  not_built(sh);
}
void conv2d_bwd_data_onednn_bf16(const Conv2dShape& sh, const void*, const float*, void*, bool, bool) {
  not_built(sh);
}
void conv2d_bwd_weights_onednn_bf16(const Conv2dShape& sh, const void*, const void*, float*, float*, bool, bool) {
  not_built(sh);
}
#endif

}  // namespace dtnn::kernels::cpu
