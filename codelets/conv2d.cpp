// SPDX-License-Identifier: Apache-2.0
#include "codelets/conv2d.hpp"

#include "runtime/failure.hpp"

namespace dtnn::codelets {
namespace {

using kernels::cpu::Conv2dShape;

struct ConvArgs {
  Conv2dShape shape;
  int has_bias;
};

void conv2d_fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConvArgs>(cl_arg);
  const float* b = a.has_bias ? runtime::vector_ptr(buffers[2]) : nullptr;
  kernels::cpu::conv2d_fwd_im2col(a.shape, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]), b,
                                  runtime::vector_ptr(buffers[a.has_bias ? 3 : 2]));
}

void conv2d_bwd_data_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConvArgs>(cl_arg);
  kernels::cpu::conv2d_bwd_data_im2col(a.shape, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                       runtime::vector_ptr(buffers[2]));
}

void conv2d_bwd_weights_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConvArgs>(cl_arg);
  float* db = a.has_bias ? runtime::vector_ptr(buffers[3]) : nullptr;
  kernels::cpu::conv2d_bwd_weights_im2col(a.shape, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                          runtime::vector_ptr(buffers[2]), db);
}

runtime::Codelet cl_conv2d_fwd("conv2d_fwd", runtime::guarded<conv2d_fwd_cpu>, {});
runtime::Codelet cl_conv2d_bwd_data("conv2d_bwd_data", runtime::guarded<conv2d_bwd_data_cpu>,
                                    {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_conv2d_bwd_weights("conv2d_bwd_weights", runtime::guarded<conv2d_bwd_weights_cpu>, {});

ConvArgs tile_args(const Conv2dShape& shape, const Tensor& batch, int tile, int has_bias) {
  ConvArgs a{shape, has_bias};
  a.shape.n = static_cast<int>(batch.tile_range(tile).count);
  return a;
}

}  // namespace

void submit_conv2d_fwd(const TaskTag& tag, const Conv2dShape& shape, const Tensor& x, const Tensor& w,
                       const Tensor* b, Tensor& y, int tile) {
  check_same_tiling(tag, x, y);
  const ConvArgs a = tile_args(shape, x, tile, b != nullptr);
  std::string name;
  const auto info = task_info(tag, "fwd", tile, a.shape.flops(), name);
  if (b != nullptr) {
    runtime::submit_task(cl_conv2d_fwd, info, {rd(x.tile(tile)), rd(w.handle()), rd(b->handle()), wr(y.tile(tile))},
                         a);
  } else {
    runtime::submit_task(cl_conv2d_fwd, info, {rd(x.tile(tile)), rd(w.handle()), wr(y.tile(tile))}, a);
  }
}

void submit_conv2d_bwd_data(const TaskTag& tag, const Conv2dShape& shape, const Tensor& dy, const Tensor& w,
                            Tensor& dx, int tile) {
  check_same_tiling(tag, dy, dx);
  const ConvArgs a = tile_args(shape, dx, tile, 0);
  std::string name;
  runtime::submit_task(cl_conv2d_bwd_data, task_info(tag, "bwd_data", tile, a.shape.flops(), name),
                       {rd(dy.tile(tile)), rd(w.handle()), wr(dx.tile(tile))}, a);
}

void submit_conv2d_bwd_weights(const TaskTag& tag, const Conv2dShape& shape, const Tensor& x, const Tensor& dy,
                               Tensor& dw_tiles, Tensor* db_tiles, int tile) {
  check_same_tiling(tag, x, dy);
  const ConvArgs a = tile_args(shape, x, tile, db_tiles != nullptr);
  std::string name;
  const auto info = task_info(tag, "bwd_weights", tile, a.shape.flops(), name);
  if (db_tiles != nullptr) {
    runtime::submit_task(cl_conv2d_bwd_weights, info,
                         {rd(x.tile(tile)), rd(dy.tile(tile)), wr(dw_tiles.tile(tile)), wr(db_tiles->tile(tile))}, a);
  } else {
    runtime::submit_task(cl_conv2d_bwd_weights, info, {rd(x.tile(tile)), rd(dy.tile(tile)), wr(dw_tiles.tile(tile))},
                         a);
  }
}

}  // namespace dtnn::codelets
