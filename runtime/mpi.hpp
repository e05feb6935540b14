// SPDX-License-Identifier: Apache-2.0
// MPI for data-parallel training: initialised by dtnn itself with MPI_THREAD_MULTIPLE (gradient reductions
// run on a communication thread while the driver thread also communicates), only when the process was
// started by an MPI launcher; otherwise the world is this process alone and MPI is never touched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <mpi.h>

namespace dtnn::runtime {

// Seconds a collective waits for the other ranks before the job is aborted (dtnn train --mpi-timeout).
inline constexpr int kDefaultMpiTimeoutS = 300;

class Mpi {
 public:
  // timeout_s: how long a collective may wait for the other ranks before the job is aborted.
  explicit Mpi(int timeout_s = kDefaultMpiTimeoutS);
  ~Mpi();
  Mpi(const Mpi&) = delete;
  Mpi& operator=(const Mpi&) = delete;

  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int size() const { return size_; }
  [[nodiscard]] bool active() const { return size_ > 1; }
  [[nodiscard]] int timeout_s() const { return timeout_s_; }
  // Communicators: one for the driver thread, one for the gradient-reduction thread (collectives of two
  // threads must not share a communicator).
  [[nodiscard]] MPI_Comm driver_comm() const { return driver_; }
  [[nodiscard]] MPI_Comm reduction_comm() const { return reduction_; }

  // Collectives of the driver thread, each bounded by the time-out (then MPI_Abort with a message).
  void broadcast(float* data, std::size_t count, int root, const std::string& what) const;
  void sum(double* data, int count, const std::string& what) const;
  std::vector<std::uint64_t> all_gather(std::uint64_t value, const std::string& what) const;
  void barrier(const std::string& what) const;

  // Completes a request, polling; aborts the whole job with a message naming this rank and `what` when the
  // other ranks do not answer within the time-out.
  // max_pause_us bounds the sleep between two tests: Open MPI progresses a collective only inside MPI calls, so
  // large reductions want frequent tests.
  void wait(MPI_Request& request, const std::string& what, int max_pause_us = 2000) const;
  [[noreturn]] void abort(const std::string& message) const;
  // "rank 1" in a world of two, "one of ranks 0, 2, 3" in larger ones: who may have failed, seen from here.
  [[nodiscard]] std::string peers() const;

  // The process's Mpi, or nullptr.
  static const Mpi* current();

 private:
  int rank_ = 0;
  int size_ = 1;
  int timeout_s_;
  int initialised_ = 0;
  MPI_Comm driver_ = MPI_COMM_NULL;
  MPI_Comm reduction_ = MPI_COMM_NULL;
};

// True when an MPI launcher (mpirun, srun) started this process.
bool launched_by_mpi();
// This process's rank among the ranks of its node, from the launcher's environment (0 when not launched so):
// the GPU a rank takes.
int local_rank();

}  // namespace dtnn::runtime
