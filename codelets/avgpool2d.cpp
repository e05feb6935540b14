// SPDX-License-Identifier: Apache-2.0
#include "codelets/avgpool2d.hpp"

#include "codelets/cpu/nn_kernels.hpp"
#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/pool.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {


struct AvgPoolArgs {
  Pool2dShape shape;
  int count_include_pad;
};

void avgpool2d_fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<AvgPoolArgs>(cl_arg);
  kernels::cpu::avgpool2d_fwd(a.shape, a.count_include_pad, runtime::vector_ptr(buffers[0]),
                              runtime::vector_ptr(buffers[1]));
}

void avgpool2d_bwd_data_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<AvgPoolArgs>(cl_arg);
  kernels::cpu::avgpool2d_bwd_data(a.shape, a.count_include_pad, runtime::vector_ptr(buffers[0]),
                                   runtime::vector_ptr(buffers[1]));
}

#ifdef DTNN_HAVE_CUDA
void avgpool2d_fwd_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<AvgPoolArgs>(cl_arg);
  kernels::cuda::avgpool2d_fwd(kernels::cuda::pool_geometry(a.shape), a.count_include_pad,
                               runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                               runtime::cuda::stream());
  runtime::cuda::check_launch("avgpool2d_fwd");
}

void avgpool2d_bwd_data_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<AvgPoolArgs>(cl_arg);
  kernels::cuda::avgpool2d_bwd_data(kernels::cuda::pool_geometry(a.shape), a.count_include_pad,
                                    runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                    runtime::cuda::stream());
  runtime::cuda::check_launch("avgpool2d_bwd_data");
}
#endif

runtime::Codelet cl_avgpool2d_fwd("avgpool2d_fwd", runtime::guarded<avgpool2d_fwd_cpu>,
                                  DTNN_CUDA_FUNC(runtime::guarded<avgpool2d_fwd_cuda>), {STARPU_R, STARPU_W});
runtime::Codelet cl_avgpool2d_bwd_data("avgpool2d_bwd_data", runtime::guarded<avgpool2d_bwd_data_cpu>,
                                       DTNN_CUDA_FUNC(runtime::guarded<avgpool2d_bwd_data_cuda>),
                                       {STARPU_R, STARPU_W});

AvgPoolArgs for_tile(Pool2dShape shape, int count_include_pad, const Tensor& batch, int tile) {
  shape.n = static_cast<int>(batch.tile_range(tile).count);
  return AvgPoolArgs{shape, count_include_pad};
}

double adds(const Pool2dShape& s) { return static_cast<double>(s.n) * s.c * s.out_h() * s.out_w() * s.kh * s.kw; }

}  // namespace

void submit_avgpool2d_fwd(const TaskTag& tag, const Pool2dShape& shape, int count_include_pad, const Tensor& x,
                          Tensor& y, int tile) {
  check_same_tiling(tag, x, y);
  const AvgPoolArgs a = for_tile(shape, count_include_pad, x, tile);
  std::string name;
  runtime::submit_task(cl_avgpool2d_fwd, task_info(tag, "fwd", tile, adds(a.shape), name),
                       {rd(x.tile(tile)), wr(y.tile(tile))}, a);
}

void submit_avgpool2d_bwd_data(const TaskTag& tag, const Pool2dShape& shape, int count_include_pad, const Tensor& dy,
                               Tensor& dx, int tile) {
  check_same_tiling(tag, dy, dx);
  const AvgPoolArgs a = for_tile(shape, count_include_pad, dx, tile);
  std::string name;
  runtime::submit_task(cl_avgpool2d_bwd_data, task_info(tag, "bwd_data", tile, adds(a.shape), name),
                       {rd(dy.tile(tile)), wr(dx.tile(tile))}, a);
}

}  // namespace dtnn::codelets
