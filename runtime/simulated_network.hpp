// SPDX-License-Identifier: Apache-2.0
// The other ranks of a data-parallel run, simulated (docs/simulation.md): every rank of synchronous data
// parallelism runs the same graph on its shard, so one rank's graph stands for all of them, and each gradient sum
// becomes a time on a simulated network instead of bytes moved. As runtime::Communicator does, a sum acquires its
// tensors once the tasks before it on them are done (starpu_data_acquire_cb) and holds back the tasks after it;
// a communication thread of StarPU's (a SimGrid actor in a simulation) serves the sums one at a time in issue
// order, sleeps the network model's time for each (starpu_sleep: SimGrid's clock in a simulation) and releases
// it. No byte moves and no tensor is read. NetworkModel is an alpha-beta ring allreduce over links of equal
// bandwidth and latency (a flat switch or a full-bisection fat tree): 2 (P - 1) latencies plus
// 2 (P - 1) / P of the bytes over the bandwidth.
// With on_cores, a sum is instead a task on one of the rank's CPU workers that lasts that time (its performance
// model is the network model, nothing to calibrate), at the highest priority: ranks that exchange through shared
// memory or TCP spend the sum's time on their own cores (the cores copy and add the bytes), taking it from the
// workers.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "runtime/collectives.hpp"

namespace dtnn::runtime {

struct NetworkModel {
  int ranks = 1;
  double bandwidth_bytes_per_s = 12.5e9;  // 100 Gb/s
  double latency_s = 2e-6;
  // Memory node whose copies of the gradients a sum acquires: the host's (STARPU_MAIN_RAM, MPI through host
  // memory) or a GPU's (NCCL on device buffers).
  int node = 0;
  // true: each sum occupies a CPU worker for its time (see above); false: a network beside the cores (RDMA, NCCL).
  bool on_cores = false;
  // Seconds of one allreduce of `bytes` (every rank's contribution) over the ranks.
  [[nodiscard]] double allreduce_seconds(double bytes) const;
};

class SimulatedNetwork : public Collectives {
 public:
  // Throws InvalidArgument for ranks < 2, a bandwidth <= 0 or a latency < 0.
  explicit SimulatedNetwork(NetworkModel model);
  ~SimulatedNetwork() override;
  SimulatedNetwork(const SimulatedNetwork&) = delete;
  SimulatedNetwork& operator=(const SimulatedNetwork&) = delete;

  [[nodiscard]] int ranks() const override { return model_.ranks; }
  void sum(const std::vector<Tensor*>& tensors, const std::string& name) override;
  void end_step() override {}
  // Synchronised BatchNorm is not simulated: throws InvalidArgument.
  void all_gather(const Tensor& local, Tensor& global, const std::vector<std::int64_t>& rows_per_rank,
                  const std::string& name) override;
  // Ordered sums over the ranks are not simulated: throw InvalidArgument.
  void begin_chain(const std::vector<Tensor*>& tensors, const std::string& name) override;
  void end_chain(const std::vector<Tensor*>& tensors, const std::string& name) override;
  void relay_chain(const std::vector<Tensor*>& tensors, const std::string& name) override;
  void wait_idle() override;
  void check() const override {}

  // Simulated seconds of every sum so far, and how many.
  [[nodiscard]] double busy_seconds() const;
  [[nodiscard]] std::int64_t sums() const;
  [[nodiscard]] const NetworkModel& model() const { return model_; }

  struct State;

 private:
  void sum_on_cores(const std::vector<starpu_data_handle_t>& handles, double seconds, const std::string& name);

  NetworkModel model_;
  std::unique_ptr<State> state_;
};

}  // namespace dtnn::runtime
