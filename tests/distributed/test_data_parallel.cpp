// SPDX-License-Identifier: Apache-2.0
// Runs as two MPI ranks (ctest: mpirun -np 2). Each rank trains its shard with gradient reductions, and
// also, alone, the same steps on the whole global batch: the reference of the data-parallel run.
#include <gtest/gtest.h>

#include <cmath>

#include "io/dataset.hpp"
#include "layers/batch_norm.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "models/distributed.hpp"
#include "models/zoo.hpp"
#include "models/optimizers.hpp"
#include "models/training.hpp"
#include "runtime/codelet.hpp"
#include "runtime/engine.hpp"
#include "core/errors.hpp"

namespace dtnn {
namespace {

const runtime::Mpi* g_mpi = nullptr;
int g_gpu_per_rank = 0;  // 1: every rank has a CUDA worker on a GPU of its own (NCCL case)

Sequential small_cnn() {
  Sequential m;
  m.add<Conv2d>(Conv2dOptions(1, 4, 3).padding(1))
      .add<ReLU>()
      .add<MaxPool2d>(MaxPool2dOptions(2))
      .add<Flatten>()
      .add<Dense>(DenseOptions(4 * 6 * 6, 16))
      .add<ReLU>()
      .add<Dense>(DenseOptions(16, 5));
  return m;
}

std::vector<std::vector<float>> weights(Sequential& m) {
  std::vector<std::vector<float>> w;
  for (const auto& p : m.named_parameters()) w.push_back(p.parameter->value.to_vector());
  return w;
}

// 10 steps of SGD with momentum, local batch `batch` in `tiles` tiles on each of the ranks.
std::vector<std::vector<float>> train_data_parallel(
    runtime::AllreduceMode mode, std::size_t bucket_bytes, std::int64_t batch, int tiles, std::uint64_t* checksum,
    runtime::AllreduceBackend backend = runtime::AllreduceBackend::kMpi) {
  const io::Dataset data = io::synthetic_dataset(400, 1, 12, 12, 5, 21);
  Sequential model = small_cnn();
  model.build({1, 12, 12}, 100 + static_cast<std::uint64_t>(g_mpi->rank()));  // different on purpose:
  broadcast_weights(model, *g_mpi);                                           // rank 0's weights win
  runtime::Communicator comm(
      *g_mpi, runtime::CommunicatorOptions().mode(mode).backend(backend).cuda_device(runtime::local_rank()));
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  fit(model, sgd, data,
      FitOptions().batch_size(batch).tiles(tiles).steps_per_epoch(10).seed(4).verbose(false).data_parallel(
          {g_mpi, &comm, false, false, BucketOptions().bytes(bucket_bytes)}));
  comm.wait_idle();
  *checksum = model.weights_checksum();
  return weights(model);
}

// The same 10 steps in this process alone, batch 2B in `tiles` tiles, no communication.
std::vector<std::vector<float>> train_one_rank(std::int64_t batch, int tiles, std::uint64_t* checksum) {
  const io::Dataset data = io::synthetic_dataset(400, 1, 12, 12, 5, 21);
  Sequential reference = small_cnn();
  reference.build({1, 12, 12}, 100);
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  fit(reference, sgd, data,
      FitOptions().batch_size(2 * batch).tiles(tiles).steps_per_epoch(10).seed(4).verbose(false));
  *checksum = reference.weights_checksum();
  return weights(reference);
}

double worst_difference(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_EQ(a[i].size(), b[i].size()) << "tensor " << i;
    for (std::size_t j = 0; j < std::min(a[i].size(), b[i].size()); ++j) {
      worst = std::max(worst, std::abs(double(a[i][j]) - b[i][j]));
    }
  }
  return worst;
}

// 2 ranks x 2 tiles against 1 rank x 2 tiles: the ranks' tiles of 4 rows are not the one rank's tiles of 8, so the
// gradients are summed in another order (within the tile, then over the ranks): equal within rounding only.
TEST(DataParallelTest, RanksEndBitwiseIdenticalAndEqualToOneRankWithTheGlobalBatch) {
  ASSERT_EQ(g_mpi->size(), 2) << "run with mpirun -np 2";
  const std::int64_t batch = 8;
  std::uint64_t checksum = 0, reference = 0;
  const auto dp = train_data_parallel(runtime::AllreduceMode::kOverlapped, 4096, batch, 2, &checksum);
  const auto all = g_mpi->all_gather(checksum, "test checksums");
  EXPECT_EQ(all[0], all[1]) << "weights differ between ranks";
  const auto ref = train_one_rank(batch, 2, &reference);
  EXPECT_LE(worst_difference(dp, ref), 1e-5);
}

// 2 ranks x 1 tile against 1 rank x 2 tiles: rank r's tile holds the rows of the one rank's tile r (each rank takes
// its contiguous share of the global batch, the loss is scaled by the global batch on both), so each tile's
// gradient is computed alike, and the sum of the two (over the ranks, or the tile sum) is one addition, the same in
// either order: bitwise the same weights. The control (2 ranks x 2 tiles) is not.
TEST(DataParallelTest, TwoRanksOfOneTileEqualOneRankOfTwoTilesBitwise) {
  const std::int64_t batch = 8;
  std::uint64_t one_tile = 0, two_tiles = 0, reference = 0;
  const auto dp = train_data_parallel(runtime::AllreduceMode::kOverlapped, 4096, batch, 1, &one_tile);
  train_data_parallel(runtime::AllreduceMode::kOverlapped, 4096, batch, 2, &two_tiles);
  const auto ref = train_one_rank(batch, 2, &reference);
  EXPECT_EQ(worst_difference(dp, ref), 0.0);
  EXPECT_EQ(one_tile, reference);
  EXPECT_NE(two_tiles, reference) << "the control: tiles of 4 rows sum in another order";
}

// A language model (untied pre-LN transformer, tokens in, AdamW with gradient clipping: the clip's norm is taken
// after the sum over the ranks). Its windows are split among the ranks as images are.
Sequential small_lm(bool tied = false) {
  models::TransformerLmOptions o;
  o.vocabulary = 64;
  o.context = 12;
  o.d_model = 16;
  o.num_heads = 2;
  o.layers = 2;
  o.tied = tied;
  return models::transformer_lm(o);
}

// `tied`: the head's weight is the embedding's (its gradient goes round the ranks twice in an ordered sum). With
// data_parallel, the ranks' weights must end the same, or the test fails.
std::vector<std::vector<float>> train_lm(std::int64_t batch, int tiles, bool data_parallel, std::uint64_t* checksum,
                                         bool tied = false, RankSum rank_sum = RankSum::kAllreduce) {
  const io::Dataset data = io::synthetic_token_dataset(200, 12, 64, 5);
  Sequential model = small_lm(tied);
  model.build({12}, 7);
  AdamW adamw(AdamWOptions(3e-3f));
  FitOptions fit_options = FitOptions().batch_size(batch).tiles(tiles).steps_per_epoch(6).seed(2).verbose(false)
                               .clip_grad_norm(0.5f);
  std::unique_ptr<runtime::Communicator> comm;
  if (data_parallel) {
    comm = std::make_unique<runtime::Communicator>(*g_mpi, runtime::CommunicatorOptions());
    fit_options.data_parallel({g_mpi, comm.get(), false, false, BucketOptions().bytes(4096), rank_sum});
  }
  fit(model, adamw, data, fit_options);
  if (comm) comm->wait_idle();
  *checksum = model.weights_checksum();
  if (data_parallel) {
    const auto all = g_mpi->all_gather(*checksum, "language model checksums");
    EXPECT_EQ(all[0], all[1]) << "weights differ between ranks";
  }
  return weights(model);
}

// Every gradient of a language model (in-order Dense, attention projections, LayerNorm, embedding and positional
// tables) chained through the ranks: 2 ranks x 1 tile and 2 ranks x 2 tiles end bitwise on the weights of one
// rank training the global batch in 2 or 3 tiles; untied, and tied (the head's share of every rank before any
// lookup's, as on one rank). The control: the allreduce's sum of the ranks' sums is another order.
TEST(DataParallelTest, OrderedSumsOfALanguageModelEqualOneRankBitwise) {
  for (const bool tied : {false, true}) {
    std::uint64_t one_tile = 0, two_tiles = 0, reference = 0, three_tiles = 0;
    train_lm(4, 1, true, &one_tile, tied, RankSum::kOrdered);
    train_lm(4, 2, true, &two_tiles, tied, RankSum::kOrdered);
    train_lm(8, 2, false, &reference, tied);
    train_lm(8, 3, false, &three_tiles, tied);
    EXPECT_EQ(three_tiles, reference) << "one rank, 3 tiles; tied " << tied;
    EXPECT_EQ(one_tile, reference) << "2 ranks x 1 tile; tied " << tied;
    EXPECT_EQ(two_tiles, reference) << "2 ranks x 2 tiles; tied " << tied;
  }
  std::uint64_t allreduce = 0, reference = 0;
  train_lm(4, 1, true, &allreduce);
  train_lm(8, 2, false, &reference);
  EXPECT_NE(allreduce, reference) << "the control: the allreduce adds the ranks' sums";
}

// Gradients that are tile partials and a tile sum (convolution, flat Dense): rank 1's tile sum continues rank 0's,
// so 2 ranks x 2 tiles of 4 rows equal 1 rank x 4 tiles of 4 rows bitwise, where the allreduce does not (above).
TEST(DataParallelTest, OrderedSumsOfTilePartialsEqualOneRankBitwise) {
  const io::Dataset data = io::synthetic_dataset(400, 1, 12, 12, 5, 21);
  Sequential model = small_cnn();
  model.build({1, 12, 12}, 100);
  runtime::Communicator comm(*g_mpi, runtime::CommunicatorOptions());
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  fit(model, sgd, data,
      FitOptions().batch_size(8).tiles(2).steps_per_epoch(10).seed(4).verbose(false).data_parallel(
          {g_mpi, &comm, false, false, BucketOptions(), RankSum::kOrdered}));
  comm.wait_idle();
  std::uint64_t reference = 0;
  train_one_rank(8, 4, &reference);
  EXPECT_EQ(model.weights_checksum(), reference);
}

// Every parameter's gradient is final (tile sum, then the sum over the ranks) before its squares join the norm: the
// ranks end with the same bits, and with the weights of one rank training the global batch, to rounding (the
// embedding's gradient adds its rows in batch order within a rank, then sums the ranks' tables: another order than
// one rank's).
TEST(DataParallelTest, ALanguageModelWithClippingTrainsAlikeOnEveryRank) {
  std::uint64_t dp = 0, reference = 0;
  const auto ours = train_lm(4, 1, true, &dp);  // the ranks' weights compared inside
  const auto ref = train_lm(8, 2, false, &reference);
  EXPECT_LE(worst_difference(ours, ref), 1e-5);
}

TEST(DataParallelTest, BlockingAndOverlappedGiveIdenticalWeights) {
  std::uint64_t overlapped = 0, blocking = 0, one_bucket = 0;
  train_data_parallel(runtime::AllreduceMode::kOverlapped, 1, 8, 2, &overlapped);  // one bucket per gradient
  train_data_parallel(runtime::AllreduceMode::kBlocking, 1, 8, 2, &blocking);
  train_data_parallel(runtime::AllreduceMode::kOverlapped, std::size_t{1} << 30, 8, 2, &one_bucket);
  EXPECT_EQ(overlapped, blocking);
  EXPECT_EQ(overlapped, one_bucket);
}

// One rank per GPU, gradients reduced by NCCL on the GPUs' copies: the same model as MPI on the CPUs, within the
// tolerance of GPU against CPU arithmetic, and bitwise identical across ranks.
TEST(DataParallelTest, NcclOnGpusMatchesMpiOnCpus) {
  if (g_gpu_per_rank == 0) {
    GTEST_SKIP() << "needs a CUDA build and one GPU per rank";
  }
  std::uint64_t on_cpu = 0, on_gpu = 0;
  const auto mpi_weights = train_data_parallel(runtime::AllreduceMode::kOverlapped, 4096, 8, 2, &on_cpu);
  runtime::set_task_device(runtime::Device::kCuda);
  const auto nccl_weights = train_data_parallel(runtime::AllreduceMode::kOverlapped, 4096, 8, 2, &on_gpu,
                                                runtime::AllreduceBackend::kNccl);
  runtime::set_task_device(runtime::Device::kCpu);
  const auto all = g_mpi->all_gather(on_gpu, "NCCL checksums");
  EXPECT_EQ(all[0], all[1]) << "weights differ between ranks after NCCL reductions";
  ASSERT_EQ(mpi_weights.size(), nccl_weights.size());
  for (std::size_t i = 0; i < mpi_weights.size(); ++i) {
    for (std::size_t j = 0; j < mpi_weights[i].size(); ++j) {
      ASSERT_NEAR(mpi_weights[i][j], nccl_weights[i][j], 1e-4) << "parameter " << i << "[" << j << "]";
    }
  }
}

TEST(DataParallelTest, ModelThatDiffersOnOneRankIsNamed) {
  Sequential model = small_cnn();
  if (g_mpi->rank() == 1) {
    model.add<ReLU>();
  }
  model.build({1, 12, 12}, 0);
  try {
    check_same_on_all_ranks(*g_mpi, structure_hash(model, "options"));
    FAIL() << "expected InvalidArgument on every rank";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 (hash"), std::string::npos) << e.what();
  }
}

TEST(DataParallelTest, UnevenLastBatchIsSplitAcrossRanks) {
  // 21 samples, 4 per rank: global batches of 8, 8 and a last one of 5 split 3 + 2.
  const io::Dataset data = io::synthetic_dataset(21, 1, 12, 12, 5, 2);
  Sequential model = small_cnn();
  model.build({1, 12, 12}, 1);
  runtime::Communicator comm(*g_mpi, runtime::CommunicatorOptions());
  Sgd sgd(SgdOptions(0.01f));
  const History h = fit(model, sgd, data,
                        FitOptions().batch_size(4).tiles(2).verbose(false).data_parallel({g_mpi, &comm, 0}));
  EXPECT_EQ(h.epochs[0].images, 21);
  Sequential dropped = small_cnn();
  dropped.build({1, 12, 12}, 1);
  const History d = fit(dropped, sgd, data,
                        FitOptions().batch_size(4).tiles(2).verbose(false).data_parallel({g_mpi, &comm, 1}));
  EXPECT_EQ(d.epochs[0].images, 16);
  const auto all = g_mpi->all_gather(model.weights_checksum(), "test checksums");
  EXPECT_EQ(all[0], all[1]);
}

// The library's set-up, as the command line uses it: rank 0's weights on every rank, a communicator, training
// that keeps the ranks bitwise together.
TEST(DataParallelRunTest, RanksStartFromRankZerosWeightsAndTrainTogether) {
  const io::Dataset data = io::synthetic_dataset(64, 1, 12, 12, 5, 3);
  Sequential model = small_cnn();
  model.build({1, 12, 12}, 10 + static_cast<std::uint64_t>(g_mpi->rank()));
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  FitOptions options = FitOptions().batch_size(4).tiles(2).steps_per_epoch(3).seed(1).verbose(false);
  DataParallelOptions parallel = DataParallelOptions().buckets(BucketOptions().bytes(2048));
  parallel.agreement(agreement_text(options, sgd, data, nullptr, parallel));
  DataParallelRun run(*g_mpi, model, parallel);
  ASSERT_NE(run.communicator(), nullptr);
  const auto start = g_mpi->all_gather(model.weights_checksum(), "start checksums");
  EXPECT_EQ(start[0], start[1]) << "rank 0's weights on every rank";
  fit(model, sgd, data, options.data_parallel(run.data_parallel()));
  run.wait_idle();
  const auto end = g_mpi->all_gather(model.weights_checksum(), "end checksums");
  EXPECT_EQ(end[0], end[1]);
  EXPECT_NE(end[0], start[0]);
}

// Ranks that would bucket their gradients differently issue mismatched collectives: refused at the start.
TEST(DataParallelRunTest, DataParallelOptionsThatDifferOnOneRankAreARankMismatch) {
  const io::Dataset data = io::synthetic_dataset(64, 1, 12, 12, 5, 3);
  Sequential model = small_cnn();
  model.build({1, 12, 12}, 0);
  Sgd sgd(SgdOptions(0.05f));
  const FitOptions options = FitOptions().batch_size(4);
  DataParallelOptions parallel =
      DataParallelOptions().buckets(BucketOptions().bytes(g_mpi->rank() == 1 ? 1024 : 2048));
  parallel.agreement(agreement_text(options, sgd, data, nullptr, parallel));
  try {
    DataParallelRun run(*g_mpi, model, parallel);
    FAIL() << "expected RankMismatch on every rank";
  } catch (const RankMismatch& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 (hash"), std::string::npos) << e.what();
  }
}

Sequential bn_cnn() {
  Sequential m;
  m.add<Conv2d>(Conv2dOptions(1, 4, 3).padding(1).bias(false))
      .add<BatchNorm2d>(BatchNorm2dOptions(4))
      .add<ReLU>()
      .add<MaxPool2d>(MaxPool2dOptions(2))
      .add<Flatten>()
      .add<Dense>(DenseOptions(4 * 6 * 6, 5));
  return m;
}

std::vector<std::vector<float>> state(Sequential& m) {
  auto w = weights(m);
  for (const auto& b : m.named_buffers()) w.push_back(b.buffer->value.to_vector());
  return w;
}

// Tail buckets: at a layer boundary the open bucket closes once it holds at least the elements still to come, so
// the buckets shrink towards the first layers; without them only the size closes a bucket. Each closed bucket is
// one sum over the ranks.
TEST(DataParallelTest, TailBucketsCloseWhenTheRestOfTheStepIsSmaller) {
  for (const int tail : {1, 0}) {
    BucketPolicy buckets(BucketOptions().bytes(1 << 20).tail_buckets(tail));
    runtime::Communicator comm(*g_mpi, runtime::CommunicatorOptions());
    std::vector<Tensor> grads;
    for (const std::int64_t n : {1000, 300, 200, 100}) grads.emplace_back(Shape{n});
    for (auto& g : grads) g.fill(static_cast<float>(g_mpi->rank() + 1));
    std::vector<Tensor*> open;
    // Adds a gradient to the open bucket; the bucket's sum is issued when the policy closes it.
    auto add = [&](Tensor& g) {
      open.push_back(&g);
      return buckets.add(static_cast<std::size_t>(g.numel()));
    };
    auto boundary = [&](std::size_t to_come) {
      const int closed = buckets.layer_boundary(to_come);
      if (closed) {
        comm.sum(open, "bucket");
        open.clear();
      }
      return closed;
    };
    EXPECT_EQ(add(grads[0]), 0);
    EXPECT_EQ(boundary(600), tail) << "1000 elements in the bucket, 600 to come";
    EXPECT_EQ(add(grads[1]), 0);
    EXPECT_EQ(boundary(300), tail) << "300 in the bucket, 300 to come";
    EXPECT_EQ(add(grads[2]), 0);
    EXPECT_EQ(boundary(100), tail) << "200 in the bucket, 100 to come";
    EXPECT_EQ(add(grads[3]), 0);
    EXPECT_EQ(boundary(150), 0) << "100 in the bucket, 150 to come";
    if (buckets.end_step()) comm.sum(open, "bucket");
    comm.end_step();
    comm.wait_idle();
    for (auto& g : grads) {
      for (const float v : g.to_vector()) ASSERT_EQ(v, 3.0f) << "tail " << tail;  // 1 + 2 over the two ranks
    }
  }
}

TEST(DataParallelTest, SynchronisedBatchNormEqualsOneRankWithTheGlobalBatch) {
  const io::Dataset data = io::synthetic_dataset(200, 1, 12, 12, 5, 31);
  const std::int64_t batch = 8;
  auto train_dp = [&](bool sync, runtime::AllreduceMode mode) {
    Sequential model = bn_cnn();
    model.build({1, 12, 12}, 7);
    runtime::Communicator comm(*g_mpi, runtime::CommunicatorOptions().mode(mode));
    Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
    fit(model, sgd, data,
        FitOptions().batch_size(batch).tiles(2).steps_per_epoch(6).seed(2).verbose(false).data_parallel(
            {g_mpi, &comm, false, sync, BucketOptions().bytes(1024)}));
    comm.wait_idle();
    const auto all = g_mpi->all_gather(model.weights_checksum(), "test checksums");
    EXPECT_EQ(all[0], all[1]) << "ranks differ, sync " << sync;
    return state(model);
  };
  const auto synced = train_dp(true, runtime::AllreduceMode::kOverlapped);
  const auto synced_blocking = train_dp(true, runtime::AllreduceMode::kBlocking);
  const auto local = train_dp(false, runtime::AllreduceMode::kOverlapped);

  Sequential reference = bn_cnn();
  reference.build({1, 12, 12}, 7);
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  fit(reference, sgd, data, FitOptions().batch_size(2 * batch).tiles(2).steps_per_epoch(6).seed(2).verbose(false));
  const auto ref = state(reference);
  for (std::size_t i = 0; i < ref.size(); ++i) {
    EXPECT_LE(worst_difference({synced[i]}, {ref[i]}), 1e-5) << "state tensor " << i << " (weights, then buffers)";
  }
  EXPECT_EQ(worst_difference(synced, synced_blocking), 0.0);
  // Without synchronisation each rank normalises with its own half of the batch: a different model.
  EXPECT_GT(worst_difference(local, ref), 1e-4);
}

// BatchNorm computes its parameters' gradients in one task from this rank's statistics: no chain can continue it,
// and the point of an ordered sum (one rank's bits) needs the statistics of the whole batch anyway.
TEST(DataParallelTest, OrderedSumsRefuseUnsynchronisedBatchNorm) {
  const io::Dataset data = io::synthetic_dataset(40, 1, 12, 12, 5, 31);
  Sequential model = bn_cnn();
  model.build({1, 12, 12}, 7);
  runtime::Communicator comm(*g_mpi, runtime::CommunicatorOptions());
  Sgd sgd(SgdOptions(0.05f));
  try {
    fit(model, sgd, data,
        FitOptions().batch_size(8).steps_per_epoch(1).verbose(false).data_parallel(
            {g_mpi, &comm, false, false, BucketOptions(), RankSum::kOrdered}));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--sync-bn"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("weight"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dtnn

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dtnn::runtime::Mpi mpi(60);
  dtnn::g_mpi = &mpi;
  // One worker per rank: the two ranks share the machine's two cores. With a GPU per rank (same count on every
  // rank of one node), each rank also gets a CUDA worker on its own GPU for the NCCL case; the other cases keep
  // their tasks on the CPU.
  auto options = dtnn::runtime::EngineOptions().workers(1);
  if (dtnn::runtime::built_with_cuda() && dtnn::runtime::cuda_device_count() >= mpi.size()) {
    options.cuda(1).cuda_device(dtnn::runtime::local_rank());
  }
  dtnn::runtime::Engine engine(options);
  dtnn::runtime::set_task_device(dtnn::runtime::Device::kCpu);
  dtnn::g_gpu_per_rank = engine.cuda_workers() > 0 ? 1 : 0;
  if (mpi.rank() != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    // Rank 0 writes the JUnit XML (GTEST_OUTPUT) alone: the ranks would write one file.
    delete listeners.Release(listeners.default_xml_generator());
  }
  const int failed = RUN_ALL_TESTS();
  // A failure on any rank fails the test.
  double f = failed;
  mpi.sum(&f, 1, "test results");
  return f > 0 ? 1 : 0;
}
