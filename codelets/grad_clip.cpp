// SPDX-License-Identifier: Apache-2.0
#include "codelets/grad_clip.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "codelets/cpu/optim_kernels.hpp"
#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/optimizers.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

struct SumArgs {
  std::size_t count;
  int first;
};

struct ClipArgs {
  std::size_t count;
  float max_norm;
};

double load_double(const float* two_floats) {
  double v = 0.0;
  std::memcpy(&v, two_floats, sizeof v);
  return v;
}

// Buffers: gradient, accumulator.
void sum_of_squares_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<SumArgs>(cl_arg);
  float* acc = runtime::vector_ptr(buffers[1]);
  const double sum = (a.first != 0 ? 0.0 : load_double(acc)) +
                     kernels::cpu::sum_of_squares(a.count, runtime::vector_ptr(buffers[0]));
  std::memcpy(acc, &sum, sizeof sum);
}

// Buffers: accumulator, gradient.
void clip_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ClipArgs>(cl_arg);
  const float factor = kernels::cpu::clip_coefficient(load_double(runtime::vector_ptr(buffers[0])), a.max_norm);
  if (factor < 1.0f) kernels::cpu::scale_in_place(a.count, factor, runtime::vector_ptr(buffers[1]));
}

#ifdef DTNN_HAVE_CUDA
// The accumulator's two floats are one double on the device too (StarPU's buffers are at least 8-byte aligned).
void sum_of_squares_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<SumArgs>(cl_arg);
  void* scratch = runtime::cuda::workspace(kernels::cuda::sum_of_squares_scratch_bytes());
  kernels::cuda::sum_of_squares(a.count, runtime::vector_ptr(buffers[0]), a.first,
                                reinterpret_cast<double*>(runtime::vector_ptr(buffers[1])), scratch,
                                runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "grad_sum_of_squares");
}

void clip_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ClipArgs>(cl_arg);
  kernels::cuda::clip_grad(a.count, a.max_norm, reinterpret_cast<const double*>(runtime::vector_ptr(buffers[0])),
                           runtime::vector_ptr(buffers[1]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "clip_grad");
}
#endif

// The first link writes the accumulator, the others add to it: two codelets, so that StarPU sees the write.
runtime::Codelet cl_sum_first("grad_sum_of_squares", runtime::guarded<sum_of_squares_cpu>,
                              DTNN_CUDA_FUNC(runtime::guarded<sum_of_squares_cuda>), {STARPU_R, STARPU_W},
                              runtime::Footprint::kData);
runtime::Codelet cl_sum_next("grad_sum_of_squares_add", runtime::guarded<sum_of_squares_cpu>,
                             DTNN_CUDA_FUNC(runtime::guarded<sum_of_squares_cuda>), {STARPU_R, STARPU_RW},
                             runtime::Footprint::kData);
runtime::Codelet cl_clip("clip_grad", runtime::guarded<clip_cpu>, DTNN_CUDA_FUNC(runtime::guarded<clip_cuda>),
                         {STARPU_R, STARPU_RW}, runtime::Footprint::kData);

void check_accumulator(const TaskTag& tag, const Tensor& accumulator) {
  if (accumulator.numel() != 2) {
    throw InvalidArgument(fmt::format("{}: gradient-norm accumulator of {} values, expected 2 (one double)",
                                      tag.layer, accumulator.numel()));
  }
}

}  // namespace

void submit_grad_sum_of_squares(const TaskTag& tag, const Tensor& grad, Tensor& accumulator, bool first) {
  check_accumulator(tag, accumulator);
  const SumArgs a{static_cast<std::size_t>(grad.numel()), first ? 1 : 0};
  std::string name;
  runtime::submit_task(first ? cl_sum_first : cl_sum_next,
                       task_info(tag, "grad_norm", -1, 2.0 * static_cast<double>(a.count), name),
                       {rd(grad.handle()), first ? wr(accumulator.handle()) : rdwr(accumulator.handle())}, a);
}

void submit_clip_grad(const TaskTag& tag, const Tensor& accumulator, float max_norm, Tensor& grad) {
  check_accumulator(tag, accumulator);
  if (!(max_norm > 0.0f) || !std::isfinite(max_norm)) {
    throw InvalidArgument(fmt::format("{}: clip_grad_norm max_norm={}, expected a finite value > 0", tag.layer,
                                      max_norm));
  }
  const ClipArgs a{static_cast<std::size_t>(grad.numel()), max_norm};
  std::string name;
  runtime::submit_task(cl_clip, task_info(tag, "clip_grad", -1, static_cast<double>(a.count), name),
                       {rd(accumulator.handle()), rdwr(grad.handle())}, a);
}

double grad_norm_of(const Tensor& accumulator) {
  auto v = accumulator.read();
  return std::sqrt(load_double(v.data().data()));
}

}  // namespace dtnn::codelets
