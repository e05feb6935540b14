// SPDX-License-Identifier: Apache-2.0
// Tasks that merge the paths of a graph container, one per batch tile: element-wise sum (residual Add) and
// channel concatenation, and the concatenation's inverse for the backward pass.
#pragma once

#include <string_view>
#include <vector>

#include "codelets/common.hpp"

namespace dtnn::codelets {

// At most this many inputs (outputs for split) in one task: StarPU's build allows 8 buffers per task.
inline constexpr int kMaxMergeParts = STARPU_NMAXBUFS - 1;

// out[tile] = inputs[0][tile] + inputs[1][tile] + ... in that order (a chain of tasks past kMaxMergeParts).
void submit_add(const TaskTag& tag, std::string_view pass, const std::vector<const Tensor*>& inputs, Tensor& out,
                int tile);
// out[tile] = ReLU(inputs[0][tile] + inputs[1][tile] + ...), the sum in that order (one task: at most
// kMaxMergeParts inputs). A residual Add with the ReLU after it fused (models/fusion.hpp), pass "add_relu".
void submit_add_relu(const TaskTag& tag, const std::vector<const Tensor*>& inputs, Tensor& out, int tile);
// out[tile] = the inputs' tiles concatenated along the channels of each sample.
void submit_concat_fwd(const TaskTag& tag, const std::vector<const Tensor*>& inputs, Tensor& out, int tile);
// parts[p][tile] = the channel slice of dy[tile] that input p contributed.
void submit_concat_bwd_data(const TaskTag& tag, const Tensor& dy, const std::vector<Tensor*>& parts, int tile);

}  // namespace dtnn::codelets
