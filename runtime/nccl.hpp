// SPDX-License-Identifier: Apache-2.0
// NCCL for gradients that live on a GPU (one MPI rank per GPU): the communicator is set up through MPI (rank 0's
// unique id broadcast), reductions are enqueued on a stream of their own, so that they overlap the kernels of the
// backward pass on StarPU's worker stream, and completion is seen through an event. Used by GradientReducer
// (runtime/allreduce.hpp) with AllreduceBackend::kNccl; only built with DTNN_HAVE_CUDA.
#pragma once

#ifdef DTNN_HAVE_CUDA

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "runtime/mpi.hpp"

namespace dtnn::runtime {

class NcclComm {
 public:
  // Collective over the MPI world (every rank calls it at the same point): NCCL communicator on CUDA device
  // `device`, its own non-blocking stream.
  NcclComm(const Mpi& mpi, int device);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  [[nodiscard]] int device() const { return device_; }
  // Makes `device` current on the calling thread (the communication thread calls it once).
  void bind_thread() const;

  // One reduction in flight: enqueued sums (in place, over the ranks) of device buffers, as one NCCL group.
  struct Flight;
  [[nodiscard]] std::unique_ptr<Flight, void (*)(Flight*)> start_sum(const std::vector<std::pair<float*, std::size_t>>& buffers,
                                                                     const std::string& what);
  // 1 once the flight's sums completed, 0 while running; throws dtnn::RuntimeError on a CUDA or NCCL error.
  int test(Flight& flight, const std::string& what);
  // Aborts the communicator (a peer died or hangs): kernels in flight return instead of waiting forever.
  void abort() noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
  int device_ = 0;
};

}  // namespace dtnn::runtime

#endif  // DTNN_HAVE_CUDA
