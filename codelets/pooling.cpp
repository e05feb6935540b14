// SPDX-License-Identifier: Apache-2.0
#include "codelets/pooling.hpp"

#include <fmt/format.h>

#include "codelets/cpu/kernels.hpp"
#include "codelets/cpu/nn_kernels.hpp"
#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/pooling.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

// The window geometry of one tile's rows.
Pool2dShape for_tile(Pool2dShape shape, const Tensor& batch, int tile) {
  shape.n = static_cast<int>(batch.tile_range(tile).count);
  return shape;
}

// Cells visited, the task's cost for max and average pooling alike.
double window_cells(const Pool2dShape& s) {
  return static_cast<double>(s.n) * s.c * s.out_h() * s.out_w() * s.kh * s.kw;
}

// ---- Max pooling ----

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
  DTNN_CUDA_CHECK(cudaGetLastError(), "maxpool2d_fwd");
}

void maxpool2d_bwd_data_cuda(void** buffers, void* cl_arg) {
  const auto g = kernels::cuda::pool_geometry(runtime::task_args<Pool2dShape>(cl_arg));
  kernels::cuda::maxpool2d_bwd_data(g, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                    runtime::vector_ptr(buffers[2]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "maxpool2d_bwd_data");
}
#endif

runtime::Codelet cl_maxpool2d_fwd("maxpool2d_fwd", runtime::guarded<maxpool2d_fwd_cpu>,
                                  DTNN_CUDA_FUNC(runtime::guarded<maxpool2d_fwd_cuda>), {STARPU_R, STARPU_W});
runtime::Codelet cl_maxpool2d_bwd_data("maxpool2d_bwd_data", runtime::guarded<maxpool2d_bwd_data_cpu>,
                                       DTNN_CUDA_FUNC(runtime::guarded<maxpool2d_bwd_data_cuda>),
                                       {STARPU_R, STARPU_R, STARPU_W});

// ---- Average pooling ----

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
  DTNN_CUDA_CHECK(cudaGetLastError(), "avgpool2d_fwd");
}

void avgpool2d_bwd_data_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<AvgPoolArgs>(cl_arg);
  kernels::cuda::avgpool2d_bwd_data(kernels::cuda::pool_geometry(a.shape), a.count_include_pad,
                                    runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                    runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "avgpool2d_bwd_data");
}
#endif

runtime::Codelet cl_avgpool2d_fwd("avgpool2d_fwd", runtime::guarded<avgpool2d_fwd_cpu>,
                                  DTNN_CUDA_FUNC(runtime::guarded<avgpool2d_fwd_cuda>), {STARPU_R, STARPU_W});
runtime::Codelet cl_avgpool2d_bwd_data("avgpool2d_bwd_data", runtime::guarded<avgpool2d_bwd_data_cpu>,
                                       DTNN_CUDA_FUNC(runtime::guarded<avgpool2d_bwd_data_cuda>),
                                       {STARPU_R, STARPU_W});

// ---- Global average pooling ----

struct GlobalPoolArgs {
  int n;
  int c;
  std::size_t plane;
};

void global_avgpool2d_fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<GlobalPoolArgs>(cl_arg);
  kernels::cpu::global_avgpool2d_fwd(a.n, a.c, a.plane, runtime::vector_ptr(buffers[0]),
                                     runtime::vector_ptr(buffers[1]));
}

void global_avgpool2d_bwd_data_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<GlobalPoolArgs>(cl_arg);
  kernels::cpu::global_avgpool2d_bwd_data(a.n, a.c, a.plane, runtime::vector_ptr(buffers[0]),
                                          runtime::vector_ptr(buffers[1]));
}

#ifdef DTNN_HAVE_CUDA
void global_avgpool2d_fwd_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<GlobalPoolArgs>(cl_arg);
  kernels::cuda::global_avgpool2d_fwd(a.n, a.c, a.plane, runtime::vector_ptr(buffers[0]),
                                      runtime::vector_ptr(buffers[1]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "global_avgpool2d_fwd");
}

void global_avgpool2d_bwd_data_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<GlobalPoolArgs>(cl_arg);
  kernels::cuda::global_avgpool2d_bwd_data(a.n, a.c, a.plane, runtime::vector_ptr(buffers[0]),
                                           runtime::vector_ptr(buffers[1]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "global_avgpool2d_bwd_data");
}
#endif

runtime::Codelet cl_global_avgpool2d_fwd("global_avgpool2d_fwd", runtime::guarded<global_avgpool2d_fwd_cpu>,
                                         DTNN_CUDA_FUNC(runtime::guarded<global_avgpool2d_fwd_cuda>),
                                         {STARPU_R, STARPU_W});
runtime::Codelet cl_global_avgpool2d_bwd_data("global_avgpool2d_bwd_data",
                                              runtime::guarded<global_avgpool2d_bwd_data_cpu>,
                                              DTNN_CUDA_FUNC(runtime::guarded<global_avgpool2d_bwd_data_cuda>),
                                              {STARPU_R, STARPU_W});

// The feature map is the tensor with the plane (x in forward, dx in backward).
GlobalPoolArgs args_for(int channels, const Tensor& map, int tile) {
  return GlobalPoolArgs{static_cast<int>(map.tile_range(tile).count), channels,
                        static_cast<std::size_t>(map.row_elements() / channels)};
}

void check_global_sizes(const TaskTag& tag, int channels, const Tensor& map, const Tensor& pooled) {
  check_same_tiling(tag, map, pooled);
  if (channels < 1 || pooled.row_elements() != channels || map.row_elements() % channels != 0) {
    throw InvalidArgument(fmt::format("{}: global pooling of {} into {}, expected {} channels in both", tag.layer,
                                      to_string(map.shape()), to_string(pooled.shape()), channels));
  }
}

}  // namespace

void submit_maxpool2d_fwd(const TaskTag& tag, const Pool2dShape& shape, const Tensor& x, Tensor& y, int tile) {
  check_same_tiling(tag, x, y);
  const Pool2dShape a = for_tile(shape, x, tile);
  std::string name;
  runtime::submit_task(cl_maxpool2d_fwd, task_info(tag, "fwd", tile, window_cells(a), name),
                       {rd(x.tile(tile)), wr(y.tile(tile))}, a);
}

void submit_maxpool2d_bwd_data(const TaskTag& tag, const Pool2dShape& shape, const Tensor& x, const Tensor& dy,
                               Tensor& dx, int tile) {
  check_same_tiling(tag, x, dx);
  const Pool2dShape a = for_tile(shape, x, tile);
  std::string name;
  runtime::submit_task(cl_maxpool2d_bwd_data, task_info(tag, "bwd_data", tile, window_cells(a), name),
                       {rd(x.tile(tile)), rd(dy.tile(tile)), wr(dx.tile(tile))}, a);
}

void submit_avgpool2d_fwd(const TaskTag& tag, const Pool2dShape& shape, int count_include_pad, const Tensor& x,
                          Tensor& y, int tile) {
  check_same_tiling(tag, x, y);
  const AvgPoolArgs a{for_tile(shape, x, tile), count_include_pad};
  std::string name;
  runtime::submit_task(cl_avgpool2d_fwd, task_info(tag, "fwd", tile, window_cells(a.shape), name),
                       {rd(x.tile(tile)), wr(y.tile(tile))}, a);
}

void submit_avgpool2d_bwd_data(const TaskTag& tag, const Pool2dShape& shape, int count_include_pad, const Tensor& dy,
                               Tensor& dx, int tile) {
  check_same_tiling(tag, dy, dx);
  const AvgPoolArgs a{for_tile(shape, dx, tile), count_include_pad};
  std::string name;
  runtime::submit_task(cl_avgpool2d_bwd_data, task_info(tag, "bwd_data", tile, window_cells(a.shape), name),
                       {rd(dy.tile(tile)), wr(dx.tile(tile))}, a);
}

void submit_global_avgpool2d_fwd(const TaskTag& tag, int channels, const Tensor& x, Tensor& y, int tile) {
  check_global_sizes(tag, channels, x, y);
  const GlobalPoolArgs a = args_for(channels, x, tile);
  std::string name;
  runtime::submit_task(cl_global_avgpool2d_fwd,
                       task_info(tag, "fwd", tile, static_cast<double>(a.n) * a.c * static_cast<double>(a.plane), name),
                       {rd(x.tile(tile)), wr(y.tile(tile))}, a);
}

void submit_global_avgpool2d_bwd_data(const TaskTag& tag, int channels, const Tensor& dy, Tensor& dx, int tile) {
  check_global_sizes(tag, channels, dx, dy);
  const GlobalPoolArgs a = args_for(channels, dx, tile);
  std::string name;
  runtime::submit_task(cl_global_avgpool2d_bwd_data,
                       task_info(tag, "bwd_data", tile, static_cast<double>(a.n) * a.c * static_cast<double>(a.plane),
                                 name),
                       {rd(dy.tile(tile)), wr(dx.tile(tile))}, a);
}

}  // namespace dtnn::codelets
