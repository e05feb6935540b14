// SPDX-License-Identifier: Apache-2.0
#include "codelets/softmax_xent.hpp"

#include "codelets/cpu/kernels.hpp"
#include "runtime/failure.hpp"

namespace dtnn::codelets {
namespace {

struct XentArgs {
  int n;
  int classes;
  float grad_scale;
};

void softmax_xent_fwd_bwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<XentArgs>(cl_arg);
  kernels::cpu::softmax_xent_fwd_bwd(a.n, a.classes, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                     a.grad_scale, runtime::vector_ptr(buffers[2]), runtime::vector_ptr(buffers[3]));
}

runtime::Codelet cl_softmax_xent_fwd_bwd("softmax_xent_fwd_bwd", runtime::guarded<softmax_xent_fwd_bwd_cpu>,
                                         {STARPU_R, STARPU_R, STARPU_W, STARPU_W});

}  // namespace

void submit_softmax_xent_fwd_bwd(const TaskTag& tag, const Tensor& logits, const Tensor& targets, float grad_scale,
                                 Tensor& dlogits, Tensor& stats, int tile) {
  check_same_tiling(tag, logits, targets);
  check_same_tiling(tag, logits, dlogits);
  if (stats.tiles() != logits.tiles()) {
    throw InvalidArgument(fmt::format("{}: stats has {} tiles, expected {}", tag.layer, stats.tiles(), logits.tiles()));
  }
  const XentArgs a{static_cast<int>(logits.tile_range(tile).count), static_cast<int>(logits.row_elements()),
                   grad_scale};
  std::string name;
  runtime::submit_task(cl_softmax_xent_fwd_bwd, task_info(tag, "fwd_bwd", tile, 5.0 * a.n * a.classes, name),
                       {rd(logits.tile(tile)), rd(targets.tile(tile)), wr(dlogits.tile(tile)), wr(stats.tile(tile))},
                       a);
}

}  // namespace dtnn::codelets
