// SPDX-License-Identifier: Apache-2.0
#include "codelets/positional.hpp"

#include <fmt/format.h>

#include "codelets/cpu/nn_kernels.hpp"
#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/positional.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

struct PositionalArgs {
  int n;  // the tile's samples
  int seq;
  int dim;
  int max_len;
  int accumulate;  // backward-weights: 0 from zeros (tile 0), 1 onto the gradient as it is
};

// Buffers: x, table, y.
void positional_add_fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<PositionalArgs>(cl_arg);
  kernels::cpu::positional_add_fwd(a.n, a.seq, a.dim, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                   runtime::vector_ptr(buffers[2]));
}

// Buffers: dy, dw.
void positional_bwd_weights_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<PositionalArgs>(cl_arg);
  kernels::cpu::positional_bwd_weights(a.n, a.seq, a.dim, a.max_len, runtime::vector_ptr(buffers[0]), a.accumulate,
                                       runtime::vector_ptr(buffers[1]));
}

#ifdef DTNN_HAVE_CUDA
void positional_add_fwd_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<PositionalArgs>(cl_arg);
  kernels::cuda::positional_add_fwd(a.n, a.seq, a.dim, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                    runtime::vector_ptr(buffers[2]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "positional_add_fwd");
}

void positional_bwd_weights_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<PositionalArgs>(cl_arg);
  kernels::cuda::positional_bwd_weights(a.n, a.seq, a.dim, a.max_len, runtime::vector_ptr(buffers[0]), a.accumulate,
                                        runtime::vector_ptr(buffers[1]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "positional_bwd_weights");
}
#endif

// Tile 0 writes the gradient (a transient one has no value before), the next tiles read and add.
runtime::Codelet cl_positional_add_fwd("positional_add_fwd", runtime::guarded<positional_add_fwd_cpu>,
                                       DTNN_CUDA_FUNC(runtime::guarded<positional_add_fwd_cuda>),
                                       {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_positional_bwd_weights("positional_bwd_weights", runtime::guarded<positional_bwd_weights_cpu>,
                                           DTNN_CUDA_FUNC(runtime::guarded<positional_bwd_weights_cuda>),
                                           {STARPU_R, STARPU_W});
runtime::Codelet cl_positional_bwd_weights_add("positional_bwd_weights_add",
                                               runtime::guarded<positional_bwd_weights_cpu>,
                                               DTNN_CUDA_FUNC(runtime::guarded<positional_bwd_weights_cuda>),
                                               {STARPU_R, STARPU_RW});

PositionalArgs args_for(const TaskTag& tag, const Tensor& x, const Tensor& table, int tile) {
  const Shape& xs = x.shape();
  const Shape& ts = table.shape();
  if (xs.size() != 3 || ts.size() != 2 || xs[2] != ts[1] || xs[1] > ts[0]) {
    throw InvalidArgument(fmt::format("{}: positions of {} from the table {}, expected (n, seq, dim) and (max_len, "
                                      "dim) with seq <= max_len",
                                      tag.layer, to_string(xs), to_string(ts)));
  }
  return PositionalArgs{static_cast<int>(x.tile_range(tile).count), static_cast<int>(xs[1]), static_cast<int>(xs[2]),
                        static_cast<int>(ts[0]), tile > 0 ? 1 : 0};
}

}  // namespace

void submit_positional_add_fwd(const TaskTag& tag, const Tensor& x, const Tensor& table, Tensor& y, int tile) {
  check_same_tiling(tag, x, y);
  const PositionalArgs a = args_for(tag, x, table, tile);
  std::string name;
  runtime::submit_task(cl_positional_add_fwd,
                       task_info(tag, "fwd", tile, static_cast<double>(a.n) * a.seq * a.dim, name),
                       {rd(x.tile(tile)), rd(table.handle()), wr(y.tile(tile))}, a);
}

void submit_positional_bwd_weights(const TaskTag& tag, const Tensor& dy, Tensor& dw, int tile, int onto_existing) {
  PositionalArgs a = args_for(tag, dy, dw, tile);
  if (onto_existing != 0) a.accumulate = 1;
  std::string name;
  const runtime::TaskInfo info = task_info(tag, "bwd_weights", tile, static_cast<double>(a.n) * a.seq * a.dim, name);
  if (a.accumulate == 0) {
    runtime::submit_task(cl_positional_bwd_weights, info, {rd(dy.tile(tile)), wr(dw.handle())}, a);
  } else {
    runtime::submit_task(cl_positional_bwd_weights_add, info, {rd(dy.tile(tile)), rdwr(dw.handle())}, a);
  }
}

}  // namespace dtnn::codelets
