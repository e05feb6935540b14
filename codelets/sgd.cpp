// SPDX-License-Identifier: Apache-2.0
#include "codelets/sgd.hpp"

#include <fmt/format.h>

#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/optimizers.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

struct SgdArgs {
  SgdParams params;
  std::size_t count;
};

void sgd_update_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<SgdArgs>(cl_arg);
  kernels::cpu::sgd_update(a.count, a.params, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                           runtime::vector_ptr(buffers[2]));
}

#ifdef DTNN_HAVE_CUDA
void sgd_update_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<SgdArgs>(cl_arg);
  kernels::cuda::sgd_update(a.count, a.params, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                            runtime::vector_ptr(buffers[2]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "sgd_update");
}
#endif

// The learning rate changes with the schedule; only the sizes distinguish the model's histories.
runtime::Codelet cl_sgd_update("sgd_update", runtime::guarded<sgd_update_cpu>,
                               DTNN_CUDA_FUNC(runtime::guarded<sgd_update_cuda>), {STARPU_RW, STARPU_R, STARPU_RW},
                               runtime::Footprint::kData);

}  // namespace

void submit_sgd_update(const TaskTag& tag, const SgdParams& params, Tensor& weights,
                       const Tensor& grad, Tensor& velocity) {
  if (weights.numel() != grad.numel() || weights.numel() != velocity.numel()) {
    throw InvalidArgument(fmt::format("{}: sgd update of {} with gradient {} and velocity {}, expected equal sizes",
                                      tag.layer, to_string(weights.shape()), to_string(grad.shape()),
                                      to_string(velocity.shape())));
  }
  const SgdArgs a{params, static_cast<std::size_t>(weights.numel())};
  std::string name;
  runtime::submit_task(cl_sgd_update, task_info(tag, "update", -1, 4.0 * static_cast<double>(a.count), name),
                       {rdwr(weights.handle()), rd(grad.handle()), rdwr(velocity.handle())}, a);
}

}  // namespace dtnn::codelets
