// SPDX-License-Identifier: Apache-2.0
#include "models/distributed.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dtnn {

std::uint64_t structure_hash(Sequential& model, const std::string& extra) {
  std::string text = model.summary() + "\n" + extra;
  for (const auto& p : model.named_parameters()) {
    text += "\n" + p.name + to_string(p.parameter->value.shape());
  }
  for (const auto& b : model.named_buffers()) {
    text += "\n" + b.name + to_string(b.buffer->value.shape());
  }
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h = (h ^ c) * 0x100000001b3ull;
  }
  return h;
}

void check_same_on_all_ranks(const runtime::Mpi& mpi, std::uint64_t hash) {
  const std::vector<std::uint64_t> all = mpi.all_gather(hash, "comparison of the model across ranks");
  std::string differ;
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      differ += fmt::format("{}rank {} (hash {:016x})", differ.empty() ? "" : ", ", r, all[r]);
    }
  }
  if (!differ.empty()) {
    throw InvalidArgument(fmt::format("data-parallel start-up: {} runs a different model, options or dataset than "
                                      "rank 0 (hash {:016x}), expected the same on every rank",
                                      differ, all[0]));
  }
}

void broadcast_weights(Sequential& model, const runtime::Mpi& mpi) {
  if (!mpi.active()) return;
  for (const auto& p : model.named_parameters()) {
    auto values = p.parameter->value.read_write();
    mpi.broadcast(values.data().data(), values.data().size(), 0, "broadcast of " + p.name);
  }
  for (const auto& b : model.named_buffers()) {
    auto values = b.buffer->value.read_write();
    mpi.broadcast(values.data().data(), values.data().size(), 0, "broadcast of " + b.name);
  }
}

}  // namespace dtnn
