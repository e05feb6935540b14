// SPDX-License-Identifier: Apache-2.0
// How the sums of a Communicator (runtime/communicator.hpp) travel between the ranks: the bytes only. The order
// of the collectives, when each may start, the time-out and the hand-over of StarPU data are the Communicator's.
// Each transport is a file of its own, chosen by CMake: MPI always (runtime/mpi_transport.cpp), NCCL in CUDA
// builds (runtime/nccl_transport.cpp). Every call but the constructor comes from the communication thread.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "runtime/mpi.hpp"

namespace dtnn::runtime {

// `count` floats at `data`, a pointer valid on the transport's memory node.
struct SumBuffer {
  float* data = nullptr;
  std::size_t count = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // A collective in flight.
  class Flight {
   public:
    virtual ~Flight() = default;
  };

  // The StarPU memory node whose copies a sum reads and writes in place: the communicator acquires (and
  // releases) the tensors there.
  [[nodiscard]] virtual int memory_node() const = 0;
  // Once, on the communication thread, before its first collective (NCCL makes its device current there).
  virtual void attach_thread() {}
  // Starts the sum over the ranks, in place, of every buffer, as one collective. `what` names it in errors.
  [[nodiscard]] virtual std::unique_ptr<Flight> start_sum(std::span<const SumBuffer> buffers,
                                                          const std::string& what) = 0;
  // 1 once the flight completed and its results are in the buffers, 0 while it runs; throws dtnn::RuntimeError
  // when the transport failed.
  virtual int test(Flight& flight, const std::string& what) = 0;
  // A peer died or hangs: makes the operations in flight return (the job is aborted next).
  virtual void abort() noexcept {}
};

// The MPI transport is runtime::MpiTransport (runtime/mpi_transport.hpp): the communicator's all-gathers use it
// whatever carries the sums.
// Buffers on this rank's GPU (`cuda_device`, which must have a CUDA worker), NCCL on a stream of its own.
// Collective over the world: every rank calls it at the same point. Defined in CUDA builds only.
std::unique_ptr<Transport> make_nccl_transport(const Mpi& mpi, int cuda_device);

}  // namespace dtnn::runtime
