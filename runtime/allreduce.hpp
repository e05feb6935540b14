// SPDX-License-Identifier: Apache-2.0
// Gradient reductions across MPI ranks inside the task graph. Gradients are grouped into buckets in the order
// the backward pass finishes them; for each bucket the driver registers starpu_data_acquire_cb on every
// gradient: StarPU calls back once the tasks that write it (the tile sums) are done, and holds back the tasks
// submitted afterwards (the optimizer updates) until the reduction releases it. A communication thread starts
// the buckets' MPI_Iallreduce strictly in submission order -- the same order on every rank, which is what keeps
// collectives matched (blocking MPI_Allreduce inside tasks deadlocks when ranks run them in different
// orders) -- and completes them while the workers go on with the backward pass. No worker ever waits for the
// network.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/mpi.hpp"
#include "runtime/tensor.hpp"

namespace dtnn::runtime {
class NcclComm;
}

namespace dtnn::runtime {

enum class AllreduceMode {
  kOverlapped,  // each bucket as soon as its gradients are final
  kBlocking,    // all buckets of a step after its whole backward pass (the baseline)
};

// How the sums travel: MPI_Iallreduce on host copies of the gradients, or NCCL on the GPU copies (gradients
// acquired on the GPU's memory node, reduced in place on a stream of their own; one rank per GPU).
enum class AllreduceBackend { kMpi, kNccl };

struct ReducerOptions {
  ReducerOptions& mode(AllreduceMode m) { mode_ = m; return *this; }
  ReducerOptions& backend(AllreduceBackend b) { backend_ = b; return *this; }
  ReducerOptions& cuda_device(int d) { cuda_device_ = d; return *this; }
  ReducerOptions& bucket_bytes(std::size_t b) { bucket_bytes_ = b; return *this; }
  ReducerOptions& tail_buckets(int on) { tail_buckets_ = on; return *this; }
  AllreduceMode mode_ = AllreduceMode::kOverlapped;
  std::size_t bucket_bytes_ = std::size_t{25} << 20;  // PyTorch DDP's default bucket
  // 1: a bucket also closes at a layer boundary once it holds at least as much as the gradients still to come in
  // the step (layer_boundary), so buckets shrink towards the first layers and the step's last reduction, which no
  // backward computation is left to hide, is small. 0: buckets close on size only (as DDP).
  int tail_buckets_ = 1;
  AllreduceBackend backend_ = AllreduceBackend::kMpi;
  int cuda_device_ = 0;  // kNccl: the CUDA device of this rank's worker
};

class GradientReducer {
 public:
  GradientReducer(const Mpi& mpi, ReducerOptions options);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Adds a gradient whose tasks are all submitted. Returns 1 when this closed a bucket: the gradients added
  // since the previous closed bucket may now get their update tasks.
  int add(Tensor& grad, const std::string& name);
  // Closes the open bucket (end of the backward pass); returns 1 when it held gradients.
  int flush();
  // The driver finished adding one layer's gradients; elements_to_come of the step's gradients remain to be added.
  // With tail_buckets, closes the open bucket when it holds at least that many; returns 1 when it closed one.
  int layer_boundary(std::size_t elements_to_come);
  // Marks the end of a step's gradients (the blocking mode starts the step's reductions then).
  void end_step();
  // Waits until every reduction submitted so far has completed.
  void wait_idle();

  // Gathers every rank's rows of `local` (all its tiles, contiguous) into `global` (one tile), rank after rank:
  // rows_per_rank[r] rows of row_elements values from rank r. Ordered with the gradient buckets (one FIFO on
  // every rank), but started as soon as local is final, whatever the mode: the forward pass waits for it
  // (BatchNorm statistics over the ranks' whole batch).
  void all_gather(const Tensor& local, Tensor& global, const std::vector<std::int64_t>& rows_per_rank,
                  const std::string& name);

  [[nodiscard]] AllreduceMode mode() const { return options_.mode_; }
  [[nodiscard]] AllreduceBackend backend() const { return options_.backend_; }

  struct Request;
  // StarPU's acquisition callback (runs on a StarPU thread).
  static void acquired(void* request);

 private:
  void run();
  void start(Request& r);
  void finish(Request& r);

  // Completes request r, polling, within the time-out (blocking mode).
  void wait_for(Request& r);
  // 1 when r completed; aborts the job past the time-out.
  int test(Request& r);
  [[noreturn]] void time_out(const Request& r);

  const Mpi& mpi_;
  ReducerOptions options_;
  std::unique_ptr<NcclComm> nccl_;  // kNccl only
  int gpu_node_ = -1;               // kNccl: StarPU memory node of the GPU
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Request>> queue_;     // submitted, not started (FIFO = the global order)
  std::vector<std::unique_ptr<Request>> flying_;   // started, not completed (comm thread only)
  std::unique_ptr<Request> open_;                  // bucket being filled by the driver
  std::vector<std::vector<float>> staging_;        // one packing buffer per bucket index, reused every step
  int next_bucket_ = 0;                            // index of the open bucket within its step
  std::int64_t step_ = 0;
  std::int64_t steps_closed_ = 0;                  // steps whose gradients are all submitted
  std::int64_t pending_ = 0;                       // requests not yet completed
  int stop_ = 0;
  std::thread thread_;
};

}  // namespace dtnn::runtime
