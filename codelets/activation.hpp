// SPDX-License-Identifier: Apache-2.0
// Element-wise activation tasks (Sigmoid, Tanh, LeakyReLU, ELU, GELU), one per batch tile. Each kind has its own
// codelets ("sigmoid_fwd", "sigmoid_bwd_data", ...), hence its own performance models and trace names.
#pragma once

#include "codelets/common.hpp"
#include "codelets/kinds.hpp"

namespace dtnn::codelets {

// Whether the derivative is computed from the output (Sigmoid, Tanh) or from the input (the others).
[[nodiscard]] bool derivative_from_output(ActivationKind kind);

void submit_activation_fwd(const TaskTag& tag, const ActivationSpec& spec, const Tensor& x, Tensor& y, int tile);
// dx[tile] from dy[tile] and whichever of x and y the kind's derivative needs.
void submit_activation_bwd_data(const TaskTag& tag, const ActivationSpec& spec, const Tensor& x, const Tensor& y,
                                const Tensor& dy, Tensor& dx, int tile);

}  // namespace dtnn::codelets
