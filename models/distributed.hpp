// SPDX-License-Identifier: Apache-2.0
// Start-up of data-parallel training: every rank must run the same model on the same data with the same
// options, start from rank 0's weights, and sum its gradients through a communicator of the same kind.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/errors.hpp"
#include "io/dataset.hpp"
#include "models/buckets.hpp"
#include "models/optimizer.hpp"
#include "models/sequential.hpp"
#include "models/training.hpp"
#include "runtime/communicator.hpp"
#include "runtime/mpi.hpp"

namespace dtnn {

// FNV-1a over the model's layer tree (names, types, options, shapes, parameter shapes) and `extra` (the
// options and dataset sizes that must agree across ranks).
std::uint64_t structure_hash(Sequential& model, const std::string& extra);

// The ranks do not all run the same model, options and data (thrown on every rank alike).
class RankMismatch : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

// Compares the hashes of all ranks; throws RankMismatch on every rank, naming the ranks whose hash differs
// from rank 0's, when they do not all agree.
void check_same_on_all_ranks(const runtime::Mpi& mpi, std::uint64_t hash);

// Copies rank 0's parameters and buffers to every rank.
void broadcast_weights(Sequential& model, const runtime::Mpi& mpi);

struct DataParallelOptions {
  DataParallelOptions& mode(runtime::AllreduceMode m) { mode_ = m; return *this; }
  // Unset: NCCL when the gradients live on this rank's GPU (CUDA workers, tasks not kept on the CPUs), else MPI.
  DataParallelOptions& backend(runtime::AllreduceBackend b) { backend_ = b; return *this; }
  DataParallelOptions& buckets(BucketOptions b) { buckets_ = b; return *this; }
  DataParallelOptions& sync_batchnorm(bool on) { sync_batchnorm_ = on; return *this; }
  DataParallelOptions& drop_last(bool on) { drop_last_ = on; return *this; }
  DataParallelOptions& rank_sum(RankSum s) { rank_sum_ = s; return *this; }
  // What must be the same on every rank besides the model's structure (see agreement_text): hashed with it.
  DataParallelOptions& agreement(std::string text) { agreement_ = std::move(text); return *this; }

  runtime::AllreduceMode mode_ = runtime::AllreduceMode::kOverlapped;
  std::optional<runtime::AllreduceBackend> backend_;
  BucketOptions buckets_;
  bool sync_batchnorm_ = false;
  bool drop_last_ = false;
  RankSum rank_sum_ = RankSum::kAllreduce;
  std::string agreement_;
};

// The options and data sizes that every rank must share to train one model together, as one line: the data
// order (dataset, sizes, batch, epochs, steps, seed), the optimizer, the loss, and the data-parallel options (ranks
// that bucket their gradients differently would issue mismatched collectives). test may be null.
std::string agreement_text(const FitOptions& fit, const Optimizer& optimizer, const io::Dataset& train,
                           const io::Dataset* test, const DataParallelOptions& options);

// The data-parallel set-up of one run, collective (every rank at the same point): checks that the ranks agree
// (structure_hash of the model and options.agreement_), gives every rank rank 0's weights, and creates the
// communicator of the gradient sums. In a world of one it only carries the options: fit then trains alone.
class DataParallelRun {
 public:
  // Throws RankMismatch (on every rank) when the ranks disagree, InvalidArgument for NCCL without the gradients
  // on a GPU.
  DataParallelRun(const runtime::Mpi& mpi, Sequential& model, DataParallelOptions options);
  ~DataParallelRun();
  DataParallelRun(const DataParallelRun&) = delete;
  DataParallelRun& operator=(const DataParallelRun&) = delete;

  // What FitOptions::data_parallel takes.
  [[nodiscard]] DataParallel data_parallel() const;
  // Null in a world of one.
  [[nodiscard]] runtime::Communicator* communicator() const { return communicator_.get(); }
  // Waits until every gradient sum has completed (and raises a failure of the communication thread).
  void wait_idle();

 private:
  const runtime::Mpi& mpi_;
  DataParallelOptions options_;
  std::unique_ptr<runtime::Communicator> communicator_;
};

}  // namespace dtnn
