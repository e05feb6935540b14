// SPDX-License-Identifier: Apache-2.0
#include "codelets/common.hpp"

#include <fmt/format.h>

namespace dtnn::codelets {

runtime::TaskInfo task_info(const TaskTag& tag, std::string_view pass, int tile, double flops, std::string& storage) {
  storage = fmt::format("{}:{}", tag.layer, pass);
  return runtime::TaskInfo{storage, tile, flops, tag.priority};
}

void check_same_tiling(const TaskTag& tag, const Tensor& a, const Tensor& b) {
  if (a.tiles() != b.tiles() || a.shape()[0] != b.shape()[0]) {
    throw InvalidArgument(fmt::format("{}: tensors {} ({} tiles) and {} ({} tiles) are not tiled alike", tag.layer,
                                      to_string(a.shape()), a.tiles(), to_string(b.shape()), b.tiles()));
  }
}

void check_dtype(const TaskTag& tag, const Tensor& t, DType expected, std::string_view what) {
  if (t.dtype() != expected) {
    throw InvalidArgument(fmt::format("{}: {} {} is {}, expected {}", tag.layer, what, to_string(t.shape()),
                                      to_string(t.dtype()), to_string(expected)));
  }
}

bool bf16_tensor(const TaskTag& tag, const Tensor& t, std::string_view what) {
  if (t.dtype() == DType::kBFloat16) return true;
  check_dtype(tag, t, DType::kFloat32, what);
  return false;
}

runtime::Codelet& with_bf16(runtime::Codelet& cl, bool in, bool out) {
  if (!in && !out) return cl;
  return runtime::twin(cl, in && out ? "_bf16inout" : in ? "_bf16in" : "_bf16out");
}

}  // namespace dtnn::codelets
