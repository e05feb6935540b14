// SPDX-License-Identifier: Apache-2.0
#include "codelets/attention.hpp"

#include <fmt/format.h>

#include "codelets/cpu/nn_kernels.hpp"
#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/attention.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

struct AttentionArgs {
  AttentionShape shape;
  DropoutParams drop;
  std::int64_t first_row;  // the tile's first sample in the batch: the dropout masks' row
  int n;                   // the tile's samples
  int dropout;             // 0: no attention dropout
};

// Buffers: qkv, probs, ctx, then the key-padding mask when Masked.
enum class Masked { kNo, kYes };

template <Masked M>
void attention_fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<AttentionArgs>(cl_arg);
  const std::int32_t* padded = M == Masked::kYes ? runtime::vector_ptr_as<const std::int32_t>(buffers[3]) : nullptr;
  kernels::cpu::attention_fwd(a.shape, a.n, a.first_row, a.dropout ? &a.drop : nullptr,
                              runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                              runtime::vector_ptr(buffers[2]), padded);
}

// Buffers: qkv, probs, dctx, dqkv.
void attention_bwd_data_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<AttentionArgs>(cl_arg);
  kernels::cpu::attention_bwd_data(a.shape, a.n, a.first_row, a.dropout ? &a.drop : nullptr,
                                   runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                   runtime::vector_ptr(buffers[2]), runtime::vector_ptr(buffers[3]));
}

#ifdef DTNN_HAVE_CUDA
void* scratch_for(const AttentionArgs& a, kernels::cuda::AttentionPass pass) {
  const std::size_t bytes = kernels::cuda::attention_scratch_bytes(a.shape, pass, a.dropout);
  return bytes > 0 ? runtime::cuda::workspace(bytes) : nullptr;
}

template <Masked M>
void attention_fwd_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<AttentionArgs>(cl_arg);
  const std::int32_t* padded = M == Masked::kYes ? runtime::vector_ptr_as<const std::int32_t>(buffers[3]) : nullptr;
  void* scratch = scratch_for(a, kernels::cuda::AttentionPass::kForward);
  kernels::cuda::attention_fwd(a.shape, a.n, a.first_row, a.dropout ? &a.drop : nullptr,
                               runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                               runtime::vector_ptr(buffers[2]), padded, scratch, runtime::cuda::cublas(),
                               runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "attention_fwd");
}

void attention_bwd_data_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<AttentionArgs>(cl_arg);
  void* scratch = scratch_for(a, kernels::cuda::AttentionPass::kBackward);
  kernels::cuda::attention_bwd_data(a.shape, a.n, a.first_row, a.dropout ? &a.drop : nullptr,
                                    runtime::vector_ptr(buffers[0]), runtime::vector_ptr(buffers[1]),
                                    runtime::vector_ptr(buffers[2]), runtime::vector_ptr(buffers[3]), scratch,
                                    runtime::cuda::cublas(), runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "attention_bwd_data");
}
#endif

// Footprints from the data sizes only: the arguments carry the step, which would make every task a new history.
runtime::Codelet cl_attention_fwd("attention_fwd", runtime::guarded<attention_fwd_cpu<Masked::kNo>>,
                                  DTNN_CUDA_FUNC(runtime::guarded<attention_fwd_cuda<Masked::kNo>>),
                                  {STARPU_R, STARPU_W, STARPU_W}, runtime::Footprint::kData);
runtime::Codelet cl_attention_fwd_masked("attention_fwd_masked", runtime::guarded<attention_fwd_cpu<Masked::kYes>>,
                                         DTNN_CUDA_FUNC(runtime::guarded<attention_fwd_cuda<Masked::kYes>>),
                                         {STARPU_R, STARPU_W, STARPU_W, STARPU_R}, runtime::Footprint::kData);
runtime::Codelet cl_attention_bwd_data("attention_bwd_data", runtime::guarded<attention_bwd_data_cpu>,
                                       DTNN_CUDA_FUNC(runtime::guarded<attention_bwd_data_cuda>),
                                       {STARPU_R, STARPU_R, STARPU_R, STARPU_W}, runtime::Footprint::kData);

AttentionArgs args_for(const AttentionShape& a, const DropoutDraw* drop, const Tensor& qkv, int tile) {
  const TileRange r = qkv.tile_range(tile);
  const DropoutParams params =
      drop != nullptr ? kernels::cpu::dropout_params(drop->seed, drop->step, drop->rate) : DropoutParams{};
  return AttentionArgs{a, params, r.begin, static_cast<int>(r.count), drop != nullptr ? 1 : 0};
}

void check_shapes(const TaskTag& tag, const AttentionShape& a, const Tensor& qkv, const Tensor& probs,
                  const Tensor& ctx) {
  const std::int64_t s = a.seq;
  const std::int64_t e = static_cast<std::int64_t>(a.heads) * a.head_dim;
  if (qkv.row_elements() != s * 3 * e || probs.row_elements() != a.heads * s * s || ctx.row_elements() != s * e) {
    throw InvalidArgument(fmt::format("{}: attention of {} heads of {} over {} positions with qkv {}, "
                                      "probabilities {} and context {}, expected ({}, {}), ({}, {}, {}) and ({}, {})",
                                      tag.layer, a.heads, a.head_dim, a.seq, to_string(qkv.shape()),
                                      to_string(probs.shape()), to_string(ctx.shape()), s, 3 * e, a.heads, s, s, s,
                                      e));
  }
  check_same_tiling(tag, qkv, probs);
  check_same_tiling(tag, qkv, ctx);
}

double flops(const AttentionShape& a, std::int64_t n) {
  return 4.0 * static_cast<double>(n) * a.heads * a.seq * a.seq * a.head_dim;
}

}  // namespace

void submit_attention_fwd(const TaskTag& tag, const AttentionShape& a, const DropoutDraw* drop, const Tensor& qkv,
                          Tensor& probs, Tensor& ctx, int tile, const Tensor* key_padding) {
  check_shapes(tag, a, qkv, probs, ctx);
  const AttentionArgs args = args_for(a, drop, qkv, tile);
  std::string name;
  const runtime::TaskInfo info = task_info(tag, "fwd", tile, flops(a, args.n), name);
  if (key_padding == nullptr) {
    runtime::submit_task(cl_attention_fwd, info, {rd(qkv.tile(tile)), wr(probs.tile(tile)), wr(ctx.tile(tile))},
                         args);
    return;
  }
  check_dtype(tag, *key_padding, DType::kInt32, "key_padding_mask");
  if (key_padding->shape().size() != 2 || key_padding->shape()[0] != qkv.shape()[0] ||
      key_padding->shape()[1] != a.seq) {
    throw InvalidArgument(fmt::format("{}: key_padding_mask {}, expected ({}, {}) (batch, seq)", tag.layer,
                                      to_string(key_padding->shape()), qkv.shape()[0], a.seq));
  }
  check_same_tiling(tag, qkv, *key_padding);
  runtime::submit_task(cl_attention_fwd_masked, info,
                       {rd(qkv.tile(tile)), wr(probs.tile(tile)), wr(ctx.tile(tile)), rd(key_padding->tile(tile))},
                       args);
}

void submit_attention_bwd_data(const TaskTag& tag, const AttentionShape& a, const DropoutDraw* drop,
                               const Tensor& qkv, const Tensor& probs, const Tensor& dctx, Tensor& dqkv, int tile) {
  check_shapes(tag, a, qkv, probs, dctx);
  check_same_tiling(tag, qkv, dqkv);
  const AttentionArgs args = args_for(a, drop, qkv, tile);
  std::string name;
  runtime::submit_task(cl_attention_bwd_data, task_info(tag, "bwd_data", tile, 2.0 * flops(a, args.n), name),
                       {rd(qkv.tile(tile)), rd(probs.tile(tile)), rd(dctx.tile(tile)), wr(dqkv.tile(tile))}, args);
}

}  // namespace dtnn::codelets
