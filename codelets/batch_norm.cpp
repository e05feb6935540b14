// SPDX-License-Identifier: Apache-2.0
#include "codelets/batch_norm.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/batch_norm.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

namespace k = kernels::cpu;

// Shared by the per-tile codelets. Field order leaves no padding: the bytes are hashed into the footprint.
struct TileArgs {
  std::size_t plane;
  int n;
  int c;
  double eps;
};

// The per-tile passes that take gamma and beta have a codelet with them and one without (Affine), the data
// gradient one for batch statistics and one for frozen statistics (Stats), each with its fixed buffer list. The
// optional buffers come after the others, which keep their indices in every variant.
enum class Affine { kWithout, kWith };
enum class Stats { kFrozen, kBatch };
// Fused passes (models/fusion.hpp): the forward pass's epilogue (a residual added, a ReLU), and the backward passes
// reading the fused ReLU's output to mask the gradient (Mask). Their buffers come after all the others.
enum class Epilogue { kNone, kRelu, kAdd, kAddRelu };
enum class Mask { kNone, kRelu };

constexpr bool has_residual(Epilogue e) { return e == Epilogue::kAdd || e == Epilogue::kAddRelu; }
constexpr int has_relu(Epilogue e) { return e == Epilogue::kRelu || e == Epilogue::kAddRelu ? 1 : 0; }

enum Finish : int { kNone = 0, kMean = 1, kVar = 2, kBwd = 3 };

struct ReduceArgs {
  double count;
  double eps;
  double momentum;
  int width;     // values per sample in the partials
  int channels;
  int nsrc;      // partial tiles in this task
  int acc_in;    // the accumulator holds the sums of the earlier samples
  int acc_out;   // not the last task of the chain: store the sums in the accumulator
  int finish;    // what the last task computes from the sums
  int affine;    // kBwd: dgamma and dbeta are passed
  int unused = 0;
};

// A reduce task has a variable number of buffers: its nsrc partial tiles, the accumulator when it reads or writes
// one, then the outputs of the finish, unless it only stores its sums in the accumulator:
//   kMean: stats;  kVar: stats, running_mean, running_var, num_batches_tracked;  kBwd: grad_stats[, dgamma, dbeta].
// The CPU and CUDA bodies both find them here.
struct ReduceBuffers {
  void** sources;  // nsrc of them
  float* acc;      // null without an accumulator
  void** out;
};

ReduceBuffers reduce_buffers(void** buffers, const ReduceArgs& a) {
  const int has_acc = a.acc_in || a.acc_out ? 1 : 0;
  return ReduceBuffers{buffers, has_acc ? runtime::vector_ptr(buffers[a.nsrc]) : nullptr, buffers + a.nsrc + has_acc};
}

// The CPU bodies serve fp32 and bf16 batch tensors (core/dtype.hpp's kBFloat16, where the container stores them in
// bf16): x and dx of one type, y, dy and the fused ReLU's output of one type, told apart by the buffers' element
// sizes; the tasks with bf16 come under codelets of their own names (with_bf16, common.hpp), so that their
// performance models stay apart.
const std::uint16_t* bf16_ptr(void* buffer) { return runtime::vector_ptr_as<const std::uint16_t>(buffer); }

template <class X, class Y>
struct Types {
  using XT = X;
  using YT = Y;
};

// Calls f(Types<X, Y>{}) with the element types of the x-side and y-side buffers (float, or std::uint16_t for bf16).
template <class F>
void with_types(void* x_buffer, void* y_buffer, F&& f) {
  const bool x16 = runtime::vector_is_bf16(x_buffer), y16 = runtime::vector_is_bf16(y_buffer);
  if (x16 && y16) return f(Types<std::uint16_t, std::uint16_t>{});
  if (x16) return f(Types<std::uint16_t, float>{});
  if (y16) return f(Types<float, std::uint16_t>{});
  f(Types<float, float>{});
}

template <class T>
T* ptr(void* buffer) {
  return runtime::vector_ptr_as<T>(buffer);
}

void sums_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<TileArgs>(cl_arg);
  if (runtime::vector_is_bf16(buffers[0])) {
    k::batch_norm_sums(a.n, a.c, a.plane, bf16_ptr(buffers[0]), runtime::vector_ptr(buffers[1]));
  } else {
    k::batch_norm_sums(a.n, a.c, a.plane, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]));
  }
}

void sqdev_sums_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<TileArgs>(cl_arg);
  if (runtime::vector_is_bf16(buffers[0])) {
    k::batch_norm_sqdev_sums(a.n, a.c, a.plane, bf16_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                             runtime::vector_ptr(buffers[2]));
  } else {
    k::batch_norm_sqdev_sums(a.n, a.c, a.plane, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                             runtime::vector_ptr(buffers[2]));
  }
}

void reduce_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ReduceArgs>(cl_arg);
  const ReduceBuffers b = reduce_buffers(buffers, a);
  thread_local std::vector<double> sums;
  sums.assign(static_cast<std::size_t>(a.width), 0.0);
  const std::size_t bytes = sums.size() * sizeof(double);
  // The accumulator's bytes are the doubles themselves; memcpy reads them without aliasing a float buffer.
  if (a.acc_in) {
    std::memcpy(sums.data(), b.acc, bytes);
  }
  for (int s = 0; s < a.nsrc; ++s) {
    const auto rows = static_cast<int>(runtime::vector_size(b.sources[s]) / static_cast<std::size_t>(a.width));
    k::batch_norm_accumulate(rows, a.width, runtime::vector_ptr(b.sources[s]), sums.data());
  }
  if (a.acc_out) {
    std::memcpy(b.acc, sums.data(), bytes);
    return;
  }
  void** out = b.out;
  const int c = a.channels;
  switch (a.finish) {
    case kMean:
      k::batch_norm_finish_mean(c, a.count, sums.data(), runtime::vector_ptr(out[0]));
      break;
    case kVar: {
      float* stats = runtime::vector_ptr(out[0]);
      k::batch_norm_finish_var(c, BatchNormUpdate{a.count, a.eps, a.momentum}, sums.data(), stats, stats + c,
                               runtime::vector_ptr(out[1]), runtime::vector_ptr(out[2]));
      runtime::vector_ptr(out[3])[0] += 1.0f;
      break;
    }
    case kBwd: {
      float* grad_stats = runtime::vector_ptr(out[0]);
      k::batch_norm_finish_bwd(c, a.count, sums.data(), grad_stats, grad_stats + c,
                               a.affine ? runtime::vector_ptr(out[1]) : nullptr,
                               a.affine ? runtime::vector_ptr(out[2]) : nullptr);
      break;
    }
    default:
      break;
  }
}

// The optional buffers of a forward task after its `fixed` ones: gamma and beta when affine, then the residual.
template <Affine F, Epilogue E>
struct FwdBuffers {
  const float* gamma;
  const float* beta;
  const float* residual;
  FwdBuffers(void** buffers, int fixed)
      : gamma(F == Affine::kWith ? runtime::vector_ptr(buffers[fixed]) : nullptr),
        beta(F == Affine::kWith ? runtime::vector_ptr(buffers[fixed + 1]) : nullptr),
        residual(has_residual(E) ? runtime::vector_ptr(buffers[fixed + (F == Affine::kWith ? 2 : 0)]) : nullptr) {}
};

// Buffers: x, stats, y, then gamma and beta when affine, then the residual with an Add epilogue.
template <Affine F, Epilogue E>
void fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<TileArgs>(cl_arg);
  const float* stats = runtime::vector_ptr(buffers[1]);
  const FwdBuffers<F, E> opt(buffers, 3);
  with_types(buffers[0], buffers[2], [&](auto t) {
    using X = typename decltype(t)::XT;
    using Y = typename decltype(t)::YT;
    k::batch_norm_fwd_fused(a.n, a.c, a.plane, ptr<const X>(buffers[0]), stats, stats + a.c, opt.gamma, opt.beta,
                            opt.residual, has_relu(E), ptr<Y>(buffers[2]));
  });
}

// Buffers: x, running_mean, running_var, y, then gamma and beta when affine, then the residual with an Add epilogue.
template <Affine F, Epilogue E>
void infer_fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<TileArgs>(cl_arg);
  const FwdBuffers<F, E> opt(buffers, 4);
  with_types(buffers[0], buffers[3], [&](auto t) {
    using X = typename decltype(t)::XT;
    using Y = typename decltype(t)::YT;
    k::batch_norm_infer_fwd_fused(a.n, a.c, a.plane, a.eps, ptr<const X>(buffers[0]), runtime::vector_ptr(buffers[1]),
                                  runtime::vector_ptr(buffers[2]), opt.gamma, opt.beta, opt.residual, has_relu(E),
                                  ptr<Y>(buffers[3]));
  });
}

void frozen_stats_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<TileArgs>(cl_arg);
  float* stats = runtime::vector_ptr(buffers[2]);
  std::copy_n(runtime::vector_ptr(buffers[0]), a.c, stats);
  k::batch_norm_invstd(a.c, a.eps, runtime::vector_ptr(buffers[1]), stats + a.c);
}

// Buffers: x, dy, stats, partials, then the fused ReLU's output when masked.
template <Mask M>
void bwd_sums_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<TileArgs>(cl_arg);
  const float* stats = runtime::vector_ptr(buffers[2]);
  with_types(buffers[0], buffers[1], [&](auto t) {
    using X = typename decltype(t)::XT;
    using Y = typename decltype(t)::YT;
    const Y* relu_y = M == Mask::kRelu ? ptr<const Y>(buffers[4]) : nullptr;
    k::batch_norm_bwd_sums_masked(a.n, a.c, a.plane, ptr<const X>(buffers[0]), relu_y, ptr<const Y>(buffers[1]), stats,
                                  stats + a.c, runtime::vector_ptr(buffers[3]));
  });
}

// Buffers: x, dy, stats, dx, then grad_stats with batch statistics, gamma when affine and the fused ReLU's output
// when masked, in that order.
template <Stats S, Affine F, Mask M>
struct BwdDataBuffers {
  static constexpr int kGradStats = 4;
  static constexpr int kGamma = S == Stats::kBatch ? 5 : 4;
  static constexpr int kReluY = kGamma + (F == Affine::kWith ? 1 : 0);
  const float* grad_stats;
  const float* gamma;
  void* relu_y;  // float or bf16, as dy
  explicit BwdDataBuffers(void** buffers)
      : grad_stats(S == Stats::kBatch ? runtime::vector_ptr(buffers[kGradStats]) : nullptr),
        gamma(F == Affine::kWith ? runtime::vector_ptr(buffers[kGamma]) : nullptr),
        relu_y(M == Mask::kRelu ? runtime::vector_ptr_as<void>(buffers[kReluY]) : nullptr) {}
};

template <Stats S, Affine F, Mask M>
void bwd_data_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<TileArgs>(cl_arg);
  const float* stats = runtime::vector_ptr(buffers[2]);
  const BwdDataBuffers<S, F, M> opt(buffers);
  const float* mean_dy_xhat = opt.grad_stats != nullptr ? opt.grad_stats + a.c : nullptr;
  with_types(buffers[0], buffers[1], [&](auto t) {  // x and dx, dy and relu_y
    using X = typename decltype(t)::XT;
    using Y = typename decltype(t)::YT;
    k::batch_norm_bwd_data_masked(a.n, a.c, a.plane, ptr<const X>(buffers[0]), static_cast<const Y*>(opt.relu_y),
                                  ptr<const Y>(buffers[1]), stats, stats + a.c, opt.gamma, opt.grad_stats,
                                  mean_dy_xhat, ptr<X>(buffers[3]));
  });
}

#ifdef DTNN_HAVE_CUDA
// The CUDA bodies take the same buffers as the CPU bodies above and write the same bits (codelets/cuda/batch_norm.hpp).
namespace kc = kernels::cuda;

void sums_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<TileArgs>(cl_arg);
  kc::batch_norm_sums(a.n, a.c, a.plane, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                      runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "batch_norm_sums");
}

void sqdev_sums_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<TileArgs>(cl_arg);
  kc::batch_norm_sqdev_sums(a.n, a.c, a.plane, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                            runtime::vector_ptr(buffers[2]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "batch_norm_sqdev_sums");
}

void reduce_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ReduceArgs>(cl_arg);
  static_assert(STARPU_NMAXBUFS <= kc::BatchNormReduce::kMaxSources,
                "a reduce task has up to STARPU_NMAXBUFS sources: raise BatchNormReduce::kMaxSources");
  kc::BatchNormReduce r;
  r.nsrc = a.nsrc;
  r.width = a.width;
  r.channels = a.channels;
  r.count = a.count;
  r.eps = a.eps;
  r.momentum = a.momentum;
  const ReduceBuffers b = reduce_buffers(buffers, a);
  for (int s = 0; s < a.nsrc; ++s) {
    r.sources[s] = runtime::vector_ptr(b.sources[s]);
    r.rows[s] = static_cast<int>(runtime::vector_size(b.sources[s]) / static_cast<std::size_t>(a.width));
  }
  r.acc_in = a.acc_in ? b.acc : nullptr;
  r.acc_out = a.acc_out ? b.acc : nullptr;
  if (!a.acc_out) {
    void** out = b.out;
    switch (a.finish) {
      case kMean:
        r.finish = kc::BatchNormFinish::kMean;
        r.out[0] = runtime::vector_ptr(out[0]);
        break;
      case kVar:
        r.finish = kc::BatchNormFinish::kVar;
        for (int i = 0; i < 4; ++i) r.out[i] = runtime::vector_ptr(out[i]);
        break;
      case kBwd:
        r.finish = kc::BatchNormFinish::kBwd;
        r.out[0] = runtime::vector_ptr(out[0]);
        if (a.affine) {
          r.out[1] = runtime::vector_ptr(out[1]);
          r.out[2] = runtime::vector_ptr(out[2]);
        }
        break;
      default:
        break;
    }
  }
  kc::batch_norm_reduce(r, runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "batch_norm_reduce");
}

template <Affine F, Epilogue E>
void fwd_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<TileArgs>(cl_arg);
  const float* stats = runtime::vector_ptr(buffers[1]);
  const FwdBuffers<F, E> opt(buffers, 3);
  kc::batch_norm_fwd_fused(a.n, a.c, a.plane, runtime::vector_ptr(buffers[0]), stats, stats + a.c, opt.gamma,
                           opt.beta, opt.residual, has_relu(E), runtime::vector_ptr(buffers[2]),
                           runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "batch_norm_fwd");
}

template <Affine F, Epilogue E>
void infer_fwd_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<TileArgs>(cl_arg);
  const FwdBuffers<F, E> opt(buffers, 4);
  auto* scale_shift = static_cast<float*>(runtime::cuda::workspace(2 * static_cast<std::size_t>(a.c) * sizeof(float)));
  kc::batch_norm_infer_fwd_fused(a.n, a.c, a.plane, a.eps, runtime::vector_ptr(buffers[0]),
                                 runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[2]), opt.gamma, opt.beta,
                                 opt.residual, has_relu(E), scale_shift, runtime::vector_ptr(buffers[3]),
                                 runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "batch_norm_infer_fwd");
}

void frozen_stats_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<TileArgs>(cl_arg);
  kc::batch_norm_frozen_stats(a.c, a.eps, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                              runtime::vector_ptr(buffers[2]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "batch_norm_frozen_stats");
}

template <Mask M>
void bwd_sums_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<TileArgs>(cl_arg);
  const float* stats = runtime::vector_ptr(buffers[2]);
  const float* relu_y = M == Mask::kRelu ? runtime::vector_ptr(buffers[4]) : nullptr;
  kc::batch_norm_bwd_sums_masked(a.n, a.c, a.plane, runtime::vector_ptr(buffers[0]), relu_y,
                                 runtime::vector_ptr(buffers[1]), stats, stats + a.c, runtime::vector_ptr(buffers[3]),
                                 runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "batch_norm_bwd_sums");
}

template <Stats S, Affine F, Mask M>
void bwd_data_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<TileArgs>(cl_arg);
  const float* stats = runtime::vector_ptr(buffers[2]);
  const BwdDataBuffers<S, F, M> opt(buffers);
  // CUDA tasks take fp32 tensors only (the bf16 twins are CPU codelets).
  kc::batch_norm_bwd_data_masked(a.n, a.c, a.plane, runtime::vector_ptr(buffers[0]),
                                 static_cast<const float*>(opt.relu_y),
                                 runtime::vector_ptr(buffers[1]), stats, stats + a.c, opt.gamma, opt.grad_stats,
                                 opt.grad_stats != nullptr ? opt.grad_stats + a.c : nullptr,
                                 runtime::vector_ptr(buffers[3]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "batch_norm_bwd_data");
}
#endif

runtime::Codelet cl_batch_norm_sums("batch_norm_sums", runtime::guarded<sums_cpu>,
                                    DTNN_CUDA_FUNC(runtime::guarded<sums_cuda>), {STARPU_R, STARPU_W});
runtime::Codelet cl_batch_norm_sqdev_sums("batch_norm_sqdev_sums", runtime::guarded<sqdev_sums_cpu>,
                                          DTNN_CUDA_FUNC(runtime::guarded<sqdev_sums_cuda>),
                                          {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_batch_norm_reduce("batch_norm_reduce", runtime::guarded<reduce_cpu>,
                                      DTNN_CUDA_FUNC(runtime::guarded<reduce_cuda>), {});
// The affine codelets (and, for the data gradient, the one for batch statistics) keep the names that traces showed
// before the variants had codelets of their own; the fused variants add "_relu", "_add" or "_add_relu" (forward) and
// "_relu" (backward, masked by the fused ReLU's output).
// DTNN_CUDA_FUNC((...)): the parentheses keep the template arguments' comma from splitting the macro argument.
runtime::Codelet cl_batch_norm_fwd(
    "batch_norm_fwd", runtime::guarded<fwd_cpu<Affine::kWith, Epilogue::kNone>>,
    DTNN_CUDA_FUNC((runtime::guarded<fwd_cuda<Affine::kWith, Epilogue::kNone>>)),
    {STARPU_R, STARPU_R, STARPU_W, STARPU_R, STARPU_R});
runtime::Codelet cl_batch_norm_infer_fwd(
    "batch_norm_infer_fwd", runtime::guarded<infer_fwd_cpu<Affine::kWith, Epilogue::kNone>>,
    DTNN_CUDA_FUNC((runtime::guarded<infer_fwd_cuda<Affine::kWith, Epilogue::kNone>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_R, STARPU_R});
runtime::Codelet cl_batch_norm_fwd_relu(
    "batch_norm_fwd_relu", runtime::guarded<fwd_cpu<Affine::kWith, Epilogue::kRelu>>,
    DTNN_CUDA_FUNC((runtime::guarded<fwd_cuda<Affine::kWith, Epilogue::kRelu>>)),
    {STARPU_R, STARPU_R, STARPU_W, STARPU_R, STARPU_R});
runtime::Codelet cl_batch_norm_infer_fwd_relu(
    "batch_norm_infer_fwd_relu", runtime::guarded<infer_fwd_cpu<Affine::kWith, Epilogue::kRelu>>,
    DTNN_CUDA_FUNC((runtime::guarded<infer_fwd_cuda<Affine::kWith, Epilogue::kRelu>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_R, STARPU_R});
runtime::Codelet cl_batch_norm_fwd_add(
    "batch_norm_fwd_add", runtime::guarded<fwd_cpu<Affine::kWith, Epilogue::kAdd>>,
    DTNN_CUDA_FUNC((runtime::guarded<fwd_cuda<Affine::kWith, Epilogue::kAdd>>)),
    {STARPU_R, STARPU_R, STARPU_W, STARPU_R, STARPU_R, STARPU_R});
runtime::Codelet cl_batch_norm_infer_fwd_add(
    "batch_norm_infer_fwd_add", runtime::guarded<infer_fwd_cpu<Affine::kWith, Epilogue::kAdd>>,
    DTNN_CUDA_FUNC((runtime::guarded<infer_fwd_cuda<Affine::kWith, Epilogue::kAdd>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_R, STARPU_R, STARPU_R});
runtime::Codelet cl_batch_norm_fwd_add_relu(
    "batch_norm_fwd_add_relu", runtime::guarded<fwd_cpu<Affine::kWith, Epilogue::kAddRelu>>,
    DTNN_CUDA_FUNC((runtime::guarded<fwd_cuda<Affine::kWith, Epilogue::kAddRelu>>)),
    {STARPU_R, STARPU_R, STARPU_W, STARPU_R, STARPU_R, STARPU_R});
runtime::Codelet cl_batch_norm_infer_fwd_add_relu(
    "batch_norm_infer_fwd_add_relu", runtime::guarded<infer_fwd_cpu<Affine::kWith, Epilogue::kAddRelu>>,
    DTNN_CUDA_FUNC((runtime::guarded<infer_fwd_cuda<Affine::kWith, Epilogue::kAddRelu>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_R, STARPU_R, STARPU_R});
runtime::Codelet cl_batch_norm_fwd_noaffine(
    "batch_norm_fwd_noaffine", runtime::guarded<fwd_cpu<Affine::kWithout, Epilogue::kNone>>,
    DTNN_CUDA_FUNC((runtime::guarded<fwd_cuda<Affine::kWithout, Epilogue::kNone>>)),
    {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_batch_norm_infer_fwd_noaffine(
    "batch_norm_infer_fwd_noaffine", runtime::guarded<infer_fwd_cpu<Affine::kWithout, Epilogue::kNone>>,
    DTNN_CUDA_FUNC((runtime::guarded<infer_fwd_cuda<Affine::kWithout, Epilogue::kNone>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_batch_norm_fwd_noaffine_relu(
    "batch_norm_fwd_noaffine_relu", runtime::guarded<fwd_cpu<Affine::kWithout, Epilogue::kRelu>>,
    DTNN_CUDA_FUNC((runtime::guarded<fwd_cuda<Affine::kWithout, Epilogue::kRelu>>)),
    {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_batch_norm_infer_fwd_noaffine_relu(
    "batch_norm_infer_fwd_noaffine_relu", runtime::guarded<infer_fwd_cpu<Affine::kWithout, Epilogue::kRelu>>,
    DTNN_CUDA_FUNC((runtime::guarded<infer_fwd_cuda<Affine::kWithout, Epilogue::kRelu>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_batch_norm_fwd_noaffine_add(
    "batch_norm_fwd_noaffine_add", runtime::guarded<fwd_cpu<Affine::kWithout, Epilogue::kAdd>>,
    DTNN_CUDA_FUNC((runtime::guarded<fwd_cuda<Affine::kWithout, Epilogue::kAdd>>)),
    {STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_batch_norm_infer_fwd_noaffine_add(
    "batch_norm_infer_fwd_noaffine_add", runtime::guarded<infer_fwd_cpu<Affine::kWithout, Epilogue::kAdd>>,
    DTNN_CUDA_FUNC((runtime::guarded<infer_fwd_cuda<Affine::kWithout, Epilogue::kAdd>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_batch_norm_fwd_noaffine_add_relu(
    "batch_norm_fwd_noaffine_add_relu", runtime::guarded<fwd_cpu<Affine::kWithout, Epilogue::kAddRelu>>,
    DTNN_CUDA_FUNC((runtime::guarded<fwd_cuda<Affine::kWithout, Epilogue::kAddRelu>>)),
    {STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_batch_norm_infer_fwd_noaffine_add_relu(
    "batch_norm_infer_fwd_noaffine_add_relu", runtime::guarded<infer_fwd_cpu<Affine::kWithout, Epilogue::kAddRelu>>,
    DTNN_CUDA_FUNC((runtime::guarded<infer_fwd_cuda<Affine::kWithout, Epilogue::kAddRelu>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_batch_norm_frozen_stats("batch_norm_frozen_stats", runtime::guarded<frozen_stats_cpu>,
                                            DTNN_CUDA_FUNC(runtime::guarded<frozen_stats_cuda>),
                                            {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_batch_norm_bwd_sums(
    "batch_norm_bwd_sums", runtime::guarded<bwd_sums_cpu<Mask::kNone>>,
    DTNN_CUDA_FUNC((runtime::guarded<bwd_sums_cuda<Mask::kNone>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_batch_norm_bwd_sums_relu(
    "batch_norm_bwd_sums_relu", runtime::guarded<bwd_sums_cpu<Mask::kRelu>>,
    DTNN_CUDA_FUNC((runtime::guarded<bwd_sums_cuda<Mask::kRelu>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_batch_norm_bwd_data(
    "batch_norm_bwd_data", runtime::guarded<bwd_data_cpu<Stats::kBatch, Affine::kWith, Mask::kNone>>,
    DTNN_CUDA_FUNC((runtime::guarded<bwd_data_cuda<Stats::kBatch, Affine::kWith, Mask::kNone>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_R, STARPU_R});
runtime::Codelet cl_batch_norm_bwd_data_relu(
    "batch_norm_bwd_data_relu", runtime::guarded<bwd_data_cpu<Stats::kBatch, Affine::kWith, Mask::kRelu>>,
    DTNN_CUDA_FUNC((runtime::guarded<bwd_data_cuda<Stats::kBatch, Affine::kWith, Mask::kRelu>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_R, STARPU_R, STARPU_R});
runtime::Codelet cl_batch_norm_bwd_data_noaffine(
    "batch_norm_bwd_data_noaffine", runtime::guarded<bwd_data_cpu<Stats::kBatch, Affine::kWithout, Mask::kNone>>,
    DTNN_CUDA_FUNC((runtime::guarded<bwd_data_cuda<Stats::kBatch, Affine::kWithout, Mask::kNone>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_batch_norm_bwd_data_noaffine_relu(
    "batch_norm_bwd_data_noaffine_relu", runtime::guarded<bwd_data_cpu<Stats::kBatch, Affine::kWithout, Mask::kRelu>>,
    DTNN_CUDA_FUNC((runtime::guarded<bwd_data_cuda<Stats::kBatch, Affine::kWithout, Mask::kRelu>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_R, STARPU_R});
runtime::Codelet cl_batch_norm_bwd_data_frozen(
    "batch_norm_bwd_data_frozen", runtime::guarded<bwd_data_cpu<Stats::kFrozen, Affine::kWith, Mask::kNone>>,
    DTNN_CUDA_FUNC((runtime::guarded<bwd_data_cuda<Stats::kFrozen, Affine::kWith, Mask::kNone>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_batch_norm_bwd_data_frozen_relu(
    "batch_norm_bwd_data_frozen_relu", runtime::guarded<bwd_data_cpu<Stats::kFrozen, Affine::kWith, Mask::kRelu>>,
    DTNN_CUDA_FUNC((runtime::guarded<bwd_data_cuda<Stats::kFrozen, Affine::kWith, Mask::kRelu>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_R, STARPU_R});
runtime::Codelet cl_batch_norm_bwd_data_frozen_noaffine(
    "batch_norm_bwd_data_frozen_noaffine",
    runtime::guarded<bwd_data_cpu<Stats::kFrozen, Affine::kWithout, Mask::kNone>>,
    DTNN_CUDA_FUNC((runtime::guarded<bwd_data_cuda<Stats::kFrozen, Affine::kWithout, Mask::kNone>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_batch_norm_bwd_data_frozen_noaffine_relu(
    "batch_norm_bwd_data_frozen_noaffine_relu",
    runtime::guarded<bwd_data_cpu<Stats::kFrozen, Affine::kWithout, Mask::kRelu>>,
    DTNN_CUDA_FUNC((runtime::guarded<bwd_data_cuda<Stats::kFrozen, Affine::kWithout, Mask::kRelu>>)),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_R});

// [affine][epilogue]
runtime::Codelet* const kFwdCodelets[2][4] = {
    {&cl_batch_norm_fwd_noaffine, &cl_batch_norm_fwd_noaffine_relu, &cl_batch_norm_fwd_noaffine_add,
     &cl_batch_norm_fwd_noaffine_add_relu},
    {&cl_batch_norm_fwd, &cl_batch_norm_fwd_relu, &cl_batch_norm_fwd_add, &cl_batch_norm_fwd_add_relu}};
runtime::Codelet* const kInferFwdCodelets[2][4] = {
    {&cl_batch_norm_infer_fwd_noaffine, &cl_batch_norm_infer_fwd_noaffine_relu, &cl_batch_norm_infer_fwd_noaffine_add,
     &cl_batch_norm_infer_fwd_noaffine_add_relu},
    {&cl_batch_norm_infer_fwd, &cl_batch_norm_infer_fwd_relu, &cl_batch_norm_infer_fwd_add,
     &cl_batch_norm_infer_fwd_add_relu}};
// [batch statistics][affine][masked]
runtime::Codelet* const kBwdDataCodelets[2][2][2] = {
    {{&cl_batch_norm_bwd_data_frozen_noaffine, &cl_batch_norm_bwd_data_frozen_noaffine_relu},
     {&cl_batch_norm_bwd_data_frozen, &cl_batch_norm_bwd_data_frozen_relu}},
    {{&cl_batch_norm_bwd_data_noaffine, &cl_batch_norm_bwd_data_noaffine_relu},
     {&cl_batch_norm_bwd_data, &cl_batch_norm_bwd_data_relu}}};
// The output side of a pass in one type: dy and the fused ReLU's output (y) alike.
void check_same_dtype(const TaskTag& tag, const char* what, const Tensor& t, const Tensor& like) {
  if (t.dtype() != like.dtype()) check_dtype(tag, t, like.dtype(), what);
}

int epilogue_index(const BatchNormEpilogue& e) {
  return (e.residual != nullptr ? 2 : 0) + (e.relu ? 1 : 0);
}


void check_channels(const TaskTag& tag, int channels, const Tensor& x) {
  if (channels < 1 || x.row_elements() % channels != 0) {
    throw InvalidArgument(fmt::format("{}: batch norm of {} with {} channels, expected a multiple of the channels "
                                      "per sample",
                                      tag.layer, to_string(x.shape()), channels));
  }
}

void check_per_channel(const TaskTag& tag, const char* what, const Tensor& t, std::int64_t expected) {
  if (t.numel() != expected || t.tiles() != 1) {
    throw InvalidArgument(fmt::format("{}: batch norm {} {} ({} tiles), expected {} values in one tile", tag.layer,
                                      what, to_string(t.shape()), t.tiles(), expected));
  }
}

// The fused passes read a second batch tensor (the residual, the fused ReLU's output) of the input's shape and tiling.
void check_same_shape(const TaskTag& tag, const char* what, const Tensor& x, const Tensor& other) {
  if (other.shape() != x.shape() || other.tiles() != x.tiles()) {
    throw InvalidArgument(fmt::format("{}: batch norm {} {} ({} tiles), expected the input's shape {} ({} tiles)",
                                      tag.layer, what, to_string(other.shape()), other.tiles(), to_string(x.shape()),
                                      x.tiles()));
  }
}

void add_residual(const TaskTag& tag, const Tensor& x, const BatchNormEpilogue& e, int tile,
                  std::vector<runtime::Access>& data) {
  if (e.residual == nullptr) return;
  check_same_shape(tag, "residual", x, *e.residual);
  check_dtype(tag, *e.residual, DType::kFloat32, "residual");
  data.push_back(rd(e.residual->tile(tile)));
}

// Flops per value of the pass (3: subtract, multiply, add), plus the epilogue's add and ReLU.
double epilogue_flops(double base, const BatchNormEpilogue& e) {
  return base + (e.residual != nullptr ? 1.0 : 0.0) + (e.relu ? 1.0 : 0.0);
}

TileArgs tile_args(int channels, const Tensor& x, int tile) {
  return TileArgs{static_cast<std::size_t>(x.row_elements() / channels), static_cast<int>(x.tile_range(tile).count),
                  channels, 0.0};
}

double tile_values(const TileArgs& a) { return static_cast<double>(a.n) * a.c * static_cast<double>(a.plane); }

// The sample-order reduction of `partials` ([n, width], any tiling): as few tasks as StarPU's buffer limit allows,
// the last one also holding the `finals` that its finish writes.
void submit_reduce(const TaskTag& tag, std::string_view pass, ReduceArgs args, const Tensor& partials, Tensor& acc,
                   const std::vector<runtime::Access>& finals) {
  const int width = static_cast<int>(partials.row_elements());
  if (acc.tiles() != 1 || acc.numel() < 2 * static_cast<std::int64_t>(width)) {
    throw InvalidArgument(fmt::format("{}: batch norm accumulator {}, expected one tile of at least {} floats",
                                      tag.layer, to_string(acc.shape()), 2 * width));
  }
  constexpr int kMaxBuffers = STARPU_NMAXBUFS;
  const int tiles = partials.tiles();
  const double values = static_cast<double>(partials.numel());
  std::string name;
  args.width = width;
  if (tiles + static_cast<int>(finals.size()) <= kMaxBuffers) {
    args.nsrc = tiles;
    args.acc_in = args.acc_out = 0;
    std::vector<runtime::Access> data;
    for (int t = 0; t < tiles; ++t) data.push_back(rd(partials.tile(t)));
    data.insert(data.end(), finals.begin(), finals.end());
    runtime::submit_task(cl_batch_norm_reduce, task_info(tag, pass, -1, values, name), data, args);
    return;
  }
  // A chain: every task but the last adds up to kMaxBuffers - 1 tiles to the accumulator; the last adds what fits
  // beside the accumulator and the finals.
  const int last_capacity = kMaxBuffers - 1 - static_cast<int>(finals.size());
  int first = 0;
  while (true) {
    const int remaining = tiles - first;
    const int is_last = remaining <= last_capacity ? 1 : 0;
    const int nsrc = is_last ? remaining : std::min(kMaxBuffers - 1, remaining);
    args.nsrc = nsrc;
    args.acc_in = first > 0 ? 1 : 0;
    args.acc_out = is_last ? 0 : 1;
    std::vector<runtime::Access> data;
    for (int t = first; t < first + nsrc; ++t) data.push_back(rd(partials.tile(t)));
    const starpu_data_access_mode acc_mode = is_last ? STARPU_R : (first > 0 ? STARPU_RW : STARPU_W);
    data.push_back({acc.handle(), acc_mode});
    if (is_last) {
      data.insert(data.end(), finals.begin(), finals.end());
    }
    runtime::submit_task(cl_batch_norm_reduce,
                         task_info(tag, pass, -1, values * nsrc / std::max(tiles, 1), name), data, args);
    if (is_last) {
      return;
    }
    first += nsrc;
  }
}

}  // namespace

void submit_batch_norm_sums(const TaskTag& tag, int channels, const Tensor& x, Tensor& partials, int tile) {
  check_channels(tag, channels, x);
  check_same_tiling(tag, x, partials);
  const TileArgs a = tile_args(channels, x, tile);
  std::string name;
  runtime::submit_task(with_bf16(cl_batch_norm_sums, bf16_tensor(tag, x, "input"), false),
                       task_info(tag, "fwd_sum", tile, tile_values(a), name),
                       {rd(x.tile(tile)), wr(partials.tile(tile))}, a);
}

void submit_batch_norm_mean(const TaskTag& tag, double count, const Tensor& partials, Tensor& acc, Tensor& stats) {
  const int c = static_cast<int>(partials.row_elements());
  check_per_channel(tag, "statistics", stats, 2 * static_cast<std::int64_t>(c));
  ReduceArgs a{count, 0.0, 0.0, 0, c, 0, 0, 0, kMean, 0};
  submit_reduce(tag, "fwd_mean", a, partials, acc, {wr(stats.handle())});
}

void submit_batch_norm_sqdev_sums(const TaskTag& tag, int channels, const Tensor& x, const Tensor& stats,
                                  Tensor& partials, int tile) {
  check_channels(tag, channels, x);
  check_same_tiling(tag, x, partials);
  check_per_channel(tag, "statistics", stats, 2 * static_cast<std::int64_t>(channels));
  const TileArgs a = tile_args(channels, x, tile);
  std::string name;
  runtime::submit_task(with_bf16(cl_batch_norm_sqdev_sums, bf16_tensor(tag, x, "input"), false),
                       task_info(tag, "fwd_sqdev", tile, 3.0 * tile_values(a), name),
                       {rd(x.tile(tile)), rd(stats.handle()), wr(partials.tile(tile))}, a);
}

void submit_batch_norm_var(const TaskTag& tag, const BatchNormUpdate& update, const Tensor& partials,
                           Tensor& acc, Tensor& stats, Tensor& running_mean, Tensor& running_var, Tensor& batches) {
  const int c = static_cast<int>(partials.row_elements());
  check_per_channel(tag, "statistics", stats, 2 * static_cast<std::int64_t>(c));
  check_per_channel(tag, "running_mean", running_mean, c);
  check_per_channel(tag, "running_var", running_var, c);
  check_per_channel(tag, "num_batches_tracked", batches, 1);
  ReduceArgs a{update.count, update.eps, update.momentum, 0, c, 0, 0, 0, kVar, 0};
  submit_reduce(tag, "fwd_var", a, partials, acc,
                {rdwr(stats.handle()), rdwr(running_mean.handle()), rdwr(running_var.handle()),
                 rdwr(batches.handle())});
}

void submit_batch_norm_fwd(const TaskTag& tag, int channels, const Tensor& x, const Tensor& stats,
                           const Tensor* gamma, const Tensor* beta, Tensor& y, int tile,
                           const BatchNormEpilogue& epilogue) {
  check_channels(tag, channels, x);
  check_same_tiling(tag, x, y);
  const TileArgs a = tile_args(channels, x, tile);
  const bool affine = gamma != nullptr && beta != nullptr;
  std::vector<runtime::Access> data{rd(x.tile(tile)), rd(stats.handle()), wr(y.tile(tile))};
  if (affine) {
    data.push_back(rd(gamma->handle()));
    data.push_back(rd(beta->handle()));
  }
  add_residual(tag, x, epilogue, tile, data);
  std::string name;
  runtime::submit_task(with_bf16(*kFwdCodelets[affine ? 1 : 0][epilogue_index(epilogue)], bf16_tensor(tag, x, "input"),
                                 bf16_tensor(tag, y, "output")),
                       task_info(tag, "fwd", tile, epilogue_flops(3.0, epilogue) * tile_values(a), name), data, a);
}

void submit_batch_norm_infer_fwd(const TaskTag& tag, int channels, double eps, const Tensor& x,
                                 const Tensor& running_mean, const Tensor& running_var, const Tensor* gamma,
                                 const Tensor* beta, Tensor& y, int tile, const BatchNormEpilogue& epilogue) {
  check_channels(tag, channels, x);
  check_same_tiling(tag, x, y);
  TileArgs a = tile_args(channels, x, tile);
  a.eps = eps;
  const bool affine = gamma != nullptr && beta != nullptr;
  std::vector<runtime::Access> data{rd(x.tile(tile)), rd(running_mean.handle()), rd(running_var.handle()),
                                    wr(y.tile(tile))};
  if (affine) {
    data.push_back(rd(gamma->handle()));
    data.push_back(rd(beta->handle()));
  }
  add_residual(tag, x, epilogue, tile, data);
  std::string name;
  runtime::submit_task(with_bf16(*kInferFwdCodelets[affine ? 1 : 0][epilogue_index(epilogue)],
                                 bf16_tensor(tag, x, "input"), bf16_tensor(tag, y, "output")),
                       task_info(tag, "fwd", tile, epilogue_flops(2.0, epilogue) * tile_values(a), name), data, a);
}

void submit_batch_norm_frozen_stats(const TaskTag& tag, double eps, const Tensor& running_mean,
                                    const Tensor& running_var, Tensor& stats) {
  const int c = static_cast<int>(running_mean.numel());
  check_per_channel(tag, "running_var", running_var, c);
  check_per_channel(tag, "statistics", stats, 2 * static_cast<std::int64_t>(c));
  const TileArgs a{1, 1, c, eps};
  std::string name;
  runtime::submit_task(cl_batch_norm_frozen_stats, task_info(tag, "bwd_stats", -1, static_cast<double>(c), name),
                       {rd(running_mean.handle()), rd(running_var.handle()), wr(stats.handle())}, a);
}

void submit_batch_norm_bwd_sums(const TaskTag& tag, int channels, const Tensor& x, const Tensor& dy,
                                const Tensor& stats, Tensor& partials, int tile, const Tensor* relu_y) {
  check_channels(tag, channels, x);
  check_same_tiling(tag, x, dy);
  check_same_tiling(tag, x, partials);
  check_per_channel(tag, "statistics", stats, 2 * static_cast<std::int64_t>(channels));
  const TileArgs a = tile_args(channels, x, tile);
  std::vector<runtime::Access> data{rd(x.tile(tile)), rd(dy.tile(tile)), rd(stats.handle()), wr(partials.tile(tile))};
  if (relu_y != nullptr) {
    check_same_shape(tag, "ReLU output", x, *relu_y);
    check_same_dtype(tag, "ReLU output", *relu_y, dy);
    data.push_back(rd(relu_y->tile(tile)));
  }
  std::string name;
  runtime::submit_task(with_bf16(relu_y != nullptr ? cl_batch_norm_bwd_sums_relu : cl_batch_norm_bwd_sums,
                                 bf16_tensor(tag, x, "input"), bf16_tensor(tag, dy, "output gradient")),
                       task_info(tag, "bwd_sum", tile, (relu_y != nullptr ? 5.0 : 4.0) * tile_values(a), name), data,
                       a);
}

void submit_batch_norm_bwd_reduce(const TaskTag& tag, double count, const Tensor& partials, Tensor& acc,
                                  Tensor& grad_stats, Tensor* dgamma, Tensor* dbeta) {
  const int c = static_cast<int>(partials.row_elements() / 2);
  check_per_channel(tag, "gradient statistics", grad_stats, 2 * static_cast<std::int64_t>(c));
  const int affine = dgamma != nullptr && dbeta != nullptr ? 1 : 0;
  std::vector<runtime::Access> finals{wr(grad_stats.handle())};
  if (affine) {
    check_per_channel(tag, "weight gradient", *dgamma, c);
    check_per_channel(tag, "bias gradient", *dbeta, c);
    finals.push_back(wr(dgamma->handle()));
    finals.push_back(wr(dbeta->handle()));
  }
  ReduceArgs a{count, 0.0, 0.0, 0, c, 0, 0, 0, kBwd, affine};
  submit_reduce(tag, "bwd_weights", a, partials, acc, finals);
}

void submit_batch_norm_bwd_data(const TaskTag& tag, int channels, const Tensor& x, const Tensor& dy,
                                const Tensor& stats, const Tensor* grad_stats, const Tensor* gamma, Tensor& dx,
                                int tile, const Tensor* relu_y) {
  check_channels(tag, channels, x);
  check_same_tiling(tag, x, dy);
  check_same_tiling(tag, x, dx);
  const TileArgs a = tile_args(channels, x, tile);
  std::vector<runtime::Access> data{rd(x.tile(tile)), rd(dy.tile(tile)), rd(stats.handle()), wr(dx.tile(tile))};
  if (grad_stats != nullptr) data.push_back(rd(grad_stats->handle()));
  if (gamma != nullptr) data.push_back(rd(gamma->handle()));
  if (relu_y != nullptr) {
    check_same_shape(tag, "ReLU output", x, *relu_y);
    check_same_dtype(tag, "ReLU output", *relu_y, dy);
    data.push_back(rd(relu_y->tile(tile)));
  }
  std::string name;
  check_same_dtype(tag, "input gradient", dx, x);
  runtime::submit_task(
      with_bf16(*kBwdDataCodelets[grad_stats != nullptr ? 1 : 0][gamma != nullptr ? 1 : 0][relu_y != nullptr ? 1 : 0],
                bf16_tensor(tag, x, "input"), bf16_tensor(tag, dy, "output gradient")),
      task_info(tag, "bwd_data", tile, (relu_y != nullptr ? 6.0 : 5.0) * tile_values(a), name), data, a);
}

}  // namespace dtnn::codelets
