// SPDX-License-Identifier: Apache-2.0
#include "codelets/maxpool2d.hpp"

#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/pool.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {


void maxpool2d_fwd_cpu(void** buffers, void* cl_arg) {
  kernels::cpu::maxpool2d_fwd(runtime::task_args<Pool2dShape>(cl_arg), runtime::vector_ptr(buffers[0]),
                              runtime::vector_ptr(buffers[1]));
}

void maxpool2d_bwd_data_cpu(void** buffers, void* cl_arg) {
  kernels::cpu::maxpool2d_bwd_data(runtime::task_args<Pool2dShape>(cl_arg), runtime::vector_ptr(buffers[0]),
                                   runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[2]));
}

#ifdef DTNN_HAVE_CUDA
void maxpool2d_fwd_cuda(void** buffers, void* cl_arg) {
  const auto g = kernels::cuda::pool_geometry(runtime::task_args<Pool2dShape>(cl_arg));
  kernels::cuda::maxpool2d_fwd(g, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                               runtime::cuda::stream());
  runtime::cuda::check_launch("maxpool2d_fwd");
}

void maxpool2d_bwd_data_cuda(void** buffers, void* cl_arg) {
  const auto g = kernels::cuda::pool_geometry(runtime::task_args<Pool2dShape>(cl_arg));
  kernels::cuda::maxpool2d_bwd_data(g, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                    runtime::vector_ptr(buffers[2]), runtime::cuda::stream());
  runtime::cuda::check_launch("maxpool2d_bwd_data");
}
#endif

runtime::Codelet cl_maxpool2d_fwd("maxpool2d_fwd", runtime::guarded<maxpool2d_fwd_cpu>,
                                  DTNN_CUDA_FUNC(runtime::guarded<maxpool2d_fwd_cuda>), {STARPU_R, STARPU_W});
runtime::Codelet cl_maxpool2d_bwd_data("maxpool2d_bwd_data", runtime::guarded<maxpool2d_bwd_data_cpu>,
                                       DTNN_CUDA_FUNC(runtime::guarded<maxpool2d_bwd_data_cuda>),
                                       {STARPU_R, STARPU_R, STARPU_W});

Pool2dShape for_tile(Pool2dShape shape, const Tensor& x, int tile) {
  shape.n = static_cast<int>(x.tile_range(tile).count);
  return shape;
}

double compares(const Pool2dShape& s) {
  return static_cast<double>(s.n) * s.c * s.out_h() * s.out_w() * s.kh * s.kw;
}

}  // namespace

void submit_maxpool2d_fwd(const TaskTag& tag, const Pool2dShape& shape, const Tensor& x, Tensor& y, int tile) {
  check_same_tiling(tag, x, y);
  const Pool2dShape a = for_tile(shape, x, tile);
  std::string name;
  runtime::submit_task(cl_maxpool2d_fwd, task_info(tag, "fwd", tile, compares(a), name),
                       {rd(x.tile(tile)), wr(y.tile(tile))}, a);
}

void submit_maxpool2d_bwd_data(const TaskTag& tag, const Pool2dShape& shape, const Tensor& x, const Tensor& dy,
                               Tensor& dx, int tile) {
  check_same_tiling(tag, x, dx);
  const Pool2dShape a = for_tile(shape, x, tile);
  std::string name;
  runtime::submit_task(cl_maxpool2d_bwd_data, task_info(tag, "bwd_data", tile, compares(a), name),
                       {rd(x.tile(tile)), rd(dy.tile(tile)), wr(dx.tile(tile))}, a);
}

}  // namespace dtnn::codelets
