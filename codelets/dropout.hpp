// SPDX-License-Identifier: Apache-2.0
// Dropout tasks, one per batch tile. The mask of a sample depends on (seed, step, its row in the batch) only,
// never on the tiling (see kernels::cpu::dropout_fwd).
#pragma once

#include <cstdint>

#include "codelets/common.hpp"

namespace dtnn::codelets {

struct DropoutDraw {
  std::uint64_t seed = 0;
  std::int64_t step = 0;
  double rate = 0.0;
};

// mask[tile] = kept ? 1 / (1 - rate) : 0; y[tile] = x[tile] * mask[tile]
void submit_dropout_fwd(const TaskTag& tag, const DropoutDraw& draw, const Tensor& x, Tensor& mask, Tensor& y,
                        int tile);
// dx[tile] = dy[tile] * mask[tile]
void submit_dropout_bwd_data(const TaskTag& tag, const Tensor& mask, const Tensor& dy, Tensor& dx, int tile);

}  // namespace dtnn::codelets
