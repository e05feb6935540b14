// SPDX-License-Identifier: Apache-2.0
// Start-up of data-parallel training: every rank must run the same model on the same data with the same
// options, and start from rank 0's weights.
#pragma once

#include <cstdint>
#include <string>

#include "models/sequential.hpp"
#include "runtime/mpi.hpp"

namespace dtnn {

// FNV-1a over the model's layer tree (names, types, options, shapes, parameter shapes) and `extra` (the
// options and dataset sizes that must agree across ranks).
std::uint64_t structure_hash(Sequential& model, const std::string& extra);

// Compares the hashes of all ranks; throws InvalidArgument on every rank, naming the ranks whose hash differs
// from rank 0's, when they do not all agree.
void check_same_on_all_ranks(const runtime::Mpi& mpi, std::uint64_t hash);

// Copies rank 0's parameters and buffers to every rank.
void broadcast_weights(Sequential& model, const runtime::Mpi& mpi);

}  // namespace dtnn
