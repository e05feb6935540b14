// SPDX-License-Identifier: Apache-2.0
#include "codelets/optimizers.hpp"

#include <initializer_list>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/optimizers.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

struct RmspropArgs {
  RmspropParams params;
  std::size_t count;
};

struct AdamArgs {
  AdamParams params;
  std::size_t count;
};

struct NadamArgs {
  NadamParams params;
  std::size_t count;
};

// RMSprop's state depends on its options: one codelet per combination of a momentum buffer and a gradient average
// (the centred variance), each with its fixed buffer list.
enum class Momentum { kWithout, kWith };
enum class Centered { kNo, kYes };

// Buffers: weights, gradient, square average, then the momentum buffer and the gradient average when the variant
// has them, in that order.
template <Momentum M, Centered C>
struct RmspropState {
  static constexpr int kMomentumBuf = 3;
  static constexpr int kGradAvg = M == Momentum::kWith ? 4 : 3;
  float* momentum_buf;
  float* grad_avg;
  explicit RmspropState(void** buffers)
      : momentum_buf(M == Momentum::kWith ? runtime::vector_ptr(buffers[kMomentumBuf]) : nullptr),
        grad_avg(C == Centered::kYes ? runtime::vector_ptr(buffers[kGradAvg]) : nullptr) {}
};

template <Momentum M, Centered C>
void rmsprop_update_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<RmspropArgs>(cl_arg);
  const RmspropState<M, C> state(buffers);
  kernels::cpu::rmsprop_update(a.count, a.params, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                               runtime::vector_ptr(buffers[2]), state.momentum_buf, state.grad_avg);
}

void adam_update_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<AdamArgs>(cl_arg);
  kernels::cpu::adam_update(a.count, a.params, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                            runtime::vector_ptr(buffers[2]), runtime::vector_ptr(buffers[3]));
}

void nadam_update_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<NadamArgs>(cl_arg);
  kernels::cpu::nadam_update(a.count, a.params, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                             runtime::vector_ptr(buffers[2]), runtime::vector_ptr(buffers[3]));
}

#ifdef DTNN_HAVE_CUDA
template <Momentum M, Centered C>
void rmsprop_update_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<RmspropArgs>(cl_arg);
  const RmspropState<M, C> state(buffers);
  kernels::cuda::rmsprop_update(a.count, a.params, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                runtime::vector_ptr(buffers[2]), state.momentum_buf, state.grad_avg,
                                runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "rmsprop_update");
}

void adam_update_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<AdamArgs>(cl_arg);
  kernels::cuda::adam_update(a.count, a.params, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                             runtime::vector_ptr(buffers[2]), runtime::vector_ptr(buffers[3]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "adam_update");
}

void nadam_update_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<NadamArgs>(cl_arg);
  kernels::cuda::nadam_update(a.count, a.params, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                              runtime::vector_ptr(buffers[2]), runtime::vector_ptr(buffers[3]),
                              runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "nadam_update");
}
#endif

// The hyper-parameters and bias corrections change every step; only the sizes distinguish the histories.
// Plain RMSprop keeps the name that traces showed before the variants had codelets of their own.
// DTNN_CUDA_FUNC((...)): the parentheses keep the template arguments' comma from splitting the macro argument.
runtime::Codelet cl_rmsprop_update(
    "rmsprop_update", runtime::guarded<rmsprop_update_cpu<Momentum::kWithout, Centered::kNo>>,
    DTNN_CUDA_FUNC((runtime::guarded<rmsprop_update_cuda<Momentum::kWithout, Centered::kNo>>)),
    {STARPU_RW, STARPU_R, STARPU_RW}, runtime::Footprint::kData);
runtime::Codelet cl_rmsprop_update_momentum(
    "rmsprop_update_momentum", runtime::guarded<rmsprop_update_cpu<Momentum::kWith, Centered::kNo>>,
    DTNN_CUDA_FUNC((runtime::guarded<rmsprop_update_cuda<Momentum::kWith, Centered::kNo>>)),
    {STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW}, runtime::Footprint::kData);
runtime::Codelet cl_rmsprop_update_centered(
    "rmsprop_update_centered", runtime::guarded<rmsprop_update_cpu<Momentum::kWithout, Centered::kYes>>,
    DTNN_CUDA_FUNC((runtime::guarded<rmsprop_update_cuda<Momentum::kWithout, Centered::kYes>>)),
    {STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW}, runtime::Footprint::kData);
runtime::Codelet cl_rmsprop_update_centered_momentum(
    "rmsprop_update_centered_momentum", runtime::guarded<rmsprop_update_cpu<Momentum::kWith, Centered::kYes>>,
    DTNN_CUDA_FUNC((runtime::guarded<rmsprop_update_cuda<Momentum::kWith, Centered::kYes>>)),
    {STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW, STARPU_RW}, runtime::Footprint::kData);
runtime::Codelet cl_adam_update("adam_update", runtime::guarded<adam_update_cpu>,
                                DTNN_CUDA_FUNC(runtime::guarded<adam_update_cuda>),
                                {STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW}, runtime::Footprint::kData);
runtime::Codelet cl_nadam_update("nadam_update", runtime::guarded<nadam_update_cpu>,
                                 DTNN_CUDA_FUNC(runtime::guarded<nadam_update_cuda>),
                                 {STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW}, runtime::Footprint::kData);

void check_sizes(const TaskTag& tag, const char* what, const Tensor& weights,
                 std::initializer_list<const Tensor*> others) {
  for (const Tensor* t : others) {
    if (t->numel() != weights.numel()) {
      throw InvalidArgument(fmt::format("{}: {} update of weights {} with a tensor of shape {}, expected equal sizes",
                                        tag.layer, what, to_string(weights.shape()), to_string(t->shape())));
    }
  }
}

}  // namespace

void submit_rmsprop_update(const TaskTag& tag, const RmspropParams& params, Tensor& weights,
                           const Tensor& grad, Tensor& square_avg, Tensor* momentum_buf, Tensor* grad_avg) {
  const int wants_momentum = params.momentum != 0.0f ? 1 : 0;
  const int wants_centered = params.centered != 0 ? 1 : 0;
  if (wants_momentum != (momentum_buf != nullptr ? 1 : 0) || wants_centered != (grad_avg != nullptr ? 1 : 0)) {
    throw InvalidArgument(fmt::format("{}: rmsprop update with momentum={} centered={}, expected a momentum buffer "
                                      "exactly when momentum != 0 and a gradient average exactly when centered",
                                      tag.layer, params.momentum, params.centered));
  }
  check_sizes(tag, "rmsprop", weights, {&grad, &square_avg});
  std::vector<runtime::Access> data{rdwr(weights.handle()), rd(grad.handle()), rdwr(square_avg.handle())};
  if (momentum_buf != nullptr) {
    check_sizes(tag, "rmsprop", weights, {momentum_buf});
    data.push_back(rdwr(momentum_buf->handle()));
  }
  if (grad_avg != nullptr) {
    check_sizes(tag, "rmsprop", weights, {grad_avg});
    data.push_back(rdwr(grad_avg->handle()));
  }
  const RmspropArgs a{params, static_cast<std::size_t>(weights.numel())};
  const double flops = (7.0 + 3.0 * wants_momentum + 4.0 * wants_centered) * static_cast<double>(a.count);
  // [momentum][centered]
  runtime::Codelet* const codelets[2][2] = {{&cl_rmsprop_update, &cl_rmsprop_update_centered},
                                            {&cl_rmsprop_update_momentum, &cl_rmsprop_update_centered_momentum}};
  std::string name;
  runtime::submit_task(*codelets[wants_momentum][wants_centered], task_info(tag, "update", -1, flops, name), data, a);
}

void submit_adam_update(const TaskTag& tag, const AdamParams& params, Tensor& weights,
                        const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq) {
  check_sizes(tag, "adam", weights, {&grad, &exp_avg, &exp_avg_sq});
  const AdamArgs a{params, static_cast<std::size_t>(weights.numel())};
  std::string name;
  runtime::submit_task(cl_adam_update, task_info(tag, "update", -1, 13.0 * static_cast<double>(a.count), name),
                       {rdwr(weights.handle()), rd(grad.handle()), rdwr(exp_avg.handle()), rdwr(exp_avg_sq.handle())},
                       a);
}

void submit_nadam_update(const TaskTag& tag, const NadamParams& params, Tensor& weights,
                         const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq) {
  check_sizes(tag, "nadam", weights, {&grad, &exp_avg, &exp_avg_sq});
  const NadamArgs a{params, static_cast<std::size_t>(weights.numel())};
  std::string name;
  runtime::submit_task(cl_nadam_update, task_info(tag, "update", -1, 15.0 * static_cast<double>(a.count), name),
                       {rdwr(weights.handle()), rd(grad.handle()), rdwr(exp_avg.handle()), rdwr(exp_avg_sq.handle())},
                       a);
}

}  // namespace dtnn::codelets
