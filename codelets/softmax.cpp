// SPDX-License-Identifier: Apache-2.0
#include "codelets/softmax.hpp"

#include <fmt/format.h>

#include "codelets/cpu/nn_kernels.hpp"
#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/softmax.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

struct SoftmaxArgs {
  int n;
  int c;
  std::size_t plane;
};

void softmax_fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<SoftmaxArgs>(cl_arg);
  kernels::cpu::softmax_fwd(a.n, a.c, a.plane, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]));
}

void softmax_bwd_data_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<SoftmaxArgs>(cl_arg);
  kernels::cpu::softmax_bwd_data(a.n, a.c, a.plane, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                 runtime::vector_ptr(buffers[2]));
}

#ifdef DTNN_HAVE_CUDA
void softmax_fwd_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<SoftmaxArgs>(cl_arg);
  kernels::cuda::softmax_fwd(a.n, a.c, a.plane, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                             runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "softmax_fwd");
}

void softmax_bwd_data_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<SoftmaxArgs>(cl_arg);
  kernels::cuda::softmax_bwd_data(a.n, a.c, a.plane, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                  runtime::vector_ptr(buffers[2]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "softmax_bwd_data");
}
#endif

runtime::Codelet cl_softmax_fwd("softmax_fwd", runtime::guarded<softmax_fwd_cpu>,
                                DTNN_CUDA_FUNC(runtime::guarded<softmax_fwd_cuda>), {STARPU_R, STARPU_W});
runtime::Codelet cl_softmax_bwd_data("softmax_bwd_data", runtime::guarded<softmax_bwd_data_cpu>,
                                     DTNN_CUDA_FUNC(runtime::guarded<softmax_bwd_data_cuda>),
                                     {STARPU_R, STARPU_R, STARPU_W});

SoftmaxArgs args_for(const TaskTag& tag, const SoftmaxAxis& axis, const Tensor& t, int tile) {
  const std::int64_t span = axis.outer * axis.channels;
  if (axis.channels < 1 || axis.outer < 1 || t.row_elements() % span != 0) {
    throw InvalidArgument(fmt::format("{}: softmax of {} over {} channels at {} positions, expected a multiple of "
                                      "their product per sample",
                                      tag.layer, to_string(t.shape()), axis.channels, axis.outer));
  }
  return SoftmaxArgs{static_cast<int>(t.tile_range(tile).count * axis.outer), axis.channels,
                     static_cast<std::size_t>(t.row_elements() / span)};
}

double values(const SoftmaxArgs& a) { return static_cast<double>(a.n) * a.c * static_cast<double>(a.plane); }

}  // namespace

void submit_softmax_fwd(const TaskTag& tag, int channels, const Tensor& x, Tensor& y, int tile) {
  submit_softmax_fwd(tag, SoftmaxAxis{1, channels}, x, y, tile);
}

void submit_softmax_bwd_data(const TaskTag& tag, int channels, const Tensor& y, const Tensor& dy, Tensor& dx,
                             int tile) {
  submit_softmax_bwd_data(tag, SoftmaxAxis{1, channels}, y, dy, dx, tile);
}

void submit_softmax_fwd(const TaskTag& tag, const SoftmaxAxis& axis, const Tensor& x, Tensor& y, int tile) {
  check_same_tiling(tag, x, y);
  const SoftmaxArgs a = args_for(tag, axis, x, tile);
  std::string name;
  runtime::submit_task(cl_softmax_fwd, task_info(tag, "fwd", tile, 4.0 * values(a), name),
                       {rd(x.tile(tile)), wr(y.tile(tile))}, a);
}

void submit_softmax_bwd_data(const TaskTag& tag, const SoftmaxAxis& axis, const Tensor& y, const Tensor& dy,
                             Tensor& dx, int tile) {
  check_same_tiling(tag, y, dy);
  check_same_tiling(tag, y, dx);
  const SoftmaxArgs a = args_for(tag, axis, y, tile);
  std::string name;
  runtime::submit_task(cl_softmax_bwd_data, task_info(tag, "bwd_data", tile, 4.0 * values(a), name),
                       {rd(y.tile(tile)), rd(dy.tile(tile)), wr(dx.tile(tile))}, a);
}

}  // namespace dtnn::codelets
