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
  // Ordered sums over the ranks (RankSum::kOrdered in models/data_parallel.hpp): each gradient is one chain of
  // additions that runs through the ranks in rank order, so that its bits are those of one rank training on the
  // whole batch. begin_chain, before the tasks that compute the gradients: on a rank after the first, each tensor
  // receives the previous rank's partial sum, which this rank's tasks then continue (they wait for it). end_chain,
  // once the tasks are submitted: a rank before the last sends its partial sum on to the next, and the last
  // rank's, the whole sum, is broadcast to every rank; the tasks submitted afterwards wait for it. Every rank
  // issues the same calls in the same order, each tensor once per step through both. Collectives that cannot do it
  // (a simulated network) throw InvalidArgument.
  virtual void begin_chain(const std::vector<Tensor*>& tensors, const std::string& name) = 0;
  virtual void end_chain(const std::vector<Tensor*>& tensors, const std::string& name) = 0;
  // Between the two, once a layer's tasks that add to a chained gradient are submitted when another layer adds to
  // it too (a weight tied to a head): the partial sum goes round the ranks once more, each rank sending its own on
  // to the next (the last to the first) and continuing the previous rank's, so that every rank's share of the first
  // layer comes before any share of the second, as on one rank.
  virtual void relay_chain(const std::vector<Tensor*>& tensors, const std::string& name) = 0;
  // Gathers every rank's rows of `local` into `global`, rank after rank (rows_per_rank[r] rows from rank r).
  virtual void all_gather(const Tensor& local, Tensor& global, const std::vector<std::int64_t>& rows_per_rank,
                          const std::string& name) = 0;
  // Waits until every collective issued so far has completed, then does check().
  virtual void wait_idle() = 0;
  // Throws dtnn::RuntimeError when the collectives failed.
  virtual void check() const = 0;
};

}  // namespace dtnn::runtime
