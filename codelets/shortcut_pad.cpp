// SPDX-License-Identifier: Apache-2.0
#include "codelets/shortcut_pad.hpp"

#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/shortcut_pad.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {


void shortcut_pad_fwd_cpu(void** buffers, void* cl_arg) {
  kernels::cpu::shortcut_pad_fwd(runtime::task_args<ShortcutPadShape>(cl_arg), runtime::vector_ptr(buffers[0]),
                                 runtime::vector_ptr(buffers[1]));
}

void shortcut_pad_bwd_data_cpu(void** buffers, void* cl_arg) {
  kernels::cpu::shortcut_pad_bwd_data(runtime::task_args<ShortcutPadShape>(cl_arg), runtime::vector_ptr(buffers[0]),
                                      runtime::vector_ptr(buffers[1]));
}

#ifdef DTNN_HAVE_CUDA
void shortcut_pad_fwd_cuda(void** buffers, void* cl_arg) {
  kernels::cuda::shortcut_pad_fwd(runtime::task_args<ShortcutPadShape>(cl_arg), runtime::vector_ptr(buffers[0]),
                                  runtime::vector_ptr(buffers[1]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "shortcut_pad_fwd");
}

void shortcut_pad_bwd_data_cuda(void** buffers, void* cl_arg) {
  kernels::cuda::shortcut_pad_bwd_data(runtime::task_args<ShortcutPadShape>(cl_arg), runtime::vector_ptr(buffers[0]),
                                       runtime::vector_ptr(buffers[1]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "shortcut_pad_bwd_data");
}
#endif

runtime::Codelet cl_shortcut_pad_fwd("shortcut_pad_fwd", runtime::guarded<shortcut_pad_fwd_cpu>,
                                     DTNN_CUDA_FUNC(runtime::guarded<shortcut_pad_fwd_cuda>), {STARPU_R, STARPU_W});
runtime::Codelet cl_shortcut_pad_bwd_data("shortcut_pad_bwd_data", runtime::guarded<shortcut_pad_bwd_data_cpu>,
                                          DTNN_CUDA_FUNC(runtime::guarded<shortcut_pad_bwd_data_cuda>),
                                          {STARPU_R, STARPU_W});

ShortcutPadShape for_tile(ShortcutPadShape shape, const Tensor& t, int tile) {
  shape.n = static_cast<int>(t.tile_range(tile).count);
  return shape;
}

}  // namespace

void submit_shortcut_pad_fwd(const TaskTag& tag, const ShortcutPadShape& shape, const Tensor& x, Tensor& y,
                             int tile) {
  check_same_tiling(tag, x, y);
  const ShortcutPadShape a = for_tile(shape, x, tile);
  // A copy without arithmetic: 0 flops, as copy and concat declare.
  std::string name;
  runtime::submit_task(cl_shortcut_pad_fwd, task_info(tag, "fwd", tile, 0.0, name),
                       {rd(x.tile(tile)), wr(y.tile(tile))}, a);
}

void submit_shortcut_pad_bwd_data(const TaskTag& tag, const ShortcutPadShape& shape, const Tensor& dy, Tensor& dx,
                                  int tile) {
  check_same_tiling(tag, dy, dx);
  const ShortcutPadShape a = for_tile(shape, dx, tile);
  std::string name;
  runtime::submit_task(cl_shortcut_pad_bwd_data, task_info(tag, "bwd_data", tile, 0.0, name),
                       {rd(dy.tile(tile)), wr(dx.tile(tile))}, a);
}

}  // namespace dtnn::codelets
