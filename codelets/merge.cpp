// SPDX-License-Identifier: Apache-2.0
#include "codelets/merge.hpp"

#include <array>

#include <fmt/format.h>

#include "codelets/cpu/kernels.hpp"
#include "codelets/fixed_order_sum.hpp"
#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/merge.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

struct ConcatArgs {
  int n;
  int nparts;
  std::array<std::int64_t, kMaxMergeParts> part_elems;
};

// Buffers: the parts, then the whole.
void concat_fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConcatArgs>(cl_arg);
  const auto parts = vector_ptrs<const float>(buffers, a.nparts);
  kernels::cpu::concat_fwd(a.n, a.nparts, parts.data(), a.part_elems.data(), runtime::vector_ptr(buffers[a.nparts]));
}

// Buffers: the whole (dy), then the parts.
void concat_bwd_data_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConcatArgs>(cl_arg);
  const auto parts = vector_ptrs<float>(buffers + 1, a.nparts);
  kernels::cpu::concat_bwd_data(a.n, a.nparts, runtime::vector_ptr(buffers[0]), a.part_elems.data(), parts.data());
}

struct AddReluArgs {
  std::size_t count;
  int nsrc;
  int unused = 0;
};

// Buffers: the sources, then the total.
void add_relu_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<AddReluArgs>(cl_arg);
  const auto src = vector_ptrs<const float>(buffers, a.nsrc);
  kernels::cpu::sum_fixed_order_relu(a.count, a.nsrc, src.data(), runtime::vector_ptr(buffers[a.nsrc]));
}

#ifdef DTNN_HAVE_CUDA
void add_relu_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<AddReluArgs>(cl_arg);
  const auto src = vector_ptrs<const float>(buffers, a.nsrc);
  kernels::cuda::sum_fixed_order_relu(a.count, a.nsrc, src.data(), runtime::vector_ptr(buffers[a.nsrc]),
                                      runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "add_relu");
}

static_assert(kMaxMergeParts <= kernels::cuda::kMaxMergeSources, "the CUDA merge kernels take fewer parts than a task");

void concat_fwd_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConcatArgs>(cl_arg);
  const auto parts = vector_ptrs<const float>(buffers, a.nparts);
  kernels::cuda::concat_fwd(a.n, a.nparts, parts.data(), a.part_elems.data(), runtime::vector_ptr(buffers[a.nparts]),
                            runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "concat_fwd");
}

void concat_bwd_data_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConcatArgs>(cl_arg);
  const auto parts = vector_ptrs<float>(buffers + 1, a.nparts);
  kernels::cuda::concat_bwd_data(a.n, a.nparts, runtime::vector_ptr(buffers[0]), a.part_elems.data(), parts.data(),
                                 runtime::cuda::stream());
  DTNN_CUDA_CHECK(cudaGetLastError(), "concat_bwd_data");
}
#endif

runtime::Codelet cl_add("add", runtime::guarded<detail::fixed_order_sum_cpu>,
                        DTNN_CUDA_FUNC(runtime::guarded<detail::fixed_order_sum_cuda>), {});
runtime::Codelet cl_add_relu("add_relu", runtime::guarded<add_relu_cpu>,
                             DTNN_CUDA_FUNC(runtime::guarded<add_relu_cuda>), {});
runtime::Codelet cl_concat_fwd("concat_fwd", runtime::guarded<concat_fwd_cpu>,
                               DTNN_CUDA_FUNC(runtime::guarded<concat_fwd_cuda>), {});
runtime::Codelet cl_concat_bwd_data("concat_bwd_data", runtime::guarded<concat_bwd_data_cpu>,
                                    DTNN_CUDA_FUNC(runtime::guarded<concat_bwd_data_cuda>), {});

ConcatArgs concat_args(const TaskTag& tag, const Tensor& whole, const std::vector<std::int64_t>& elems, int tile) {
  if (elems.empty() || static_cast<int>(elems.size()) > kMaxMergeParts) {
    throw InvalidArgument(fmt::format("{}: concatenation of {} parts, expected 1 to {} (StarPU's buffer limit)",
                                      tag.layer, elems.size(), kMaxMergeParts));
  }
  ConcatArgs a{static_cast<int>(whole.tile_range(tile).count), static_cast<int>(elems.size()), {}};
  std::int64_t total = 0;
  for (std::size_t p = 0; p < elems.size(); ++p) {
    a.part_elems[p] = elems[p];
    total += elems[p];
  }
  if (total != whole.row_elements()) {
    throw InvalidArgument(fmt::format("{}: parts of {} values per sample in all, expected {}", tag.layer, total,
                                      whole.row_elements()));
  }
  return a;
}

}  // namespace

void submit_add(const TaskTag& tag, std::string_view pass, const std::vector<const Tensor*>& inputs, Tensor& out,
                int tile) {
  if (inputs.empty()) {
    throw InvalidArgument(fmt::format("{}: sum of no tensors", tag.layer));
  }
  std::vector<starpu_data_handle_t> sources;
  for (const Tensor* in : inputs) {
    check_same_tiling(tag, *in, out);
    if (in->row_elements() != out.row_elements()) {
      throw InvalidArgument(fmt::format("{}: adding {} to {}, expected equal shapes", tag.layer,
                                        to_string(in->shape()), to_string(out.shape())));
    }
    sources.push_back(in->tile(tile));
  }
  detail::submit_fixed_order_sum(cl_add, tag, pass, tile, sources, out.tile(tile),
                                 static_cast<std::size_t>(out.tile_range(tile).count * out.row_elements()));
}

void submit_add_relu(const TaskTag& tag, const std::vector<const Tensor*>& inputs, Tensor& out, int tile) {
  if (inputs.empty() || static_cast<int>(inputs.size()) > kMaxMergeParts) {
    throw InvalidArgument(fmt::format("{}: sum and ReLU of {} tensors, expected 1 to {} (StarPU's buffer limit)",
                                      tag.layer, inputs.size(), kMaxMergeParts));
  }
  std::vector<runtime::Access> data;
  for (const Tensor* in : inputs) {
    check_same_tiling(tag, *in, out);
    if (in->row_elements() != out.row_elements()) {
      throw InvalidArgument(fmt::format("{}: adding {} to {}, expected equal shapes", tag.layer,
                                        to_string(in->shape()), to_string(out.shape())));
    }
    data.push_back(rd(in->tile(tile)));
  }
  data.push_back(wr(out.tile(tile)));
  const AddReluArgs a{static_cast<std::size_t>(out.tile_range(tile).count * out.row_elements()),
                      static_cast<int>(inputs.size())};
  std::string name;
  runtime::submit_task(cl_add_relu, task_info(tag, "add_relu", tile, static_cast<double>(a.count) * a.nsrc, name),
                       data, a);
}

void submit_concat_fwd(const TaskTag& tag, const std::vector<const Tensor*>& inputs, Tensor& out, int tile) {
  std::vector<std::int64_t> elems;
  std::vector<runtime::Access> data;
  for (const Tensor* in : inputs) {
    check_same_tiling(tag, *in, out);
    elems.push_back(in->row_elements());
    data.push_back(rd(in->tile(tile)));
  }
  const ConcatArgs a = concat_args(tag, out, elems, tile);
  data.push_back(wr(out.tile(tile)));
  std::string name;
  runtime::submit_task(cl_concat_fwd, task_info(tag, "concat", tile, 0.0, name), data, a);
}

void submit_concat_bwd_data(const TaskTag& tag, const Tensor& dy, const std::vector<Tensor*>& parts, int tile) {
  std::vector<std::int64_t> elems;
  std::vector<runtime::Access> data{rd(dy.tile(tile))};
  for (Tensor* p : parts) {
    check_same_tiling(tag, *p, dy);
    elems.push_back(p->row_elements());
    data.push_back(wr(p->tile(tile)));
  }
  const ConcatArgs a = concat_args(tag, dy, elems, tile);
  std::string name;
  runtime::submit_task(cl_concat_bwd_data, task_info(tag, "split", tile, 0.0, name), data, a);
}

}  // namespace dtnn::codelets
