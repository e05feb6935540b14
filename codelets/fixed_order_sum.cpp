// SPDX-License-Identifier: Apache-2.0
#include "codelets/fixed_order_sum.hpp"

#include <algorithm>
#include <vector>

#include "codelets/cpu/kernels.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/merge.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets::detail {
namespace {

struct SumArgs {
  std::size_t count;
  int nsrc;
  int accumulate;  // 1: the total already holds the sum of the chain's earlier sources
};

constexpr int kMaxSources = STARPU_NMAXBUFS - 1;

}  // namespace

void fixed_order_sum_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<SumArgs>(cl_arg);
  const auto src = vector_ptrs<const float>(buffers, a.nsrc);
  float* total = runtime::vector_ptr(buffers[a.nsrc]);
  if (a.accumulate) {
    kernels::cpu::accumulate_fixed_order(a.count, a.nsrc, src.data(), total);
  } else {
    kernels::cpu::sum_fixed_order(a.count, a.nsrc, src.data(), total);
  }
}

#ifdef DTNN_HAVE_CUDA
// The same fp32 additions in the same order as the CPU body: bitwise the CPU's sum.
static_assert(kMaxSources <= kernels::cuda::kMaxMergeSources, "a sum task has more sources than the CUDA sum takes");

void fixed_order_sum_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<SumArgs>(cl_arg);
  const auto src = vector_ptrs<const float>(buffers, a.nsrc);
  float* total = runtime::vector_ptr(buffers[a.nsrc]);
  if (a.accumulate) {
    kernels::cuda::accumulate_fixed_order(a.count, a.nsrc, src.data(), total, runtime::cuda::stream());
  } else {
    kernels::cuda::sum_fixed_order(a.count, a.nsrc, src.data(), total, runtime::cuda::stream());
  }
  DTNN_CUDA_CHECK(cudaGetLastError(), starpu_task_get_current()->cl->name);  // "tile_sum" or "add"
}
#endif

void submit_fixed_order_sum(runtime::Codelet& cl, const TaskTag& tag, std::string_view pass, int tile,
                            std::span<const starpu_data_handle_t> sources, starpu_data_handle_t total,
                            std::size_t count, int onto_existing) {
  const int n = static_cast<int>(sources.size());
  std::string name;
  for (int first = 0; first < n; first += kMaxSources) {
    const int nsrc = std::min(kMaxSources, n - first);
    std::vector<runtime::Access> data;
    for (int i = 0; i < nsrc; ++i) {
      data.push_back(rd(sources[static_cast<std::size_t>(first + i)]));
    }
    const int accumulate = first > 0 || onto_existing != 0 ? 1 : 0;
    data.push_back(accumulate ? rdwr(total) : wr(total));
    const SumArgs a{count, nsrc, accumulate};
    runtime::submit_task(cl, task_info(tag, pass, tile, static_cast<double>(count) * nsrc, name), data, a);
  }
}

}  // namespace dtnn::codelets::detail
