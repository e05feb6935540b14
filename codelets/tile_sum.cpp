// SPDX-License-Identifier: Apache-2.0
#include "codelets/tile_sum.hpp"

#include <vector>

#include <fmt/format.h>

#include "codelets/fixed_order_sum.hpp"
#include "runtime/failure.hpp"

namespace dtnn::codelets {
namespace {

runtime::Codelet cl_tile_sum("tile_sum", runtime::guarded<detail::fixed_order_sum_cpu>,
                             DTNN_CUDA_FUNC(runtime::guarded<detail::fixed_order_sum_cuda>), {});

}  // namespace

void submit_tile_sum(const TaskTag& tag, const Tensor& partials, int used, Tensor& total, int onto_existing) {
  if (partials.row_elements() != total.numel()) {
    throw InvalidArgument(fmt::format("{}: tile partials {} do not match the total {}", tag.layer,
                                      to_string(partials.shape()), to_string(total.shape())));
  }
  if (used < 1 || used > partials.tiles()) {
    throw InvalidArgument(fmt::format("{}: sum of {} tile partials out of {}", tag.layer, used, partials.tiles()));
  }
  std::vector<starpu_data_handle_t> sources;
  for (int t = 0; t < used; ++t) {
    sources.push_back(partials.tile(t));
  }
  detail::submit_fixed_order_sum(cl_tile_sum, tag, "tile_sum", -1, sources, total.handle(),
                                 static_cast<std::size_t>(total.numel()), onto_existing);
}

}  // namespace dtnn::codelets
