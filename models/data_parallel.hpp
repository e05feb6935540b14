// SPDX-License-Identifier: Apache-2.0
// What fit() and TrainStep need to train with other ranks: pointers only, so that the training loop's header
// compiles without MPI's headers (the data-parallel set-up, models/distributed.hpp, has them).
#pragma once

#include "models/buckets.hpp"

namespace dtnn {
namespace runtime {
class Collectives;
class Mpi;
}  // namespace runtime

// How a gradient is summed over the ranks. kAllreduce: each rank sums its own samples, then the ranks' sums are
// added by an allreduce (in buckets, overlapped with the backward pass): the bits depend on the rank count.
// kOrdered: one chain of additions runs through the ranks in rank order (Collectives::begin_chain): rank r continues
// rank r - 1's partial sum with its own samples, the last rank broadcasts the whole sum. The bits are those of one
// rank training on the whole global batch (with synchronised BatchNorm where there is BatchNorm), whatever the rank
// and tile counts; the ranks' gradient work runs one after the other through each chain.
enum class RankSum { kAllreduce, kOrdered };

// Synchronous data parallelism across MPI ranks: every rank takes its shard of each global batch, gradients are
// summed over the ranks by the communicator in buckets, metrics averaged over the ranks.
struct DataParallel {
  const runtime::Mpi* mpi = nullptr;                // null or a world of one: no communication
  runtime::Collectives* communicator = nullptr;     // required when the world has several ranks
  bool drop_last = false;                           // drop a last global batch smaller than the others
  bool sync_batchnorm = false;                      // BatchNorm statistics over every rank's rows
  BucketOptions buckets{};                          // which gradients are summed together (kAllreduce)
  RankSum rank_sum = RankSum::kAllreduce;
};

}  // namespace dtnn
