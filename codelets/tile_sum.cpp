// SPDX-License-Identifier: Apache-2.0
#include "codelets/tile_sum.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include "codelets/cpu/kernels.hpp"
#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/merge.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

struct SumArgs {
  std::size_t count;
  int nsrc;
  int accumulate;  // 1: total already holds the earlier tiles' sum
};

void tile_sum_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<SumArgs>(cl_arg);
  std::array<const float*, STARPU_NMAXBUFS> src{};
  for (int i = 0; i < a.nsrc; ++i) {
    src[i] = runtime::vector_ptr(buffers[i]);
  }
  float* dst = runtime::vector_ptr(buffers[a.nsrc]);
  if (a.accumulate) {
    kernels::cpu::accumulate_fixed_order(a.count, a.nsrc, src.data(), dst);
  } else {
    kernels::cpu::sum_fixed_order(a.count, a.nsrc, src.data(), dst);
  }
}

#ifdef DTNN_HAVE_CUDA
// The CUDA twins of the CPU body's kernels, shared with the residual Add (codelets/cuda/merge.hpp): the same
// fp32 additions in the same order, bitwise the CPU's sum.
static_assert(STARPU_NMAXBUFS - 1 <= kernels::cuda::kMaxMergeSources,
              "a tile_sum task has more sources than the CUDA sum takes");

void tile_sum_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<SumArgs>(cl_arg);
  std::array<const float*, STARPU_NMAXBUFS> src{};
  for (int i = 0; i < a.nsrc; ++i) {
    src[i] = runtime::vector_ptr(buffers[i]);
  }
  float* dst = runtime::vector_ptr(buffers[a.nsrc]);
  if (a.accumulate) {
    kernels::cuda::accumulate_fixed_order(a.count, a.nsrc, src.data(), dst, runtime::cuda::stream());
  } else {
    kernels::cuda::sum_fixed_order(a.count, a.nsrc, src.data(), dst, runtime::cuda::stream());
  }
  runtime::cuda::check_launch("tile_sum");
}
#endif

runtime::Codelet cl_tile_sum("tile_sum", runtime::guarded<tile_sum_cpu>,
                             DTNN_CUDA_FUNC(runtime::guarded<tile_sum_cuda>), {});

}  // namespace

void submit_tile_sum(const TaskTag& tag, const Tensor& partials, int used, Tensor& total) {
  if (partials.row_elements() != total.numel()) {
    throw InvalidArgument(fmt::format("{}: tile partials {} do not match the total {}", tag.layer,
                                      to_string(partials.shape()), to_string(total.shape())));
  }
  if (used < 1 || used > partials.tiles()) {
    throw InvalidArgument(fmt::format("{}: sum of {} tile partials out of {}", tag.layer, used, partials.tiles()));
  }
  constexpr int kMaxSources = STARPU_NMAXBUFS - 1;
  const int tiles = used;
  std::string name;
  for (int first = 0; first < tiles; first += kMaxSources) {
    const int nsrc = std::min(kMaxSources, tiles - first);
    const SumArgs a{static_cast<std::size_t>(total.numel()), nsrc, first > 0};
    std::vector<runtime::Access> data;
    for (int i = 0; i < nsrc; ++i) {
      data.push_back(rd(partials.tile(first + i)));
    }
    data.push_back(first > 0 ? rdwr(total.handle()) : wr(total.handle()));
    runtime::submit_task(cl_tile_sum, task_info(tag, "tile_sum", -1, static_cast<double>(a.count) * nsrc, name), data,
                         a);
  }
}

}  // namespace dtnn::codelets
