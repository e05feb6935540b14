// SPDX-License-Identifier: Apache-2.0
// Checkpoints (io/checkpoint.cpp: load_checkpoint, and check_against, which lists what does not match a model).
// The seeds (fuzz/corpus/checkpoint) are files of save_checkpoint, in HDF5's newest format, whose metadata HDF5
// checksums, as every writer of checkpoints writes them (tools/pytorch_to_checkpoint.py too).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/errors.hpp"
#include "fuzz/fuzz_hdf5.hpp"
#include "fuzz/fuzz_input.hpp"
#include "io/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dtnn;
  const auto file = fuzz::write_input("input.h5", data, size);
  try {
    const io::Checkpoint c = io::load_checkpoint(file);
    for (const auto* entries : {&c.parameters, &c.buffers, &c.optimizer_state}) {
      for (const io::NamedArray& a : *entries) {
        std::int64_t n = 1;
        for (const std::int64_t d : a.shape) {
          fuzz::require(d >= 0, "checkpoint: extents >= 0");
          n *= d;
        }
        fuzz::require(n == static_cast<std::int64_t>(a.data.size()), "checkpoint: product(shape) values an entry");
      }
    }
    fuzz::require(c.world_size >= 1, "checkpoint: world_size >= 1");
    fuzz::require(c.rng_states.empty() || static_cast<int>(c.rng_states.size()) == c.world_size,
                  "checkpoint: no rng state or one a rank");
    io::check_against(c, {{"features.0.weight", {4, 1, 3, 3}}}, {}, file);
  } catch (const DataError&) {
  }
  fuzz::require_hdf5_closed();
  return 0;
}
