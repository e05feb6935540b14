// SPDX-License-Identifier: Apache-2.0
// Collectives across MPI ranks inside the task graph: gradient sums (data parallelism) and all-gathers
// (synchronised BatchNorm), on one communication thread. For each collective the driver registers
// starpu_data_acquire_on_node_cb on every tensor it reads or writes: StarPU calls back once the tasks submitted
// before on them are done, and holds back the tasks submitted afterwards until the collective releases them. The
// communication thread starts the collectives strictly in submission order -- the same order on every rank,
// which is what keeps collectives matched (blocking MPI_Allreduce inside tasks deadlocks when ranks run them in
// different orders) -- and completes them while the workers go on with the backward pass. No worker ever waits
// for the network. What goes into one sum (the gradient buckets) is the caller's choice (models/buckets.hpp);
// how the bytes travel is a Transport's (runtime/transport.hpp).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/collectives.hpp"
#include "runtime/mpi.hpp"
#include "runtime/mpi_transport.hpp"
#include "runtime/tensor.hpp"
#include "runtime/transport.hpp"

namespace dtnn::runtime {

enum class AllreduceMode {
  kOverlapped,  // each sum as soon as its tensors are final
  kBlocking,    // all sums of a step once every one of them is ready (after the whole backward pass: the baseline)
};

// How the sums travel: MPI_Iallreduce on host copies, or NCCL on the GPU copies (tensors acquired on the GPU's
// memory node, reduced in place on a stream of their own; one rank per GPU; CUDA builds only).
enum class AllreduceBackend { kMpi, kNccl };

struct CommunicatorOptions {
  CommunicatorOptions& mode(AllreduceMode m) { mode_ = m; return *this; }
  CommunicatorOptions& backend(AllreduceBackend b) { backend_ = b; return *this; }
  CommunicatorOptions& cuda_device(int d) { cuda_device_ = d; return *this; }
  AllreduceMode mode_ = AllreduceMode::kOverlapped;
  AllreduceBackend backend_ = AllreduceBackend::kMpi;
  int cuda_device_ = 0;  // kNccl: the CUDA device of this rank's worker
};

class Communicator : public Collectives {
 public:
  // Collective over the world: every rank creates its communicator at the same point (NCCL sets up its own
  // communicator here). Throws InvalidArgument for kNccl in a build without CUDA or without a CUDA worker on the
  // device.
  Communicator(const Mpi& mpi, CommunicatorOptions options);
  // Sums travel through `sums` (a transport of the caller's; the all-gathers stay on MPI).
  Communicator(const Mpi& mpi, std::unique_ptr<Transport> sums, AllreduceMode mode);
  ~Communicator() override;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Sums the tensors (untiled) over the ranks, in place, as one collective named `name`: it starts once every
  // task submitted so far on them is done (kBlocking: once the step ended and all its sums are ready), and the
  // tasks submitted on them afterwards wait for it. Every rank must issue the same collectives in the same order.
  void sum(const std::vector<Tensor*>& tensors, const std::string& name) override;
  // The step's sums are all issued (kBlocking starts them now).
  void end_step() override;

  // Gathers every rank's rows of `local` (all its tiles, contiguous) into `global` (one tile), rank after rank:
  // rows_per_rank[r] rows of row_elements values from rank r. In the same FIFO as the sums, but started as soon
  // as local is final, whatever the mode: the forward pass waits for it (BatchNorm statistics over the ranks'
  // whole batch).
  void all_gather(const Tensor& local, Tensor& global, const std::vector<std::int64_t>& rows_per_rank,
                  const std::string& name) override;

  // Ordered sums (Collectives::begin_chain, end_chain): one message per tensor, tagged with the tensor's place in
  // the first begin_chain calls (the same on every rank), through host memory whatever carries the sums; each
  // starts as soon as its tensor is ready, whatever the mode (the next rank's chain waits for it).
  void begin_chain(const std::vector<Tensor*>& tensors, const std::string& name) override;
  void end_chain(const std::vector<Tensor*>& tensors, const std::string& name) override;
  void relay_chain(const std::vector<Tensor*>& tensors, const std::string& name) override;

  // Waits until every collective issued so far has completed, then does check().
  void wait_idle() override;
  // Throws dtnn::RuntimeError naming this rank and the cause when the communication thread failed (its start, or
  // the start of a collective). From then on it releases the tensors of every collective without communicating,
  // so that the task graph drains, and sum, end_step and all_gather throw.
  void check() const override;
  [[nodiscard]] int ranks() const override { return mpi_.size(); }

  [[nodiscard]] AllreduceMode mode() const { return mode_; }

  struct Request;
  // StarPU's acquisition callback (runs on a StarPU thread).
  static void acquired(void* request);

 private:
  void enqueue(std::unique_ptr<Request> r);
  // The message tag of a chained tensor: its place among the tensors begin_chain has seen.
  int chain_tag(const Tensor* t, const std::string& name);
  // The tag of a tensor begin_chain has seen; throws InvalidArgument naming `call` otherwise.
  int known_chain_tag(const Tensor* t, const std::string& name, const char* call) const;
  void close_step() noexcept;
  void wait_drained();
  void run() noexcept;
  // Under the lock: the front request when it may start now (or, after a failure, be released), else null.
  std::unique_ptr<Request> next_request();
  // Takes r as far as the mode goes: 1 when it is in flight (kOverlapped), 0 when it is done (completed in
  // kBlocking, failed to start, or released unsent after a failure).
  int dispatch(Request& r, int failed);
  // Tests every collective in flight, finishes the completed ones; returns how many completed.
  std::size_t complete_flights();
  // Starts r; 0 when the start failed (recorded, r's tensors released).
  int launch(Request& r);
  void finish(Request& r);
  void fail(const std::string& what) noexcept;
  // Completes r, polling, within the time-out (kBlocking).
  void wait_for(Request& r);
  // 1 when r completed; aborts the job on a transport error or past the time-out.
  int test(Request& r);
  [[noreturn]] void abort_job(const std::string& message);

  const Mpi& mpi_;
  AllreduceMode mode_;
  MpiTransport host_;                  // all-gathers (rows per rank may differ: no NCCL)
  std::unique_ptr<Transport> sums_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Request>> queue_;    // issued, not started (FIFO = the global order)
  std::vector<std::unique_ptr<Request>> flying_;  // started, not completed (comm thread only)
  std::int64_t step_ = 0;
  std::int64_t steps_closed_ = 0;                 // steps whose sums are all issued
  std::int64_t pending_ = 0;                      // requests not yet completed
  std::unordered_map<const Tensor*, int> chain_tags_;  // driver thread only
  int stop_ = 0;
  std::string failure_;                           // non-empty once the communication thread failed
  std::thread thread_;
};

}  // namespace dtnn::runtime
