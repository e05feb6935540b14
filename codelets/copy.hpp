// SPDX-License-Identifier: Apache-2.0
// Copy of one batch tile between tensors of equal size per sample (reshapes such as Flatten).
#pragma once

#include <string_view>

#include "codelets/common.hpp"

namespace dtnn::codelets {

void submit_copy(const TaskTag& tag, std::string_view pass, const Tensor& src, Tensor& dst, int tile);

}  // namespace dtnn::codelets
