// SPDX-License-Identifier: Apache-2.0
#include "codelets/layer_norm.hpp"

#include <vector>

#include <fmt/format.h>

#include "codelets/cpu/nn_kernels.hpp"
#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/layer_norm.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

struct LayerNormArgs {
  int rows;  // the tile's rows of `width` values: samples x positions
  int width;
  float eps;
  int accumulate;  // backward-weights: 0 from zeros (tile 0), 1 onto the gradients as they are
};

// The affine transform's buffers come last, so the others keep their indices in both variants (as Dense's bias).
enum class Affine { kWithout, kWith };

// Buffers: x, y, stats, then w, b.
template <Affine A>
void layer_norm_fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<LayerNormArgs>(cl_arg);
  const float* w = A == Affine::kWith ? runtime::vector_ptr(buffers[3]) : nullptr;
  const float* b = A == Affine::kWith ? runtime::vector_ptr(buffers[4]) : nullptr;
  kernels::cpu::layer_norm_fwd(a.rows, a.width, a.eps, runtime::vector_ptr(buffers[0]), w, b,
                               runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[2]));
}

// Buffers: x, stats, dy, dx, then w.
template <Affine A>
void layer_norm_bwd_data_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<LayerNormArgs>(cl_arg);
  const float* w = A == Affine::kWith ? runtime::vector_ptr(buffers[4]) : nullptr;
  kernels::cpu::layer_norm_bwd_data(a.rows, a.width, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                    w, runtime::vector_ptr(buffers[2]), runtime::vector_ptr(buffers[3]));
}

// Buffers: x, stats, dy, dw, db.
void layer_norm_bwd_weights_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<LayerNormArgs>(cl_arg);
  kernels::cpu::layer_norm_bwd_weights(a.rows, a.width, runtime::vector_ptr(buffers[0]),
                                       runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[2]), a.accumulate,
                                       runtime::vector_ptr(buffers[3]), runtime::vector_ptr(buffers[4]));
}

#ifdef DTNN_HAVE_CUDA
template <Affine A>
void layer_norm_fwd_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<LayerNormArgs>(cl_arg);
  const float* w = A == Affine::kWith ? runtime::vector_ptr(buffers[3]) : nullptr;
  const float* b = A == Affine::kWith ? runtime::vector_ptr(buffers[4]) : nullptr;
  kernels::cuda::layer_norm_fwd(a.rows, a.width, a.eps, runtime::vector_ptr(buffers[0]), w, b,
                                runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[2]),
                                runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "layer_norm_fwd");
}

template <Affine A>
void layer_norm_bwd_data_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<LayerNormArgs>(cl_arg);
  const float* w = A == Affine::kWith ? runtime::vector_ptr(buffers[4]) : nullptr;
  kernels::cuda::layer_norm_bwd_data(a.rows, a.width, runtime::vector_ptr(buffers[0]),
                                     runtime::vector_ptr(buffers[1]), w, runtime::vector_ptr(buffers[2]),
                                     runtime::vector_ptr(buffers[3]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "layer_norm_bwd_data");
}

void layer_norm_bwd_weights_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<LayerNormArgs>(cl_arg);
  kernels::cuda::layer_norm_bwd_weights(a.rows, a.width, runtime::vector_ptr(buffers[0]),
                                        runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[2]),
                                        a.accumulate, runtime::vector_ptr(buffers[3]),
                                        runtime::vector_ptr(buffers[4]), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "layer_norm_bwd_weights");
}
#endif

runtime::Codelet cl_layer_norm_fwd("layer_norm_fwd", runtime::guarded<layer_norm_fwd_cpu<Affine::kWith>>,
                                   DTNN_CUDA_FUNC(runtime::guarded<layer_norm_fwd_cuda<Affine::kWith>>),
                                   {STARPU_R, STARPU_W, STARPU_W, STARPU_R, STARPU_R});
runtime::Codelet cl_layer_norm_fwd_noaffine("layer_norm_fwd_noaffine",
                                            runtime::guarded<layer_norm_fwd_cpu<Affine::kWithout>>,
                                            DTNN_CUDA_FUNC(runtime::guarded<layer_norm_fwd_cuda<Affine::kWithout>>),
                                            {STARPU_R, STARPU_W, STARPU_W});
runtime::Codelet cl_layer_norm_bwd_data("layer_norm_bwd_data", runtime::guarded<layer_norm_bwd_data_cpu<Affine::kWith>>,
                                        DTNN_CUDA_FUNC(runtime::guarded<layer_norm_bwd_data_cuda<Affine::kWith>>),
                                        {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_layer_norm_bwd_data_noaffine(
    "layer_norm_bwd_data_noaffine", runtime::guarded<layer_norm_bwd_data_cpu<Affine::kWithout>>,
    DTNN_CUDA_FUNC(runtime::guarded<layer_norm_bwd_data_cuda<Affine::kWithout>>),
    {STARPU_R, STARPU_R, STARPU_R, STARPU_W});
// Tile 0 writes the gradients (transient ones have no value before), the next tiles read and add.
runtime::Codelet cl_layer_norm_bwd_weights("layer_norm_bwd_weights", runtime::guarded<layer_norm_bwd_weights_cpu>,
                                           DTNN_CUDA_FUNC(runtime::guarded<layer_norm_bwd_weights_cuda>),
                                           {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_W});
runtime::Codelet cl_layer_norm_bwd_weights_add("layer_norm_bwd_weights_add",
                                               runtime::guarded<layer_norm_bwd_weights_cpu>,
                                               DTNN_CUDA_FUNC(runtime::guarded<layer_norm_bwd_weights_cuda>),
                                               {STARPU_R, STARPU_R, STARPU_R, STARPU_RW, STARPU_RW});

// The tile's rows and the row width; checks that stats hold two values per row.
LayerNormArgs args_for(const TaskTag& tag, const Tensor& x, const Tensor& stats, float eps, int tile) {
  const std::int64_t width = x.shape().back();
  const std::int64_t per_sample = x.row_elements() / width;
  if (x.shape().size() < 2 || stats.row_elements() != 2 * per_sample) {
    throw InvalidArgument(fmt::format("{}: layer norm of {} with statistics {}, expected {} statistics per sample "
                                      "(mean and rstd of each row of {})",
                                      tag.layer, to_string(x.shape()), to_string(stats.shape()), 2 * per_sample,
                                      width));
  }
  return LayerNormArgs{static_cast<int>(x.tile_range(tile).count * per_sample), static_cast<int>(width), eps,
                       tile > 0 ? 1 : 0};
}

double values(const LayerNormArgs& a) { return static_cast<double>(a.rows) * a.width; }

}  // namespace

void submit_layer_norm_fwd(const TaskTag& tag, float eps, const Tensor& x, const Tensor* w, const Tensor* b,
                           Tensor& y, Tensor& stats, int tile) {
  check_same_tiling(tag, x, y);
  check_same_tiling(tag, x, stats);
  const LayerNormArgs a = args_for(tag, x, stats, eps, tile);
  std::vector<runtime::Access> data{rd(x.tile(tile)), wr(y.tile(tile)), wr(stats.tile(tile))};
  if (w != nullptr) {
    data.push_back(rd(w->handle()));
    data.push_back(rd(b->handle()));
  }
  std::string name;
  runtime::submit_task(w != nullptr ? cl_layer_norm_fwd : cl_layer_norm_fwd_noaffine,
                       task_info(tag, "fwd", tile, 8.0 * values(a), name), data, a);
}

void submit_layer_norm_bwd_data(const TaskTag& tag, const Tensor& x, const Tensor& stats, const Tensor* w,
                                const Tensor& dy, Tensor& dx, int tile) {
  check_same_tiling(tag, x, dy);
  check_same_tiling(tag, x, dx);
  check_same_tiling(tag, x, stats);
  const LayerNormArgs a = args_for(tag, x, stats, 0.0f, tile);
  std::vector<runtime::Access> data{rd(x.tile(tile)), rd(stats.tile(tile)), rd(dy.tile(tile)), wr(dx.tile(tile))};
  if (w != nullptr) data.push_back(rd(w->handle()));
  std::string name;
  runtime::submit_task(w != nullptr ? cl_layer_norm_bwd_data : cl_layer_norm_bwd_data_noaffine,
                       task_info(tag, "bwd_data", tile, 10.0 * values(a), name), data, a);
}

void submit_layer_norm_bwd_weights(const TaskTag& tag, const Tensor& x, const Tensor& stats, const Tensor& dy,
                                   Tensor& dw, Tensor& db, int tile, int onto_existing) {
  check_same_tiling(tag, x, dy);
  check_same_tiling(tag, x, stats);
  LayerNormArgs a = args_for(tag, x, stats, 0.0f, tile);
  if (onto_existing != 0) a.accumulate = 1;
  std::string name;
  const runtime::TaskInfo info = task_info(tag, "bwd_weights", tile, 4.0 * values(a), name);
  if (a.accumulate == 0) {
    runtime::submit_task(cl_layer_norm_bwd_weights, info,
                         {rd(x.tile(tile)), rd(stats.tile(tile)), rd(dy.tile(tile)), wr(dw.handle()), wr(db.handle())},
                         a);
  } else {
    runtime::submit_task(cl_layer_norm_bwd_weights_add, info,
                         {rd(x.tile(tile)), rd(stats.tile(tile)), rd(dy.tile(tile)), rdwr(dw.handle()),
                          rdwr(db.handle())},
                         a);
  }
}

}  // namespace dtnn::codelets
