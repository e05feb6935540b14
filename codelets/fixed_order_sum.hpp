// SPDX-License-Identifier: Apache-2.0
// The fixed-order sum that the tile sums of gradients (codelets/tile_sum.hpp) and the residual Add
// (codelets/merge.hpp) share: one CPU and one CUDA body for their codelets, and the chain that splits more sources
// than a task takes into tasks that add in the same order, so that a sum is bitwise the same however it is split.
// Internal to codelets/.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "codelets/common.hpp"

namespace dtnn::codelets::detail {

// Buffers: the sources, then the total (written, or read and added to when the task continues a chain).
void fixed_order_sum_cpu(void** buffers, void* cl_arg);
#ifdef DTNN_HAVE_CUDA
void fixed_order_sum_cuda(void** buffers, void* cl_arg);
#endif

// total = sources[0] + sources[1] + ... (count floats each), by codelet `cl` (one with the bodies above and a
// variable number of buffers): one task, or a chain of them past STARPU_NMAXBUFS - 1 sources. onto_existing != 0:
// total = ((total + sources[0]) + sources[1]) + ..., continuing what total holds.
void submit_fixed_order_sum(runtime::Codelet& cl, const TaskTag& tag, std::string_view pass, int tile,
                            std::span<const starpu_data_handle_t> sources, starpu_data_handle_t total,
                            std::size_t count, int onto_existing = 0);

}  // namespace dtnn::codelets::detail
