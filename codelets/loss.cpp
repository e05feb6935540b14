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

}  // namespace

const char* to_string(LossKind k) {
  return k == LossKind::kCategoricalCrossEntropy ? "categorical_cross_entropy" : "binary_cross_entropy";
}

void submit_loss_fwd_bwd(const TaskTag& tag, LossKind kind, const Tensor& logits, const Tensor& targets,
                         float grad_scale, Tensor& dlogits, Tensor& stats, int tile) {
  check_same_tiling(tag, logits, targets);
  check_same_tiling(tag, logits, dlogits);
  if (stats.tiles() != logits.tiles() || stats.row_elements() != kLossStats) {
    throw InvalidArgument(fmt::format("{}: stats {} in {} tiles, expected [{}, {}]", tag.layer, dtnn::to_string(stats.shape()),
                                      stats.tiles(), logits.tiles(), kLossStats));
  }
  const LossArgs a{static_cast<int>(logits.tile_range(tile).count), static_cast<int>(logits.row_elements()),
                   grad_scale};
  std::string name;
  runtime::submit_task(kind == LossKind::kCategoricalCrossEntropy ? cl_softmax_xent : cl_sigmoid_bce,
                       task_info(tag, "fwd_bwd", tile, 5.0 * a.n * a.classes, name),
                       {rd(logits.tile(tile)), rd(targets.tile(tile)), wr(dlogits.tile(tile)), wr(stats.tile(tile))},
                       a);
}

}  // namespace dtnn::codelets
