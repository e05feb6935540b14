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

// Synchronous data parallelism across MPI ranks: every rank takes its shard of each global batch, gradients are
// summed over the ranks by the communicator in buckets, metrics averaged over the ranks.
struct DataParallel {
  const runtime::Mpi* mpi = nullptr;                // null or a world of one: no communication
  runtime::Collectives* communicator = nullptr;     // required when the world has several ranks
  bool drop_last = false;                           // drop a last global batch smaller than the others
  bool sync_batchnorm = false;                      // BatchNorm statistics over every rank's rows
  BucketOptions buckets{};                          // which gradients are summed together
};

}  // namespace dtnn
