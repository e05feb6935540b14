// SPDX-License-Identifier: Apache-2.0
#include "codelets/dropout.hpp"

#include "codelets/cpu/nn_kernels.hpp"
#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/dropout.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

struct DropoutArgs {
  DropoutParams params;
  std::int64_t first_row;
  std::uint64_t row_elements;
  int rows;
};

struct CountArgs {
  std::size_t count;
};

void dropout_fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<DropoutArgs>(cl_arg);
  kernels::cpu::dropout_fwd(a.params, a.first_row, a.rows, a.row_elements, runtime::vector_ptr(buffers[0]),
                            runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[2]));
}

void dropout_bwd_data_cpu(void** buffers, void* cl_arg) {
  kernels::cpu::dropout_bwd_data(runtime::task_args<CountArgs>(cl_arg).count, runtime::vector_ptr(buffers[0]),
                                 runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[2]));
}

#ifdef DTNN_HAVE_CUDA
void dropout_fwd_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<DropoutArgs>(cl_arg);
  kernels::cuda::dropout_fwd(a.params, a.first_row, a.rows, a.row_elements, runtime::vector_ptr(buffers[0]),
                             runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[2]),
                             runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "dropout_fwd");
}

void dropout_bwd_data_cuda(void** buffers, void* cl_arg) {
  kernels::cuda::dropout_bwd_data(runtime::task_args<CountArgs>(cl_arg).count, runtime::vector_ptr(buffers[0]),
                                  runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[2]),
                                  runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "dropout_bwd_data");
}
#endif

// Footprints from the data sizes only: the arguments carry the step, which would make every task a new history.
runtime::Codelet cl_dropout_fwd("dropout_fwd", runtime::guarded<dropout_fwd_cpu>,
                                DTNN_CUDA_FUNC(runtime::guarded<dropout_fwd_cuda>), {STARPU_R, STARPU_W, STARPU_W},
                                runtime::Footprint::kData);
runtime::Codelet cl_dropout_bwd_data("dropout_bwd_data", runtime::guarded<dropout_bwd_data_cpu>,
                                     DTNN_CUDA_FUNC(runtime::guarded<dropout_bwd_data_cuda>),
                                     {STARPU_R, STARPU_R, STARPU_W}, runtime::Footprint::kData);

}  // namespace

void submit_dropout_fwd(const TaskTag& tag, const DropoutDraw& draw, const Tensor& x, Tensor& mask, Tensor& y,
                        int tile) {
  check_same_tiling(tag, x, y);
  check_same_tiling(tag, x, mask);
  const TileRange r = x.tile_range(tile);
  const DropoutArgs a{kernels::cpu::dropout_params(draw.seed, draw.step, draw.rate), r.begin,
                      static_cast<std::uint64_t>(x.row_elements()), static_cast<int>(r.count)};
  std::string name;
  runtime::submit_task(cl_dropout_fwd,
                       task_info(tag, "fwd", tile, static_cast<double>(r.count * x.row_elements()), name),
                       {rd(x.tile(tile)), wr(mask.tile(tile)), wr(y.tile(tile))}, a);
}

void submit_dropout_bwd_data(const TaskTag& tag, const Tensor& mask, const Tensor& dy, Tensor& dx, int tile) {
  check_same_tiling(tag, mask, dy);
  check_same_tiling(tag, mask, dx);
  const CountArgs a{static_cast<std::size_t>(dx.tile_range(tile).count * dx.row_elements())};
  std::string name;
  runtime::submit_task(cl_dropout_bwd_data, task_info(tag, "bwd_data", tile, static_cast<double>(a.count), name),
                       {rd(mask.tile(tile)), rd(dy.tile(tile)), wr(dx.tile(tile))}, a);
}

}  // namespace dtnn::codelets
