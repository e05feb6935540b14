// SPDX-License-Identifier: Apache-2.0
#include "codelets/copy.hpp"

#include <cstring>

#include <fmt/format.h>

#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

void copy_cpu(void** buffers, void* cl_arg) {
  std::memcpy(runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[0]), runtime::vector_bytes(buffers[0]));
}

#ifdef DTNN_HAVE_CUDA
void copy_cuda(void** buffers, void* cl_arg) {
  DTNN_CUDA_CHECK(cudaMemcpyAsync(runtime::vector_ptr(buffers[1]), runtime::vector_ptr(buffers[0]),
                                  runtime::vector_bytes(buffers[0]), cudaMemcpyDeviceToDevice,
                                  runtime::cuda::stream()),
                  "copy");
}
#endif

struct NoArgs {};

runtime::Codelet cl_copy("copy", runtime::guarded<copy_cpu>, DTNN_CUDA_FUNC(runtime::guarded<copy_cuda>),
                         {STARPU_R, STARPU_W}, runtime::Footprint::kData);

}  // namespace

void submit_copy(const TaskTag& tag, std::string_view pass, const Tensor& src, Tensor& dst, int tile) {
  check_same_tiling(tag, src, dst);
  if (src.row_elements() != dst.row_elements() || src.dtype() != dst.dtype()) {
    throw InvalidArgument(fmt::format("{}: copy from {} {} to {} {}, expected the same size and type per sample",
                                      tag.layer, to_string(src.dtype()), to_string(src.shape()),
                                      to_string(dst.dtype()), to_string(dst.shape())));
  }
  std::string name;
  runtime::submit_task(cl_copy, task_info(tag, pass, tile, 0.0, name), {rd(src.tile(tile)), wr(dst.tile(tile))},
                       NoArgs{});
}

}  // namespace dtnn::codelets
