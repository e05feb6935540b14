// SPDX-License-Identifier: Apache-2.0
#include "codelets/dense.hpp"

#include <vector>

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
  int relu;  // forward: ReLU fused into the pass
};

// The forward and backward-weights passes have a codelet with the bias and one without (Bias), each with its fixed
// buffer list; the bias buffer comes last, so the other buffers keep their indices in both.
enum class Bias { kWithout, kWith };

// Buffers: x, w, y, then b with the bias.
template <Bias B>
void dense_fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<DenseArgs>(cl_arg);
  const float* b = B == Bias::kWith ? runtime::vector_ptr(buffers[3]) : nullptr;
  kernels::cpu::dense_fwd(a.n, a.in, a.out, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]), b,
                          a.relu, runtime::vector_ptr(buffers[2]));
}

// Buffers: dy, w, dx.
void dense_bwd_data_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<DenseArgs>(cl_arg);
  kernels::cpu::dense_bwd_data(a.n, a.in, a.out, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                               runtime::vector_ptr(buffers[2]));
}

// Buffers: x, dy, dw, then db with the bias.
template <Bias B>
void dense_bwd_weights_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<DenseArgs>(cl_arg);
  float* db = B == Bias::kWith ? runtime::vector_ptr(buffers[3]) : nullptr;
  kernels::cpu::dense_bwd_weights(a.n, a.in, a.out, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                  runtime::vector_ptr(buffers[2]), db);
}

#ifdef DTNN_HAVE_CUDA
// Tf32: cuBLAS's TF32 tensor-core math (--precision tf32), in codelets of their own.
template <Bias B, bool Tf32 = false>
void dense_fwd_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<DenseArgs>(cl_arg);
  const float* b = B == Bias::kWith ? runtime::vector_ptr(buffers[3]) : nullptr;
  kernels::cuda::dense_fwd(a.n, a.in, a.out, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]), b,
                           a.relu, runtime::vector_ptr(buffers[2]), runtime::cuda::cublas(), runtime::cuda::stream(),
                           Tf32);
  DTNN_CUDA_CHECK(cudaGetLastError(), "dense_fwd");
}

template <bool Tf32 = false>
void dense_bwd_data_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<DenseArgs>(cl_arg);
  kernels::cuda::dense_bwd_data(a.n, a.in, a.out, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                runtime::vector_ptr(buffers[2]), runtime::cuda::cublas(), runtime::cuda::stream(),
                                Tf32);
  DTNN_CUDA_CHECK(cudaGetLastError(), "dense_bwd_data");
}

template <Bias B, bool Tf32 = false>
void dense_bwd_weights_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<DenseArgs>(cl_arg);
  float* db = B == Bias::kWith ? runtime::vector_ptr(buffers[3]) : nullptr;
  kernels::cuda::dense_bwd_weights(a.n, a.in, a.out, runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                   runtime::vector_ptr(buffers[2]), db, runtime::cuda::cublas(),
                                   runtime::cuda::stream(), Tf32);
  DTNN_CUDA_CHECK(cudaGetLastError(), "dense_bwd_weights");
}
#endif

// The with-bias codelets keep the names that traces showed before the variants had codelets of their own.
runtime::Codelet cl_dense_fwd("dense_fwd", runtime::guarded<dense_fwd_cpu<Bias::kWith>>,
                              DTNN_CUDA_FUNC(runtime::guarded<dense_fwd_cuda<Bias::kWith>>),
                              {STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_dense_fwd_nobias("dense_fwd_nobias", runtime::guarded<dense_fwd_cpu<Bias::kWithout>>,
                                     DTNN_CUDA_FUNC(runtime::guarded<dense_fwd_cuda<Bias::kWithout>>),
                                     {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_dense_bwd_data("dense_bwd_data", runtime::guarded<dense_bwd_data_cpu>,
                                   DTNN_CUDA_FUNC(runtime::guarded<dense_bwd_data_cuda<>>),
                                   {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_dense_bwd_weights("dense_bwd_weights", runtime::guarded<dense_bwd_weights_cpu<Bias::kWith>>,
                                      DTNN_CUDA_FUNC(runtime::guarded<dense_bwd_weights_cuda<Bias::kWith>>),
                                      {STARPU_R, STARPU_R, STARPU_W, STARPU_W});
runtime::Codelet cl_dense_bwd_weights_nobias("dense_bwd_weights_nobias",
                                             runtime::guarded<dense_bwd_weights_cpu<Bias::kWithout>>,
                                             DTNN_CUDA_FUNC(runtime::guarded<dense_bwd_weights_cuda<Bias::kWithout>>),
                                             {STARPU_R, STARPU_R, STARPU_W});

// --precision tf32: the same CPU bodies (fp32; CPUs have no TF32), cuBLAS's TF32 math on GPUs, names of their own so
// that performance models and calibrations never mix the two.
runtime::Codelet cl_dense_fwd_tf32("dense_fwd_tf32", runtime::guarded<dense_fwd_cpu<Bias::kWith>>,
                                   DTNN_CUDA_FUNC((runtime::guarded<dense_fwd_cuda<Bias::kWith, true>>)),
                                   {STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_dense_fwd_tf32_nobias("dense_fwd_tf32_nobias", runtime::guarded<dense_fwd_cpu<Bias::kWithout>>,
                                          DTNN_CUDA_FUNC((runtime::guarded<dense_fwd_cuda<Bias::kWithout, true>>)),
                                          {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_dense_bwd_data_tf32("dense_bwd_data_tf32", runtime::guarded<dense_bwd_data_cpu>,
                                        DTNN_CUDA_FUNC(runtime::guarded<dense_bwd_data_cuda<true>>),
                                        {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_dense_bwd_weights_tf32(
    "dense_bwd_weights_tf32", runtime::guarded<dense_bwd_weights_cpu<Bias::kWith>>,
    DTNN_CUDA_FUNC((runtime::guarded<dense_bwd_weights_cuda<Bias::kWith, true>>)),
    {STARPU_R, STARPU_R, STARPU_W, STARPU_W});
runtime::Codelet cl_dense_bwd_weights_tf32_nobias(
    "dense_bwd_weights_tf32_nobias", runtime::guarded<dense_bwd_weights_cpu<Bias::kWithout>>,
    DTNN_CUDA_FUNC((runtime::guarded<dense_bwd_weights_cuda<Bias::kWithout, true>>)), {STARPU_R, STARPU_R, STARPU_W});

struct InOrderArgs {
  int groups;  // samples of the tile
  int rows;    // GEMM rows of a sample (its positions)
  int in;
  int out;
  int accumulate;
};

// Buffers: x, dy, dw, then db with the bias.
template <Bias B>
void dense_bwd_weights_in_order_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<InOrderArgs>(cl_arg);
  float* db = B == Bias::kWith ? runtime::vector_ptr(buffers[3]) : nullptr;
  kernels::cpu::dense_bwd_weights_in_order(a.groups, a.rows, a.in, a.out, runtime::vector_ptr(buffers[0]),
                                           runtime::vector_ptr(buffers[1]), a.accumulate,
                                           runtime::vector_ptr(buffers[2]), db);
}

#ifdef DTNN_HAVE_CUDA
template <Bias B>
void dense_bwd_weights_in_order_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<InOrderArgs>(cl_arg);
  float* db = B == Bias::kWith ? runtime::vector_ptr(buffers[3]) : nullptr;
  kernels::cuda::dense_bwd_weights_in_order(a.groups, a.rows, a.in, a.out, runtime::vector_ptr(buffers[0]),
                                            runtime::vector_ptr(buffers[1]), a.accumulate,
                                            runtime::vector_ptr(buffers[2]), db, runtime::cuda::cublas(),
                                            runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "dense_bwd_weights_in_order");
}
#endif

// Tile 0 writes the gradients (a transient one has no value before), the next tiles read and add.
runtime::Codelet cl_dense_bwd_weights_in_order(
    "dense_bwd_weights_in_order", runtime::guarded<dense_bwd_weights_in_order_cpu<Bias::kWithout>>,
    DTNN_CUDA_FUNC(runtime::guarded<dense_bwd_weights_in_order_cuda<Bias::kWithout>>), {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_dense_bwd_weights_in_order_add(
    "dense_bwd_weights_in_order_add", runtime::guarded<dense_bwd_weights_in_order_cpu<Bias::kWithout>>,
    DTNN_CUDA_FUNC(runtime::guarded<dense_bwd_weights_in_order_cuda<Bias::kWithout>>),
    {STARPU_R, STARPU_R, STARPU_RW});
runtime::Codelet cl_dense_bwd_weights_in_order_bias(
    "dense_bwd_weights_in_order_bias", runtime::guarded<dense_bwd_weights_in_order_cpu<Bias::kWith>>,
    DTNN_CUDA_FUNC(runtime::guarded<dense_bwd_weights_in_order_cuda<Bias::kWith>>),
    {STARPU_R, STARPU_R, STARPU_W, STARPU_W});
runtime::Codelet cl_dense_bwd_weights_in_order_bias_add(
    "dense_bwd_weights_in_order_bias_add", runtime::guarded<dense_bwd_weights_in_order_cpu<Bias::kWith>>,
    DTNN_CUDA_FUNC(runtime::guarded<dense_bwd_weights_in_order_cuda<Bias::kWith>>),
    {STARPU_R, STARPU_R, STARPU_RW, STARPU_RW});

// The GEMM's rows: every position of every sample of the tile (Dense works on the last axis).
int gemm_rows(const Tensor& x, std::int64_t in, int tile) {
  return static_cast<int>(x.tile_range(tile).count * (x.row_elements() / in));
}

DenseArgs args_for(const Tensor& x_or_dx, const Tensor& w, int tile) {
  return DenseArgs{gemm_rows(x_or_dx, w.shape()[1], tile), static_cast<int>(w.shape()[1]),
                   static_cast<int>(w.shape()[0]), 0};
}

}  // namespace

void submit_dense_fwd(const TaskTag& tag, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, int tile,
                      int relu, bool tf32) {
  check_same_tiling(tag, x, y);
  DenseArgs a = args_for(x, w, tile);
  a.relu = relu;
  std::vector<runtime::Access> data{rd(x.tile(tile)), rd(w.handle()), wr(y.tile(tile))};
  if (b != nullptr) data.push_back(rd(b->handle()));
  std::string name;
  runtime::Codelet& cl = tf32 ? (b != nullptr ? cl_dense_fwd_tf32 : cl_dense_fwd_tf32_nobias)
                             : (b != nullptr ? cl_dense_fwd : cl_dense_fwd_nobias);
  runtime::submit_task(cl,
                       task_info(tag, "fwd", tile, 2.0 * a.n * a.in * a.out, name), data, a);
}

void submit_dense_bwd_data(const TaskTag& tag, const Tensor& dy, const Tensor& w, Tensor& dx, int tile, bool tf32) {
  check_same_tiling(tag, dy, dx);
  const DenseArgs a = args_for(dx, w, tile);
  std::string name;
  runtime::submit_task(tf32 ? cl_dense_bwd_data_tf32 : cl_dense_bwd_data,
                       task_info(tag, "bwd_data", tile, 2.0 * a.n * a.in * a.out, name),
                       {rd(dy.tile(tile)), rd(w.handle()), wr(dx.tile(tile))}, a);
}

void submit_dense_bwd_weights(const TaskTag& tag, const Tensor& x, const Tensor& dy, Tensor& dw_tiles,
                              Tensor* db_tiles, int tile, bool tf32) {
  check_same_tiling(tag, x, dy);
  const DenseArgs a{gemm_rows(x, dw_tiles.shape()[2], tile), static_cast<int>(dw_tiles.shape()[2]),
                    static_cast<int>(dw_tiles.shape()[1]), 0};
  std::vector<runtime::Access> data{rd(x.tile(tile)), rd(dy.tile(tile)), wr(dw_tiles.tile(tile))};
  if (db_tiles != nullptr) data.push_back(wr(db_tiles->tile(tile)));
  std::string name;
  runtime::Codelet& cl = tf32 ? (db_tiles != nullptr ? cl_dense_bwd_weights_tf32 : cl_dense_bwd_weights_tf32_nobias)
                             : (db_tiles != nullptr ? cl_dense_bwd_weights : cl_dense_bwd_weights_nobias);
  runtime::submit_task(cl,
                       task_info(tag, "bwd_weights", tile, 2.0 * a.n * a.in * a.out, name), data, a);
}

void submit_dense_bwd_weights_in_order(const TaskTag& tag, const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db,
                                       int tile, int onto_existing) {
  check_same_tiling(tag, x, dy);
  const std::int64_t in = dw.shape()[1];
  const std::int64_t out = dw.shape()[0];
  const InOrderArgs a{static_cast<int>(x.tile_range(tile).count), static_cast<int>(x.row_elements() / in),
                      static_cast<int>(in), static_cast<int>(out), tile > 0 || onto_existing != 0 ? 1 : 0};
  std::string name;
  const runtime::TaskInfo info =
      task_info(tag, "bwd_weights", tile, 2.0 * a.groups * a.rows * static_cast<double>(in) * out, name);
  const auto grad = [&](Tensor& g) { return a.accumulate == 0 ? wr(g.handle()) : rdwr(g.handle()); };
  std::vector<runtime::Access> data{rd(x.tile(tile)), rd(dy.tile(tile)), grad(dw)};
  if (db != nullptr) data.push_back(grad(*db));
  runtime::Codelet& codelet =
      db == nullptr ? (a.accumulate == 0 ? cl_dense_bwd_weights_in_order : cl_dense_bwd_weights_in_order_add)
                    : (a.accumulate == 0 ? cl_dense_bwd_weights_in_order_bias : cl_dense_bwd_weights_in_order_bias_add);
  runtime::submit_task(codelet, info, data, a);
}

}  // namespace dtnn::codelets
