// SPDX-License-Identifier: Apache-2.0
#include "codelets/loss.hpp"

#include <fmt/format.h>

#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/loss.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

struct LossArgs {
  int n;
  int classes;
  float grad_scale;
};

template <void (*Kernel)(int, int, const float*, const float*, float, float*, float*)>
void loss_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<LossArgs>(cl_arg);
  Kernel(a.n, a.classes, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]), a.grad_scale,
         runtime::vector_ptr(buffers[2]), runtime::vector_ptr(buffers[3]));
}

#ifdef DTNN_HAVE_CUDA
template <void (*Kernel)(int, int, const float*, const float*, float, float*, float*, void*, cudaStream_t)>
void loss_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<LossArgs>(cl_arg);
  void* scratch = runtime::cuda::workspace(kernels::cuda::loss_scratch_bytes(a.n));
  Kernel(a.n, a.classes, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]), a.grad_scale,
         runtime::vector_ptr(buffers[2]), runtime::vector_ptr(buffers[3]), scratch, runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "loss_fwd_bwd");
}
#endif

// Footprints by data sizes only: grad_scale is 1 / the global batch, which changes with the number of ranks, and
// a simulation of P ranks must find the models calibrated on one (docs/simulation.md).
runtime::Codelet cl_softmax_xent("softmax_xent_fwd_bwd", runtime::guarded<loss_cpu<kernels::cpu::softmax_xent_fwd_bwd>>,
                                 DTNN_CUDA_FUNC(runtime::guarded<loss_cuda<kernels::cuda::softmax_xent_fwd_bwd>>),
                                 {STARPU_R, STARPU_R, STARPU_W, STARPU_W}, runtime::Footprint::kData);
runtime::Codelet cl_sigmoid_bce("sigmoid_bce_fwd_bwd", runtime::guarded<loss_cpu<kernels::cpu::sigmoid_bce_fwd_bwd>>,
                                DTNN_CUDA_FUNC(runtime::guarded<loss_cuda<kernels::cuda::sigmoid_bce_fwd_bwd>>),
                                {STARPU_R, STARPU_R, STARPU_W, STARPU_W}, runtime::Footprint::kData);

struct TokenXentArgs {
  TokenXentParams params;
  int n;
  int classes;
  float grad_scale;
};

// Buffers: logits, targets (int32), dlogits, stats.
void token_xent_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<TokenXentArgs>(cl_arg);
  kernels::cpu::token_xent_fwd_bwd(a.n, a.classes, runtime::vector_ptr(buffers[0]),
                                   runtime::vector_ptr_as<const std::int32_t>(buffers[1]), a.params, a.grad_scale,
                                   runtime::vector_ptr(buffers[2]), runtime::vector_ptr(buffers[3]));
}

#ifdef DTNN_HAVE_CUDA
void token_xent_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<TokenXentArgs>(cl_arg);
  void* scratch = runtime::cuda::workspace(kernels::cuda::token_loss_scratch_bytes(a.n));
  kernels::cuda::token_xent_fwd_bwd(a.n, a.classes, runtime::vector_ptr(buffers[0]),
                                    runtime::vector_ptr_as<const std::int32_t>(buffers[1]), a.params, a.grad_scale,
                                    runtime::vector_ptr(buffers[2]), runtime::vector_ptr(buffers[3]), scratch,
                                    runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "token_xent_fwd_bwd");
}
#endif

// By data sizes, as the other losses.
runtime::Codelet cl_token_xent("token_xent_fwd_bwd", runtime::guarded<token_xent_cpu>,
                               DTNN_CUDA_FUNC(runtime::guarded<token_xent_cuda>),
                               {STARPU_R, STARPU_R, STARPU_W, STARPU_W}, runtime::Footprint::kData);

void check_stats(const TaskTag& tag, const Tensor& logits, const Tensor& stats, int width) {
  if (stats.tiles() != logits.tiles() || stats.row_elements() != width) {
    throw InvalidArgument(fmt::format("{}: stats {} in {} tiles, expected [{}, {}]", tag.layer,
                                      dtnn::to_string(stats.shape()), stats.tiles(), logits.tiles(), width));
  }
}

}  // namespace

const char* to_string(LossKind k) {
  return k == LossKind::kCategoricalCrossEntropy ? "categorical_cross_entropy" : "binary_cross_entropy";
}

void submit_loss_fwd_bwd(const TaskTag& tag, LossKind kind, const Tensor& logits, const Tensor& targets,
                         float grad_scale, Tensor& dlogits, Tensor& stats, int tile) {
  check_same_tiling(tag, logits, targets);
  check_same_tiling(tag, logits, dlogits);
  check_stats(tag, logits, stats, kLossStats);
  check_dtype(tag, logits, DType::kFloat32, "logits");
  check_dtype(tag, targets, DType::kFloat32, "targets");
  // Over the last axis: a sample of sequence logits (S, V) is S rows of V classes.
  const std::int64_t classes = logits.shape().back();
  const LossArgs a{static_cast<int>(logits.tile_range(tile).count * (logits.row_elements() / classes)),
                   static_cast<int>(classes), grad_scale};
  std::string name;
  runtime::submit_task(kind == LossKind::kCategoricalCrossEntropy ? cl_softmax_xent : cl_sigmoid_bce,
                       task_info(tag, "fwd_bwd", tile, 5.0 * a.n * a.classes, name),
                       {rd(logits.tile(tile)), rd(targets.tile(tile)), wr(dlogits.tile(tile)), wr(stats.tile(tile))},
                       a);
}

void submit_token_xent_fwd_bwd(const TaskTag& tag, const TokenXentParams& params, const Tensor& logits,
                               const Tensor& targets, float grad_scale, Tensor& dlogits, Tensor& stats, int tile) {
  check_same_tiling(tag, logits, targets);
  check_same_tiling(tag, logits, dlogits);
  check_stats(tag, logits, stats, kTokenLossStats);
  check_dtype(tag, logits, DType::kFloat32, "logits");
  check_dtype(tag, dlogits, DType::kFloat32, "logits' gradient");
  check_dtype(tag, targets, DType::kInt32, "targets");
  const std::int64_t classes = logits.shape().back();
  const std::int64_t positions = logits.row_elements() / classes;
  if (logits.shape().size() < 2 || targets.row_elements() != positions || dlogits.shape() != logits.shape()) {
    throw InvalidArgument(fmt::format("{}: token cross-entropy of logits {} against targets {}, expected one target "
                                      "per position of the logits' last axis ({} per sample) and a gradient {}",
                                      tag.layer, dtnn::to_string(logits.shape()), dtnn::to_string(targets.shape()),
                                      positions, dtnn::to_string(logits.shape())));
  }
  // Written so that NaN fails too.
  if (!(params.label_smoothing >= 0.0f && params.label_smoothing <= 1.0f)) {
    throw InvalidArgument(fmt::format("{}: label_smoothing={}, expected 0 <= label_smoothing <= 1", tag.layer,
                                      params.label_smoothing));
  }
  const TokenXentArgs a{params, static_cast<int>(logits.tile_range(tile).count * positions),
                        static_cast<int>(classes), grad_scale};
  std::string name;
  runtime::submit_task(cl_token_xent, task_info(tag, "fwd_bwd", tile, 5.0 * a.n * a.classes, name),
                       {rd(logits.tile(tile)), rd(targets.tile(tile)), wr(dlogits.tile(tile)), wr(stats.tile(tile))},
                       a);
}

}  // namespace dtnn::codelets
