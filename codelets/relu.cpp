// SPDX-License-Identifier: Apache-2.0
#include "codelets/relu.hpp"

#include "codelets/cpu/kernels.hpp"
#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/elementwise.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

struct ReluArgs {
  std::size_t count;
};

void relu_fwd_cpu(void** buffers, void* cl_arg) {
  kernels::cpu::relu_fwd(runtime::task_args<ReluArgs>(cl_arg).count, runtime::vector_ptr(buffers[0]),
                         runtime::vector_ptr(buffers[1]));
}

void relu_bwd_data_cpu(void** buffers, void* cl_arg) {
  kernels::cpu::relu_bwd_data(runtime::task_args<ReluArgs>(cl_arg).count, runtime::vector_ptr(buffers[0]),
                              runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[2]));
}

#ifdef DTNN_HAVE_CUDA
void relu_fwd_cuda(void** buffers, void* cl_arg) {
  kernels::cuda::relu_fwd(runtime::task_args<ReluArgs>(cl_arg).count, runtime::vector_ptr(buffers[0]),
                          runtime::vector_ptr(buffers[1]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "relu_fwd");
}

void relu_bwd_data_cuda(void** buffers, void* cl_arg) {
  kernels::cuda::relu_bwd_data(runtime::task_args<ReluArgs>(cl_arg).count, runtime::vector_ptr(buffers[0]),
                               runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[2]),
                               runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "relu_bwd_data");
}

void relu_bwd_data_add_cuda(void** buffers, void* cl_arg) {
  kernels::cuda::relu_bwd_data_add(runtime::task_args<ReluArgs>(cl_arg).count, runtime::vector_ptr(buffers[0]),
                                   runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[2]),
                                   runtime::vector_ptr(buffers[3]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "relu_bwd_data_add");
}
#endif

// Buffers: y, dy, other, dx.
void relu_bwd_data_add_cpu(void** buffers, void* cl_arg) {
  kernels::cpu::relu_bwd_data_add(runtime::task_args<ReluArgs>(cl_arg).count, runtime::vector_ptr(buffers[0]),
                                  runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[2]),
                                  runtime::vector_ptr(buffers[3]));
}

runtime::Codelet cl_relu_fwd("relu_fwd", runtime::guarded<relu_fwd_cpu>,
                             DTNN_CUDA_FUNC(runtime::guarded<relu_fwd_cuda>), {STARPU_R, STARPU_W});
runtime::Codelet cl_relu_bwd_data("relu_bwd_data", runtime::guarded<relu_bwd_data_cpu>,
                                  DTNN_CUDA_FUNC(runtime::guarded<relu_bwd_data_cuda>),
                                  {STARPU_R, STARPU_R, STARPU_W});

runtime::Codelet cl_relu_bwd_data_add("relu_bwd_data_add", runtime::guarded<relu_bwd_data_add_cpu>,
                                      DTNN_CUDA_FUNC(runtime::guarded<relu_bwd_data_add_cuda>),
                                      {STARPU_R, STARPU_R, STARPU_R, STARPU_W});

std::size_t tile_elements(const Tensor& t, int tile) {
  return static_cast<std::size_t>(t.tile_range(tile).count * t.row_elements());
}

}  // namespace

void submit_relu_fwd(const TaskTag& tag, const Tensor& x, Tensor& y, int tile) {
  check_same_tiling(tag, x, y);
  const ReluArgs a{tile_elements(x, tile)};
  std::string name;
  runtime::submit_task(cl_relu_fwd, task_info(tag, "fwd", tile, static_cast<double>(a.count), name),
                       {rd(x.tile(tile)), wr(y.tile(tile))}, a);
}

void submit_relu_bwd_data(const TaskTag& tag, const Tensor& y, const Tensor& dy, Tensor& dx, int tile) {
  check_same_tiling(tag, y, dx);
  const ReluArgs a{tile_elements(y, tile)};
  std::string name;
  runtime::submit_task(cl_relu_bwd_data, task_info(tag, "bwd_data", tile, static_cast<double>(a.count), name),
                       {rd(y.tile(tile)), rd(dy.tile(tile)), wr(dx.tile(tile))}, a);
}

void submit_relu_bwd_data_add(const TaskTag& tag, std::string_view pass, const Tensor& y, const Tensor& dy,
                              const Tensor& other, Tensor& dx, int tile) {
  check_same_tiling(tag, y, dy);
  check_same_tiling(tag, y, other);
  check_same_tiling(tag, y, dx);
  const ReluArgs a{tile_elements(y, tile)};
  std::string name;
  runtime::submit_task(cl_relu_bwd_data_add, task_info(tag, pass, tile, 2.0 * static_cast<double>(a.count), name),
                       {rd(y.tile(tile)), rd(dy.tile(tile)), rd(other.tile(tile)), wr(dx.tile(tile))}, a);
}

}  // namespace dtnn::codelets
