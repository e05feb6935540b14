// SPDX-License-Identifier: Apache-2.0
// Option-A residual shortcut tasks (subsampling and zero channels), one per batch tile (the shape's n is replaced
// by the tile's rows).
#pragma once

#include "codelets/common.hpp"
#include "codelets/cpu/shortcut_pad.hpp"

namespace dtnn::codelets {

void submit_shortcut_pad_fwd(const TaskTag& tag, const ShortcutPadShape& shape, const Tensor& x,
                             Tensor& y, int tile);
// The backward pass reads only dy: the map is linear and its gradient a gather of the kept channels.
void submit_shortcut_pad_bwd_data(const TaskTag& tag, const ShortcutPadShape& shape, const Tensor& dy,
                                  Tensor& dx, int tile);

}  // namespace dtnn::codelets
