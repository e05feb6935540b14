// SPDX-License-Identifier: Apache-2.0
#include "models/distributed.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "codelets/loss.hpp"
#include "runtime/engine.hpp"
#include "runtime/codelet.hpp"

namespace dtnn {

std::uint64_t structure_hash(Sequential& model, const std::string& extra) {
  std::string text = model.summary() + "\n" + extra;
  for (const auto& p : model.named_parameters()) {
    text += "\n" + p.name + to_string(p.parameter->value.shape());
  }
  for (const auto& b : model.named_buffers()) {
    text += "\n" + b.name + to_string(b.buffer->value.shape());
  }
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h = (h ^ c) * 0x100000001b3ull;
  }
  return h;
}

void check_same_on_all_ranks(const runtime::Mpi& mpi, std::uint64_t hash) {
  const std::vector<std::uint64_t> all = mpi.all_gather(hash, "comparison of the model across ranks");
  std::string differ;
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      differ += fmt::format("{}rank {} (hash {:016x})", differ.empty() ? "" : ", ", r, all[r]);
    }
  }
  if (!differ.empty()) {
    throw RankMismatch(fmt::format("data-parallel start-up: {} runs a different model, options or dataset than "
                                   "rank 0 (hash {:016x}), expected the same on every rank",
                                   differ, all[0]));
  }
}

void broadcast_weights(Sequential& model, const runtime::Mpi& mpi) {
  if (!mpi.active()) return;
  for (const auto& p : model.named_parameters()) {
    auto values = p.parameter->value.read_write();
    mpi.broadcast(values.data().data(), values.data().size(), 0, "broadcast of " + p.name);
  }
  for (const auto& b : model.named_buffers()) {
    auto values = b.buffer->value.read_write();
    mpi.broadcast(values.data().data(), values.data().size(), 0, "broadcast of " + b.name);
  }
}

std::string agreement_text(const FitOptions& fit, const Optimizer& optimizer, const io::Dataset& train,
                           const io::Dataset* test, const DataParallelOptions& o) {
  const char* backend = !o.backend_ ? "auto" : *o.backend_ == runtime::AllreduceBackend::kNccl ? "nccl" : "mpi";
  return fmt::format(
      "dataset={} train={} test={} batch={} epochs={} steps={} optimizer={} seed={} loss={} drop_last={} "
      "allreduce={} allreduce_backend={} bucket_bytes={} tail_buckets={} sync_bn={} rank_sum={}",
      train.name, train.size(), test != nullptr ? test->size() : 0, fit.batch_size_, fit.epochs_,
      fit.steps_per_epoch_, optimizer.describe(), fit.seed_, codelets::to_string(fit.loss_), o.drop_last_,
      o.mode_ == runtime::AllreduceMode::kBlocking ? "blocking" : "overlapped", backend, o.buckets_.bytes_,
      o.buckets_.tail_buckets_, o.sync_batchnorm_, o.rank_sum_ == RankSum::kOrdered ? "ordered" : "allreduce");
}

namespace {

// NCCL when the gradients live on this rank's GPU (auto), MPI otherwise; the CUDA device of this rank.
runtime::CommunicatorOptions communicator_options(const DataParallelOptions& o) {
  const runtime::Engine* engine = runtime::Engine::current();
  const int cuda_workers = engine != nullptr ? engine->cuda_workers() : 0;
  const bool on_gpu = cuda_workers > 0 && runtime::task_device() != runtime::Device::kCpu;
  const runtime::AllreduceBackend backend =
      o.backend_.value_or(on_gpu ? runtime::AllreduceBackend::kNccl : runtime::AllreduceBackend::kMpi);
  if (backend == runtime::AllreduceBackend::kNccl && !on_gpu) {
    throw InvalidArgument("--allreduce-backend nccl: the gradients are not on a GPU (no CUDA worker, or "
                          "--device cpu), expected mpi");
  }
  return runtime::CommunicatorOptions().mode(o.mode_).backend(backend).cuda_device(
      cuda_workers > 0 ? runtime::local_rank() % std::max(1, runtime::cuda_device_count()) : 0);
}

}  // namespace

DataParallelRun::DataParallelRun(const runtime::Mpi& mpi, Sequential& model, DataParallelOptions options)
    : mpi_(mpi), options_(std::move(options)) {
  if (!mpi.active()) return;
  check_same_on_all_ranks(mpi, structure_hash(model, options_.agreement_));
  broadcast_weights(model, mpi);
  communicator_ = std::make_unique<runtime::Communicator>(mpi, communicator_options(options_));
}

DataParallelRun::~DataParallelRun() = default;

DataParallel DataParallelRun::data_parallel() const {
  return {&mpi_, communicator_.get(), options_.drop_last_, options_.sync_batchnorm_, options_.buckets_,
          options_.rank_sum_};
}

void DataParallelRun::wait_idle() {
  if (communicator_) communicator_->wait_idle();
}

}  // namespace dtnn
