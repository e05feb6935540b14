// SPDX-License-Identifier: Apache-2.0
#include "codelets/dense.hpp"

#include "codelets/cpu/kernels.hpp"
#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/dense.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

struct DenseArgs {
  int n;
  int in;
  int out;
  int has_bias;
};

void dense_fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<DenseArgs>(cl_arg);
  const float* b = a.has_bias ? runtime::vector_ptr(buffers[2]) : nullptr;
  kernels::cpu::dense_fwd(a.n, a.in, a.out, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]), b,
                          runtime::vector_ptr(buffers[a.has_bias ? 3 : 2]));
}

void dense_bwd_data_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<DenseArgs>(cl_arg);
  kernels::cpu::dense_bwd_data(a.n, a.in, a.out, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                               runtime::vector_ptr(buffers[2]));
}

void dense_bwd_weights_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<DenseArgs>(cl_arg);
  float* db = a.has_bias ? runtime::vector_ptr(buffers[3]) : nullptr;
  kernels::cpu::dense_bwd_weights(a.n, a.in, a.out, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                  runtime::vector_ptr(buffers[2]), db);
}

#ifdef DTNN_HAVE_CUDA
void dense_fwd_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<DenseArgs>(cl_arg);
  const float* b = a.has_bias ? runtime::vector_ptr(buffers[2]) : nullptr;
  kernels::cuda::dense_fwd(a.n, a.in, a.out, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]), b,
                           runtime::vector_ptr(buffers[a.has_bias ? 3 : 2]), runtime::cuda::cublas(),
                           runtime::cuda::stream());
  runtime::cuda::check_launch("dense_fwd");
}

void dense_bwd_data_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<DenseArgs>(cl_arg);
  kernels::cuda::dense_bwd_data(a.n, a.in, a.out, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                runtime::vector_ptr(buffers[2]), runtime::cuda::cublas(), runtime::cuda::stream());
  runtime::cuda::check_launch("dense_bwd_data");
}

void dense_bwd_weights_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<DenseArgs>(cl_arg);
  float* db = a.has_bias ? runtime::vector_ptr(buffers[3]) : nullptr;
  kernels::cuda::dense_bwd_weights(a.n, a.in, a.out, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                   runtime::vector_ptr(buffers[2]), db, runtime::cuda::cublas(),
                                   runtime::cuda::stream());
  runtime::cuda::check_launch("dense_bwd_weights");
}
#endif

runtime::Codelet cl_dense_fwd("dense_fwd", runtime::guarded<dense_fwd_cpu>,
                              DTNN_CUDA_FUNC(runtime::guarded<dense_fwd_cuda>), {});
runtime::Codelet cl_dense_bwd_data("dense_bwd_data", runtime::guarded<dense_bwd_data_cpu>,
                                   DTNN_CUDA_FUNC(runtime::guarded<dense_bwd_data_cuda>),
                                   {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_dense_bwd_weights("dense_bwd_weights", runtime::guarded<dense_bwd_weights_cpu>,
                                      DTNN_CUDA_FUNC(runtime::guarded<dense_bwd_weights_cuda>), {});

DenseArgs args_for(const Tensor& x_or_dx, const Tensor& w, int tile, int has_bias) {
  return DenseArgs{static_cast<int>(x_or_dx.tile_range(tile).count), static_cast<int>(w.shape()[1]),
                   static_cast<int>(w.shape()[0]), has_bias};
}

}  // namespace

void submit_dense_fwd(const TaskTag& tag, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, int tile) {
  check_same_tiling(tag, x, y);
  const DenseArgs a = args_for(x, w, tile, b != nullptr);
  std::string name;
  const auto info = task_info(tag, "fwd", tile, 2.0 * a.n * a.in * a.out, name);
  if (b != nullptr) {
    runtime::submit_task(cl_dense_fwd, info, {rd(x.tile(tile)), rd(w.handle()), rd(b->handle()), wr(y.tile(tile))}, a);
  } else {
    runtime::submit_task(cl_dense_fwd, info, {rd(x.tile(tile)), rd(w.handle()), wr(y.tile(tile))}, a);
  }
}

void submit_dense_bwd_data(const TaskTag& tag, const Tensor& dy, const Tensor& w, Tensor& dx, int tile) {
  check_same_tiling(tag, dy, dx);
  const DenseArgs a = args_for(dx, w, tile, 0);
  std::string name;
  runtime::submit_task(cl_dense_bwd_data, task_info(tag, "bwd_data", tile, 2.0 * a.n * a.in * a.out, name),
                       {rd(dy.tile(tile)), rd(w.handle()), wr(dx.tile(tile))}, a);
}

void submit_dense_bwd_weights(const TaskTag& tag, const Tensor& x, const Tensor& dy, Tensor& dw_tiles,
                              Tensor* db_tiles, int tile) {
  check_same_tiling(tag, x, dy);
  const DenseArgs a{static_cast<int>(x.tile_range(tile).count), static_cast<int>(dw_tiles.shape()[2]),
                    static_cast<int>(dw_tiles.shape()[1]), db_tiles != nullptr};
  std::string name;
  const auto info = task_info(tag, "bwd_weights", tile, 2.0 * a.n * a.in * a.out, name);
  if (db_tiles != nullptr) {
    runtime::submit_task(cl_dense_bwd_weights, info,
                         {rd(x.tile(tile)), rd(dy.tile(tile)), wr(dw_tiles.tile(tile)), wr(db_tiles->tile(tile))}, a);
  } else {
    runtime::submit_task(cl_dense_bwd_weights, info, {rd(x.tile(tile)), rd(dy.tile(tile)), wr(dw_tiles.tile(tile))}, a);
  }
}

}  // namespace dtnn::codelets
