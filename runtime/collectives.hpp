// SPDX-License-Identifier: Apache-2.0
// What the training step needs from the other ranks, whoever provides it: gradient sums in the task graph and
// all-gathers of BatchNorm statistics. runtime::Communicator does it over MPI (or NCCL); a simulation replaces it
// with runtime::SimulatedNetwork (runtime/simulated_network.hpp), whose sums take the time of a network model
// and move no byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tensor.hpp"

namespace dtnn::runtime {

class Collectives {
 public:
  virtual ~Collectives() = default;
  // Ranks taking part (the world's size).
  [[nodiscard]] virtual int ranks() const = 0;
  // Sums the tensors (untiled) over the ranks, in place, as one collective named `name`: it starts once every
  // task submitted so far on them is done, and the tasks submitted on them afterwards wait for it. Every rank
  // issues the same collectives in the same order.
  virtual void sum(const std::vector<Tensor*>& tensors, const std::string& name) = 0;
  // The step's sums are all issued.
  virtual void end_step() = 0;
  // Gathers every rank's rows of `local` into `global`, rank after rank (rows_per_rank[r] rows from rank r).
  virtual void all_gather(const Tensor& local, Tensor& global, const std::vector<std::int64_t>& rows_per_rank,
                          const std::string& name) = 0;
  // Waits until every collective issued so far has completed, then does check().
  virtual void wait_idle() = 0;
  // Throws dtnn::RuntimeError when the collectives failed.
  virtual void check() const = 0;
};

}  // namespace dtnn::runtime
