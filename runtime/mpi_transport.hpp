// SPDX-License-Identifier: Apache-2.0
// The MPI transport: host copies (STARPU_MAIN_RAM) of the tensors, non-blocking collectives on the world's
// reduction communicator (the driver thread has a communicator of its own). Sums of several tensors are packed
// into one staging buffer, so that a bucket is one MPI_Iallreduce; a sum of one tensor is reduced in place.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/mpi.hpp"
#include "runtime/transport.hpp"

namespace dtnn::runtime {

class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(const Mpi& mpi) : mpi_(mpi) {}

  [[nodiscard]] int memory_node() const override;
  [[nodiscard]] std::unique_ptr<Flight> start_sum(std::span<const SumBuffer> buffers, const std::string& what) override;
  // Gathers every rank's `count` values at `local` into `global`, rank after rank: counts[r] values of rank r at
  // displacements[r]. Host buffers.
  [[nodiscard]] std::unique_ptr<Flight> start_all_gather(const float* local, int count, float* global,
                                                         const std::vector<int>& counts,
                                                         const std::vector<int>& displacements);
  // Point to point and broadcast for the ordered sums over the ranks (Communicator::begin_chain/end_chain): `count`
  // values at `data` (host) to or from rank `peer` under `tag`, or from rank `root` to every rank.
  [[nodiscard]] std::unique_ptr<Flight> start_send(const float* data, std::size_t count, int peer, int tag);
  [[nodiscard]] std::unique_ptr<Flight> start_receive(float* data, std::size_t count, int peer, int tag);
  [[nodiscard]] std::unique_ptr<Flight> start_broadcast(float* data, std::size_t count, int root);
  int test(Flight& flight, const std::string& what) override;

 private:
  struct MpiFlight;
  std::vector<float> take_staging(std::size_t count);

  const Mpi& mpi_;
  // Staging buffers of completed sums, reused by the next ones.
  std::vector<std::vector<float>> spare_;
};

}  // namespace dtnn::runtime
