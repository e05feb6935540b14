// SPDX-License-Identifier: Apache-2.0
#include "codelets/cuda/conv2d_cudnn.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "codelets/cuda/elementwise.hpp"
#include "core/cuda_check.hpp"
#include "core/errors.hpp"

namespace dtnn::kernels::cuda {
namespace {


// Algorithms asking for more are skipped: the workspace is per worker and stays allocated.
constexpr std::size_t kMaxAlgorithmWorkspace = std::size_t{512} << 20;
// Where the padded tensor starts in the workspace, after cuDNN's part (cudaMallocAsync gives 256-byte alignment).
constexpr std::size_t kWorkspaceAlignment = 256;

std::string describe(const Conv2dShape& s) {
  return "n=" + std::to_string(s.n) + " c=" + std::to_string(s.c) + " h=" + std::to_string(s.h) +
         " w=" + std::to_string(s.w) + " k=" + std::to_string(s.k) + " r=" + std::to_string(s.r) +
         " s=" + std::to_string(s.s) + " stride=" + std::to_string(s.stride_h) + "x" + std::to_string(s.stride_w) +
         " pad(t,b,l,r)=" + std::to_string(s.pad_top) + "," + std::to_string(s.pad_bottom) + "," +
         std::to_string(s.pad_left) + "," + std::to_string(s.pad_right) + " dilation=" + std::to_string(s.dil_h) +
         "x" + std::to_string(s.dil_w) + " groups=" + std::to_string(s.groups);
}

// What a failed call says first (core/cuda_check.hpp adds the call, the error and where): the layer's shape, and
// the operand where the call alone does not say it.
std::string where(const Conv2dShape& s) { return "conv2d (cuDNN) [" + describe(s) + "]"; }
std::string where(const Conv2dShape& s, const char* what) {
  return std::string("conv2d (cuDNN) ") + what + " [" + describe(s) + "]";
}

std::size_t align_up(std::size_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

// The padding cuDNN applies (symmetric, the smaller side of each dimension) and what the padded copy adds.
struct Padding {
  int sym_h, sym_w;
  int top, bottom, left, right;

  explicit Padding(const Conv2dShape& s)
      : sym_h(std::min(s.pad_top, s.pad_bottom)),
        sym_w(std::min(s.pad_left, s.pad_right)),
        top(s.pad_top - sym_h),
        bottom(s.pad_bottom - sym_h),
        left(s.pad_left - sym_w),
        right(s.pad_right - sym_w) {}
  [[nodiscard]] bool needs_copy() const { return top != 0 || bottom != 0 || left != 0 || right != 0; }
};

// Descriptors of one shape, created once per thread; never modified afterwards.
struct ConvDescriptors {
  cudnnTensorDescriptor_t x = nullptr;         // what cuDNN convolves: x, or its padded copy
  cudnnTensorDescriptor_t x_stored = nullptr;  // padded copy only: x as stored (packed NCHW)
  cudnnTensorDescriptor_t x_inside = nullptr;  // padded copy only: x's cells inside the padded copy (strided)
  cudnnFilterDescriptor_t w = nullptr;
  cudnnTensorDescriptor_t y = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  ConvDescriptors() = default;
  ConvDescriptors(const ConvDescriptors&) = delete;
  ConvDescriptors& operator=(const ConvDescriptors&) = delete;
  ~ConvDescriptors() {
    for (cudnnTensorDescriptor_t t : {x, x_stored, x_inside, y}) {
      if (t != nullptr) cudnnDestroyTensorDescriptor(t);
    }
    if (w != nullptr) cudnnDestroyFilterDescriptor(w);
    if (conv != nullptr) cudnnDestroyConvolutionDescriptor(conv);
  }
};

struct Choice {
  int algo;                // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  std::size_t cudnn_bytes; // its workspace
};

struct ConvState {
  Conv2dShape shape;
  bool tf32;
  Padding pad;
  ConvDescriptors d;
  std::size_t padded_elements = 0;  // of the padded copy of x (or dx); 0 without one
  std::size_t inside_offset = 0;    // elements from the copy's start to x's cell (0, 0, 0, 0)
  std::array<std::optional<Choice>, 3> choice;

  ConvState(const Conv2dShape& s, bool tf32_math) : shape(s), tf32(tf32_math), pad(s) {}
};

constexpr std::size_t kShapeFields = 16;
using ShapeKey = std::array<int, kShapeFields + 2>;      // shape fields, device, TF32
using ChoiceKey = std::array<int, kShapeFields + 3>;     // shape fields, device, TF32, pass

ShapeKey shape_key(const Conv2dShape& s, int device, bool tf32) {
  return {s.n,       s.c,          s.h,        s.w,         s.k,     s.r,     s.s,      s.stride_h, s.stride_w,
          s.pad_top, s.pad_bottom, s.pad_left, s.pad_right, s.dil_h, s.dil_w, s.groups, device,     tf32 ? 1 : 0};
}

std::unique_ptr<ConvState> make_state(const Conv2dShape& s, bool tf32) {
  auto st = std::make_unique<ConvState>(s, tf32);
  ConvDescriptors& d = st->d;
  const Padding& p = st->pad;
  const int hp = s.h + p.top + p.bottom;
  const int wp = s.w + p.left + p.right;
  DTNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.x), where(s));
  DTNN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.c, hp, wp),
                   where(s, "x"));
  if (p.needs_copy()) {
    DTNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.x_stored), where(s));
    DTNN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.x_stored, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w),
                     where(s, "x as stored"));
    DTNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.x_inside), where(s));
    DTNN_CUDNN_CHECK(
        cudnnSetTensor4dDescriptorEx(d.x_inside, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w, s.c * hp * wp, hp * wp, wp, 1),
        where(s, "x inside its padded copy"));
    st->padded_elements = static_cast<std::size_t>(s.n) * static_cast<std::size_t>(s.c) *
                          static_cast<std::size_t>(hp) * static_cast<std::size_t>(wp);
    st->inside_offset =
        static_cast<std::size_t>(p.top) * static_cast<std::size_t>(wp) + static_cast<std::size_t>(p.left);
  }
  DTNN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d.w), where(s));
  DTNN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.k, s.c / s.groups, s.r, s.s),
                   where(s));
  DTNN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d.conv), where(s));
  DTNN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d.conv, p.sym_h, p.sym_w, s.stride_h, s.stride_w, s.dil_h, s.dil_w,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                   where(s));
  DTNN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d.conv, s.groups), where(s));
  // FMA math: no TF32 tensor-core kernels (which CUDNN_DEFAULT_MATH allows on Ampere and later), unless TF32 is
  // asked for: then the default math, as PyTorch sets it with allow_tf32.
  DTNN_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH), where(s));
  int on = 0, ok = 0, oh = 0, ow = 0;
  DTNN_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &on, &ok, &oh, &ow), where(s));
  if (on != s.n || ok != s.k || oh != s.out_h() || ow != s.out_w()) {
    throw RuntimeError("conv2d (cuDNN): output shape " + std::to_string(on) + "x" + std::to_string(ok) + "x" +
                       std::to_string(oh) + "x" + std::to_string(ow) + " differs from the expected " +
                       std::to_string(s.n) + "x" + std::to_string(s.k) + "x" + std::to_string(s.out_h()) + "x" +
                       std::to_string(s.out_w()) + " [" + describe(s) + "]");
  }
  DTNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.y), where(s));
  DTNN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.k, oh, ow),
                   where(s, "y"));
  return st;
}

// This thread's descriptors for the shape. A CUDA worker keeps its thread, so nothing here is shared.
ConvState& state_for(const Conv2dShape& s, const CudnnContext& ctx) {
  thread_local std::map<ShapeKey, std::unique_ptr<ConvState>> states;
  const ShapeKey key = shape_key(s, ctx.device, ctx.tf32);
  auto it = states.find(key);
  if (it == states.end()) {
    it = states.emplace(key, make_state(s, ctx.tf32)).first;
  }
  return *it->second;
}

// Whether the transform algorithms (FFT, Winograd) may run: they compute the convolution in another basis, with
// larger rounding errors than a direct sum, which BatchNorm's backward (a difference of means over a few hundred
// values) amplifies. Measured on an H200 (bench/gpu_vs_cpu.py, resnet20_cifar10, batch 8, one step): the largest
// difference from the CPU's gradients is 7.8e-6 of a tensor's magnitude with them, 2.2e-6 without; resnet50_imagenet
// at batch 128 trains at 534 images/s with them, 514 without (-4%). Off by default, so that a task's result depends
// as little as possible on the kind of worker; DTNN_CUDNN_ALGORITHMS=all allows them (PyTorch's choice),
// DTNN_CUDNN_ALGORITHMS=direct (the default) does not.
bool transforms_allowed() {
  static const bool allowed = [] {
    const char* v = std::getenv("DTNN_CUDNN_ALGORITHMS");
    const std::string value = v == nullptr ? "direct" : v;
    if (value != "direct" && value != "all") {
      throw InvalidArgument("DTNN_CUDNN_ALGORITHMS='" + value + "', expected direct (the default) or all");
    }
    return value == "all";
  }();
  return allowed;
}
bool is_transform(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool is_transform(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool is_transform(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// The first of cuDNN's ranked candidates that runs without tensor cores (with them too under TF32, never with a
// conversion to fp16), is deterministic, is a direct sum (unless transforms_allowed()) and fits the workspace cap;
// `fallback` (a deterministic direct algorithm that supports every geometry) when none does.
template <class Perf, class Algo, class SizeFn>
Choice first_fit(const std::vector<Perf>& perf, int returned, Algo fallback, SizeFn&& size, const Conv2dShape& s,
                 bool tf32) {
  for (int i = 0; i < returned && i < static_cast<int>(perf.size()); ++i) {
    const Perf& p = perf[static_cast<std::size_t>(i)];
    if (is_transform(p.algo) && !transforms_allowed()) {
      continue;
    }
    // In fp32, tensor-core (TF32, conversion) variants are out; DEFAULT or FMA entries run as FMA under the
    // descriptor's CUDNN_FMA_MATH (what PyTorch does with allow_tf32 off). Requiring FMA alone could leave only the
    // fallback.
    // Under TF32, the tensor-core entries are what is asked for (TF32 on fp32 data); a conversion to fp16 never.
    const bool refused = p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ||
                         (p.mathType == CUDNN_TENSOR_OP_MATH && !tf32);
    if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC || refused) {
      continue;
    }
    std::size_t bytes = 0;
    if (size(p.algo, &bytes) != CUDNN_STATUS_SUCCESS) {
      continue;
    }
    bytes = std::max(bytes, p.memory);
    if (bytes <= kMaxAlgorithmWorkspace) {
      return Choice{static_cast<int>(p.algo), bytes};
    }
  }
  std::size_t bytes = 0;
  DTNN_CUDNN_CHECK(size(fallback, &bytes), where(s, "workspace size of the fallback algorithm"));
  return Choice{static_cast<int>(fallback), bytes};
}

// Heuristics only (cudnnGet*_v7): no trial runs, nothing allocated, no synchronisation.
Choice choose(const ConvState& st, ConvPass pass, cudnnHandle_t h) {
  const Conv2dShape& s = st.shape;
  const ConvDescriptors& d = st.d;
  int max_count = 0;
  int returned = 0;
  switch (pass) {
    case ConvPass::kFwd: {
      DTNN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count), where(s));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<std::size_t>(std::max(max_count, 1)));
      DTNN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, static_cast<int>(perf.size()),
                                                              &returned, perf.data()),
                       where(s));
      return first_fit(
          perf, returned, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
          [&](cudnnConvolutionFwdAlgo_t algo, std::size_t* bytes) {
            return cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, algo, bytes);
          },
          s, st.tf32);
    }
    case ConvPass::kBwdData: {
      DTNN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count), where(s));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<std::size_t>(std::max(max_count, 1)));
      DTNN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                           h, d.w, d.y, d.conv, d.x, static_cast<int>(perf.size()), &returned, perf.data()),
                       where(s));
      return first_fit(
          perf, returned, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
          [&](cudnnConvolutionBwdDataAlgo_t algo, std::size_t* bytes) {
            return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, algo, bytes);
          },
          s, st.tf32);
    }
    case ConvPass::kBwdWeights: {
      DTNN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max_count), where(s));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<std::size_t>(std::max(max_count, 1)));
      DTNN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                           h, d.x, d.y, d.conv, d.w, static_cast<int>(perf.size()), &returned, perf.data()),
                       where(s));
      return first_fit(
          perf, returned, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
          [&](cudnnConvolutionBwdFilterAlgo_t algo, std::size_t* bytes) {
            return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, algo, bytes);
          },
          s, st.tf32);
    }
  }
  throw RuntimeError("conv2d (cuDNN): unknown pass [" + describe(s) + "]");
}

// The algorithm of (device, shape, pass): process-wide, so that every worker of a device runs the same one.
// cuDNN is asked outside the lock; heuristics are deterministic, so a concurrent second answer is the same.
const Choice& choice_for(ConvState& st, ConvPass pass, const CudnnContext& ctx) {
  std::optional<Choice>& mine = st.choice[static_cast<std::size_t>(pass)];
  if (mine) {
    return *mine;
  }
  static std::mutex mutex;
  static std::map<ChoiceKey, Choice> choices;
  ChoiceKey key{};
  const ShapeKey shape = shape_key(st.shape, ctx.device, st.tf32);
  std::copy(shape.begin(), shape.end(), key.begin());
  key.back() = static_cast<int>(pass);
  {
    std::lock_guard lock(mutex);
    if (auto it = choices.find(key); it != choices.end()) {
      mine = it->second;
      return *mine;
    }
  }
  const Choice fresh = choose(st, pass, ctx.cudnn);
  std::lock_guard lock(mutex);
  mine = choices.emplace(key, fresh).first->second;
  return *mine;
}

// Output size of the geometry, and whether any convolution work exists (the CPU kernels' early exits).
std::size_t plane_of(const Conv2dShape& s) {
  return static_cast<std::size_t>(std::max(s.out_h(), 0)) * static_cast<std::size_t>(std::max(s.out_w(), 0));
}
bool empty_output(const Conv2dShape& s) { return s.n <= 0 || s.out_h() <= 0 || s.out_w() <= 0; }
std::size_t weight_elements(const Conv2dShape& s) {
  return static_cast<std::size_t>(std::max(s.k, 0)) * static_cast<std::size_t>(std::max(s.c / s.groups, 0)) *
         static_cast<std::size_t>(s.r) * static_cast<std::size_t>(s.s);
}

// Whether `pass` calls cuDNN at all for this shape (otherwise it only zeroes its outputs, or does nothing).
bool uses_cudnn(const Conv2dShape& s, ConvPass pass) {
  if (empty_output(s) || s.k <= 0 || s.k / s.groups <= 0) {
    return false;
  }
  return pass != ConvPass::kBwdWeights || weight_elements(s) > 0;
}

std::size_t total_bytes(const ConvState& st, const Choice& c) {
  if (st.padded_elements == 0) {
    return c.cudnn_bytes;
  }
  return align_up(c.cudnn_bytes) + st.padded_elements * sizeof(float);
}

// Where cuDNN's workspace and the padded tensor lie in the caller's workspace.
struct Scratch {
  void* cudnn;
  std::size_t cudnn_bytes;
  float* padded;  // null without a padded copy
};

Scratch carve(const ConvState& st, const Choice& c, void* workspace, std::size_t workspace_bytes, const char* pass) {
  const std::size_t needed = total_bytes(st, c);
  if (needed > 0 && (workspace == nullptr || workspace_bytes < needed)) {
    throw RuntimeError(std::string("conv2d (cuDNN) ") + pass + ": workspace of " + std::to_string(workspace_bytes) +
                       " bytes, needs " + std::to_string(needed) + " [" + describe(st.shape) + "]");
  }
  auto* base = static_cast<unsigned char*>(workspace);
  float* padded = st.padded_elements == 0 ? nullptr : reinterpret_cast<float*>(base + align_up(c.cudnn_bytes));
  return Scratch{c.cudnn_bytes > 0 ? workspace : nullptr, c.cudnn_bytes, padded};
}

// padded = x surrounded by the explicit part of the padding, zeros elsewhere.
void pad_x(const ConvState& st, const float* x, float* padded, const CudnnContext& ctx) {
  const float one = 1.0f;
  const float zero = 0.0f;
  DTNN_CUDA_CHECK(cudaMemsetAsync(padded, 0, st.padded_elements * sizeof(float), ctx.stream),
                  where(st.shape, "padded x"));
  DTNN_CUDNN_CHECK(
      cudnnTransformTensor(ctx.cudnn, &one, st.d.x_stored, x, &zero, st.d.x_inside, padded + st.inside_offset),
      where(st.shape, "x into its padded copy"));
}

}  // namespace

std::size_t conv2d_workspace_bytes(const Conv2dShape& sh, ConvPass pass, const CudnnContext& ctx) {
  if (!uses_cudnn(sh, pass)) {
    return 0;
  }
  ConvState& st = state_for(sh, ctx);
  return total_bytes(st, choice_for(st, pass, ctx));
}

void conv2d_fwd(const Conv2dShape& sh, const float* x, const float* w, const float* b, int relu, float* y,
                void* workspace, std::size_t workspace_bytes, const CudnnContext& ctx) {
  // As the CPU kernels: no output, nothing to write.
  if (!uses_cudnn(sh, ConvPass::kFwd)) {
    return;
  }
  ConvState& st = state_for(sh, ctx);
  const Choice& c = choice_for(st, ConvPass::kFwd, ctx);
  const Scratch ws = carve(st, c, workspace, workspace_bytes, "fwd");
  const float* input = x;
  if (ws.padded != nullptr) {
    pad_x(st, x, ws.padded, ctx);
    input = ws.padded;
  }
  const float one = 1.0f;
  const float zero = 0.0f;
  DTNN_CUDNN_CHECK(cudnnConvolutionForward(ctx.cudnn, &one, st.d.x, input, st.d.w, w, st.d.conv,
                                           static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws.cudnn, ws.cudnn_bytes,
                                           &zero, st.d.y, y),
                   where(sh));
  bias_add_fwd(sh.n, sh.k, plane_of(sh), b, relu, y, ctx.stream);
}

void conv2d_bwd_data(const Conv2dShape& sh, const float* dy, const float* w, float* dx, void* workspace,
                     std::size_t workspace_bytes, const CudnnContext& ctx) {
  if (sh.n <= 0) {
    return;
  }
  if (!uses_cudnn(sh, ConvPass::kBwdData)) {
    // No window, or no output channel per group: dx is zero (as on the CPU).
    const std::size_t count = static_cast<std::size_t>(sh.n) * static_cast<std::size_t>(sh.c) *
                              static_cast<std::size_t>(sh.h) * static_cast<std::size_t>(sh.w);
    DTNN_CUDA_CHECK(cudaMemsetAsync(dx, 0, count * sizeof(float), ctx.stream), where(sh, "dx"));
    return;
  }
  ConvState& st = state_for(sh, ctx);
  const Choice& c = choice_for(st, ConvPass::kBwdData, ctx);
  const Scratch ws = carve(st, c, workspace, workspace_bytes, "bwd_data");
  const float one = 1.0f;
  const float zero = 0.0f;
  // With a padded copy, cuDNN computes the gradient of the whole padded input and x's cells are cropped out.
  float* target = ws.padded != nullptr ? ws.padded : dx;
  DTNN_CUDNN_CHECK(cudnnConvolutionBackwardData(ctx.cudnn, &one, st.d.w, w, st.d.y, dy, st.d.conv,
                                                static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), ws.cudnn,
                                                ws.cudnn_bytes, &zero, st.d.x, target),
                   where(sh));
  if (ws.padded != nullptr) {
    DTNN_CUDNN_CHECK(
        cudnnTransformTensor(ctx.cudnn, &one, st.d.x_inside, ws.padded + st.inside_offset, &zero, st.d.x_stored, dx),
        where(sh, "dx out of the padded gradient"));
  }
}

void conv2d_bwd_weights(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db,
                        void* workspace, std::size_t workspace_bytes, const CudnnContext& ctx) {
  if (db != nullptr) {
    bias_bwd_weights(std::max(sh.n, 0), sh.k, plane_of(sh), dy, db, ctx.stream);
  }
  const std::size_t w_count = weight_elements(sh);
  if (w_count == 0) {
    return;
  }
  if (!uses_cudnn(sh, ConvPass::kBwdWeights)) {
    // No sample or no output position: the sum is empty.
    DTNN_CUDA_CHECK(cudaMemsetAsync(dw, 0, w_count * sizeof(float), ctx.stream), where(sh, "dw"));
    return;
  }
  ConvState& st = state_for(sh, ctx);
  const Choice& c = choice_for(st, ConvPass::kBwdWeights, ctx);
  const Scratch ws = carve(st, c, workspace, workspace_bytes, "bwd_weights");
  const float* input = x;
  if (ws.padded != nullptr) {
    pad_x(st, x, ws.padded, ctx);
    input = ws.padded;
  }
  const float one = 1.0f;
  const float zero = 0.0f;
  DTNN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx.cudnn, &one, st.d.x, input, st.d.y, dy, st.d.conv,
                                                  static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), ws.cudnn,
                                                  ws.cudnn_bytes, &zero, st.d.w, dw),
                   where(sh));
}

}  // namespace dtnn::kernels::cuda
