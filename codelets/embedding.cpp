// SPDX-License-Identifier: Apache-2.0
#include "codelets/embedding.hpp"

#include <fmt/format.h>

#include "codelets/cpu/nn_kernels.hpp"
#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/embedding.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

struct EmbeddingArgs {
  int rows;  // the tile's ids: samples x positions
  int dim;
  int num;
  int padding_idx;
  int accumulate;  // 0: the table gradient starts from zeros (tile 0), 1: added to
};

// Buffers: ids, w, y.
void embedding_fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<EmbeddingArgs>(cl_arg);
  kernels::cpu::embedding_fwd(a.rows, a.dim, a.num, runtime::vector_ptr_as<const std::int32_t>(buffers[0]),
                              runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[2]));
}

// Buffers: ids, dy, dw.
void embedding_bwd_weights_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<EmbeddingArgs>(cl_arg);
  kernels::cpu::embedding_bwd_weights(a.rows, a.dim, a.num, a.padding_idx,
                                      runtime::vector_ptr_as<const std::int32_t>(buffers[0]),
                                      runtime::vector_ptr(buffers[1]), a.accumulate, runtime::vector_ptr(buffers[2]));
}

#ifdef DTNN_HAVE_CUDA
// An id outside the table gives a NaN row rather than a DataError (codelets/cuda/embedding.hpp says why).
void embedding_fwd_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<EmbeddingArgs>(cl_arg);
  kernels::cuda::embedding_fwd(a.rows, a.dim, a.num, runtime::vector_ptr_as<const std::int32_t>(buffers[0]),
                               runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[2]),
                               runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "embedding_fwd");
}

void embedding_bwd_weights_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<EmbeddingArgs>(cl_arg);
  kernels::cuda::embedding_bwd_weights(a.rows, a.dim, a.num, a.padding_idx,
                                       runtime::vector_ptr_as<const std::int32_t>(buffers[0]),
                                       runtime::vector_ptr(buffers[1]), a.accumulate, runtime::vector_ptr(buffers[2]),
                                       runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "embedding_bwd_weights");
}
#endif

runtime::Codelet cl_embedding_fwd("embedding_fwd", runtime::guarded<embedding_fwd_cpu>,
                                  DTNN_CUDA_FUNC(runtime::guarded<embedding_fwd_cuda>), {STARPU_R, STARPU_R, STARPU_W});
// Tile 0 writes the gradient (a transient one has no value before), the next tiles read and add.
runtime::Codelet cl_embedding_bwd_weights("embedding_bwd_weights", runtime::guarded<embedding_bwd_weights_cpu>,
                                          DTNN_CUDA_FUNC(runtime::guarded<embedding_bwd_weights_cuda>),
                                          {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_embedding_bwd_weights_add("embedding_bwd_weights_add",
                                              runtime::guarded<embedding_bwd_weights_cpu>,
                                              DTNN_CUDA_FUNC(runtime::guarded<embedding_bwd_weights_cuda>),
                                              {STARPU_R, STARPU_R, STARPU_RW});

EmbeddingArgs args_for(const TaskTag& tag, const Tensor& ids, const Tensor& table, const Tensor& y_or_dy,
                       int padding_idx, int tile) {
  check_same_tiling(tag, ids, y_or_dy);
  check_dtype(tag, ids, DType::kInt32, "ids");
  const Shape& ts = table.shape();
  const std::int64_t num = ts[ts.size() - 2];
  const std::int64_t dim = ts.back();
  if (y_or_dy.row_elements() != ids.row_elements() * dim) {
    throw InvalidArgument(fmt::format("{}: embedding of ids {} into {}, expected {} values per sample ({} ids of "
                                      "{})",
                                      tag.layer, to_string(ids.shape()), to_string(y_or_dy.shape()),
                                      ids.row_elements() * dim, ids.row_elements(), dim));
  }
  return EmbeddingArgs{static_cast<int>(ids.tile_range(tile).count * ids.row_elements()), static_cast<int>(dim),
                       static_cast<int>(num), padding_idx, tile > 0 ? 1 : 0};
}

}  // namespace

void submit_embedding_fwd(const TaskTag& tag, const Tensor& ids, const Tensor& w, Tensor& y, int tile) {
  const EmbeddingArgs a = args_for(tag, ids, w, y, -1, tile);
  std::string name;
  runtime::submit_task(cl_embedding_fwd, task_info(tag, "fwd", tile, 0.0, name),
                       {rd(ids.tile(tile)), rd(w.handle()), wr(y.tile(tile))}, a);
}

void submit_embedding_bwd_weights(const TaskTag& tag, const Tensor& ids, const Tensor& dy, int padding_idx,
                                  Tensor& dw, int tile, int onto_existing) {
  EmbeddingArgs a = args_for(tag, ids, dw, dy, padding_idx, tile);
  if (onto_existing != 0) a.accumulate = 1;
  std::string name;
  const runtime::TaskInfo info = task_info(tag, "bwd_weights", tile, static_cast<double>(a.rows) * a.dim, name);
  if (a.accumulate == 0) {
    runtime::submit_task(cl_embedding_bwd_weights, info, {rd(ids.tile(tile)), rd(dy.tile(tile)), wr(dw.handle())}, a);
  } else {
    runtime::submit_task(cl_embedding_bwd_weights_add, info, {rd(ids.tile(tile)), rd(dy.tile(tile)),
                                                              rdwr(dw.handle())}, a);
  }
}

}  // namespace dtnn::codelets
