// SPDX-License-Identifier: Apache-2.0
// What every submit function shares: the tag that names a layer's tasks and priority, and checks that
// batch tensors are tiled alike.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "runtime/codelet.hpp"
#include "core/errors.hpp"
#include "runtime/tensor.hpp"

namespace dtnn::codelets {

// Names the tasks of one layer ("<layer>:<pass>") and sets their scheduling priority.
struct TaskTag {
  std::string_view layer;
  int priority = 0;
};

// The task's name goes to `storage`, which must outlive the submission.
runtime::TaskInfo task_info(const TaskTag& tag, std::string_view pass, int tile, double flops, std::string& storage);

// Batch tensors passed to one per-tile task must share the tile's row range.
void check_same_tiling(const TaskTag& tag, const Tensor& a, const Tensor& b);
// A tensor a task reads or writes as `expected` (token ids as int32, values as float32); `what` names it.
void check_dtype(const TaskTag& tag, const Tensor& t, DType expected, std::string_view what);

// bf16 activations (core/dtype.hpp's kBFloat16, where a container stores a layer's input side, x and dx, or output
// side, y and dy, in bf16: Layer::reads_bf16, writes_bf16). Whether a batch tensor of a pass is bf16; any other
// type than bf16 and float32 is an error naming `what`.
bool bf16_tensor(const TaskTag& tag, const Tensor& t, std::string_view what);
// The codelet of a pass with bf16 tensors: cl's twin (runtime::twin: CPU only, the same body, which tells the types
// apart by runtime::vector_is_bf16) named with "_bf16in" (the input side in bf16), "_bf16out" (the output side) or
// "_bf16inout" (both), so that each kind has its own performance model; cl itself when neither is.
runtime::Codelet& with_bf16(runtime::Codelet& cl, bool in, bool out);

// The float pointers of `count` consecutive buffers, for the codelets whose number of buffers varies from task to
// task (sums and concatenations of up to STARPU_NMAXBUFS - 1 tensors); T is float or const float. Every other
// codelet but the BatchNorm reduction chain has a fixed buffer list and reads fixed indices.
template <class T>
std::array<T*, STARPU_NMAXBUFS> vector_ptrs(void** buffers, int count) {
  std::array<T*, STARPU_NMAXBUFS> ptrs{};
  for (int i = 0; i < count; ++i) {
    ptrs[static_cast<std::size_t>(i)] = runtime::vector_ptr(buffers[i]);
  }
  return ptrs;
}

inline runtime::Access rd(starpu_data_handle_t h) { return {h, STARPU_R}; }
inline runtime::Access wr(starpu_data_handle_t h) { return {h, STARPU_W}; }
inline runtime::Access rdwr(starpu_data_handle_t h) { return {h, STARPU_RW}; }

}  // namespace dtnn::codelets
