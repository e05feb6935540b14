// SPDX-License-Identifier: Apache-2.0
#include "runtime/allreduce.hpp"

#include <starpu.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "runtime/trace.hpp"
#ifdef DTNN_HAVE_CUDA
#include "runtime/nccl.hpp"
#else
namespace dtnn::runtime {
class NcclComm {};  // never created without CUDA
}  // namespace dtnn::runtime
#endif

namespace dtnn::runtime {
namespace {

// Longest sleep between two tests of a reduction in flight. Open MPI moves a large allreduce forward one segment
// per test, so long sleeps stretch it (measured on resnet18_cifar10, 2 ranks: 500 us made the blocking mode's
// 45 MB of gradients take about 1.7 s a step).
constexpr int kMaxPauseUs = 50;

}  // namespace

struct GradientReducer::Request {
  GradientReducer* owner = nullptr;
  std::int64_t step = 0;
  int bucket = 0;
  std::string name;
  std::vector<Tensor*> grads;
  std::size_t count = 0;
  std::atomic<int> acquired{0};
  MPI_Request mpi = MPI_REQUEST_NULL;
  float* buffer = nullptr;  // reduced in place: the gradient itself for a one-gradient bucket, else staging
  std::chrono::steady_clock::time_point started;
  double trace_start_us = 0.0;
  // An all-gather instead of a sum: grads holds the local tiles, target the global tensor.
  Tensor* target = nullptr;
  std::vector<int> counts;
  std::vector<int> displacements;
#ifdef DTNN_HAVE_CUDA
  std::unique_ptr<NcclComm::Flight, void (*)(NcclComm::Flight*)> flight{nullptr, nullptr};
#endif
  [[nodiscard]] bool on_gpu() const {
#ifdef DTNN_HAVE_CUDA
    return flight != nullptr;
#else
    return false;
#endif
  }
};

void GradientReducer::acquired(void* request) {
  auto* r = static_cast<Request*>(request);
  r->acquired.fetch_add(1, std::memory_order_acq_rel);
  r->owner->cv_.notify_all();
}

GradientReducer::GradientReducer(const Mpi& mpi, ReducerOptions options) : mpi_(mpi), options_(options) {
  if (options_.backend_ == AllreduceBackend::kNccl) {
#ifdef DTNN_HAVE_CUDA
    for (unsigned w = 0; w < starpu_worker_get_count(); ++w) {
      if (starpu_worker_get_type(static_cast<int>(w)) == STARPU_CUDA_WORKER &&
          starpu_worker_get_devid(static_cast<int>(w)) == options_.cuda_device_) {
        gpu_node_ = static_cast<int>(starpu_worker_get_memory_node(w));
      }
    }
    if (gpu_node_ < 0) {
      throw InvalidArgument(fmt::format("allreduce nccl: no CUDA worker on device {} in this rank, expected one "
                                        "GPU per rank (--device cuda)",
                                        options_.cuda_device_));
    }
    nccl_ = std::make_unique<NcclComm>(mpi, options_.cuda_device_);
#else
    throw InvalidArgument("allreduce nccl: this build has no CUDA, expected mpi");
#endif
  }
  thread_ = std::thread([this] { run(); });
}

GradientReducer::~GradientReducer() {
  end_step();
  wait_idle();
  {
    std::lock_guard lock(mutex_);
    stop_ = 1;
  }
  cv_.notify_all();
  thread_.join();
}

int GradientReducer::add(Tensor& grad, const std::string& name) {
  if (!open_) {
    open_ = std::make_unique<Request>();
    open_->owner = this;
    open_->step = step_;
    open_->bucket = next_bucket_;
  }
  open_->grads.push_back(&grad);
  open_->count += static_cast<std::size_t>(grad.numel());
  open_->name += open_->name.empty() ? name : "," + name;
  if (open_->count * sizeof(float) >= options_.bucket_bytes_) {
    return flush();
  }
  return 0;
}

int GradientReducer::flush() {
  if (!open_) return 0;
  Request* r = open_.get();
  {
    std::lock_guard lock(mutex_);
    ++pending_;
    queue_.push_back(std::move(open_));
  }
  // After the request is queued: a callback may fire at once, from a StarPU thread. With NCCL the gradients
  // are acquired where NCCL reads them, on the GPU (StarPU moves them there if the tile sums ran on a CPU).
  for (Tensor* g : r->grads) {
    if (gpu_node_ >= 0) {
      starpu_data_acquire_on_node_cb(g->handle(), gpu_node_, STARPU_RW, acquired, r);
    } else {
      starpu_data_acquire_cb(g->handle(), STARPU_RW, acquired, r);
    }
  }
  ++next_bucket_;
  cv_.notify_all();
  return 1;
}

int GradientReducer::layer_boundary(std::size_t elements_to_come) {
  if (options_.tail_buckets_ == 0 || !open_ || open_->count < elements_to_come) return 0;
  return flush();
}

void GradientReducer::end_step() {
  flush();
  {
    std::lock_guard lock(mutex_);
    ++step_;
    steps_closed_ = step_;
  }
  next_bucket_ = 0;
  cv_.notify_all();
}

void GradientReducer::wait_idle() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [this] { return pending_ == 0; });
}

void GradientReducer::all_gather(const Tensor& local, Tensor& global, const std::vector<std::int64_t>& rows_per_rank,
                                 const std::string& name) {
  auto r = std::make_unique<Request>();
  r->owner = this;
  r->step = -1;  // any mode may start it at once
  r->name = name;
  r->target = &global;
  int at = 0;
  for (std::int64_t rows : rows_per_rank) {
    r->counts.push_back(static_cast<int>(rows * local.row_elements()));
    r->displacements.push_back(at);
    at += r->counts.back();
  }
  r->count = static_cast<std::size_t>(local.numel());
  // Every acquisition is listed before the first is registered: a callback may fire at once, and the request
  // is ready when the count of callbacks reaches the size of this list.
  for (int t = 0; t < local.tiles(); ++t) r->grads.push_back(const_cast<Tensor*>(&local));
  r->grads.push_back(&global);
  Request* raw = r.get();
  {
    std::lock_guard lock(mutex_);
    ++pending_;
    queue_.push_back(std::move(r));
  }
  for (int t = 0; t < local.tiles(); ++t) {
    starpu_data_acquire_cb(local.tile(t), STARPU_R, acquired, raw);
  }
  // W: the previous content of the global tensor is not needed.
  starpu_data_acquire_cb(global.handle(), STARPU_W, acquired, raw);
  cv_.notify_all();
}

void GradientReducer::start(Request& r) {
  if (r.target != nullptr) {
    // Tiles of one tensor are rows of one buffer: the first tile's pointer covers them all.
    const Tensor& local = *r.grads.front();
    auto* mine = static_cast<float*>(starpu_data_get_local_ptr(local.tile(0)));
    r.buffer = static_cast<float*>(starpu_data_get_local_ptr(r.target->handle()));
    r.started = std::chrono::steady_clock::now();
    r.trace_start_us = starpu_timing_now();
    MPI_Iallgatherv(mine, static_cast<int>(r.count), MPI_FLOAT, r.buffer, r.counts.data(), r.displacements.data(),
                    MPI_FLOAT, mpi_.reduction_comm(), &r.mpi);
    return;
  }
#ifdef DTNN_HAVE_CUDA
  if (nccl_) {
    // In place on each gradient's GPU copy, as one NCCL group: no packing.
    std::vector<std::pair<float*, std::size_t>> buffers;
    for (Tensor* g : r.grads) {
      buffers.emplace_back(static_cast<float*>(starpu_data_handle_to_pointer(g->handle(), gpu_node_)),
                           static_cast<std::size_t>(g->numel()));
    }
    r.started = std::chrono::steady_clock::now();
    r.trace_start_us = starpu_timing_now();
    r.flight = nccl_->start_sum(buffers, "NCCL gradient allreduce of " + r.name);
    return;
  }
#endif
  if (r.grads.size() == 1) {
    r.buffer = static_cast<float*>(starpu_data_get_local_ptr(r.grads[0]->handle()));
  } else {
    if (staging_.size() <= static_cast<std::size_t>(r.bucket)) staging_.resize(static_cast<std::size_t>(r.bucket) + 1);
    auto& stage = staging_[static_cast<std::size_t>(r.bucket)];
    stage.resize(r.count);
    std::size_t at = 0;
    for (Tensor* g : r.grads) {
      const auto* p = static_cast<const float*>(starpu_data_get_local_ptr(g->handle()));
      std::memcpy(stage.data() + at, p, static_cast<std::size_t>(g->numel()) * sizeof(float));
      at += static_cast<std::size_t>(g->numel());
    }
    r.buffer = stage.data();
  }
  r.started = std::chrono::steady_clock::now();
  r.trace_start_us = starpu_timing_now();
  MPI_Iallreduce(MPI_IN_PLACE, r.buffer, static_cast<int>(r.count), MPI_FLOAT, MPI_SUM, mpi_.reduction_comm(),
                 &r.mpi);
}

void GradientReducer::finish(Request& r) {
  if (r.target != nullptr) {
    Tracer::record("allgather:" + r.name, -1, 0.0, r.trace_start_us, starpu_timing_now());
    const Tensor& local = *r.grads.front();
    for (int t = 0; t < local.tiles(); ++t) starpu_data_release(local.tile(t));
    starpu_data_release(r.target->handle());
    return;
  }
  if (r.grads.size() > 1 && !r.on_gpu()) {
    std::size_t at = 0;
    for (Tensor* g : r.grads) {
      auto* p = static_cast<float*>(starpu_data_get_local_ptr(g->handle()));
      std::memcpy(p, r.buffer + at, static_cast<std::size_t>(g->numel()) * sizeof(float));
      at += static_cast<std::size_t>(g->numel());
    }
  }
  Tracer::record("allreduce:" + r.name, -1, static_cast<double>(r.count) * mpi_.size(), r.trace_start_us,
                 starpu_timing_now());
  for (Tensor* g : r.grads) {
    starpu_data_release(g->handle());
  }
}

void GradientReducer::time_out(const Request& r) {
#ifdef DTNN_HAVE_CUDA
  if (nccl_) nccl_->abort();
#endif
  mpi_.abort(fmt::format("gradient allreduce of {} did not complete within {} s (--mpi-timeout): {} died or hangs",
                         r.name, mpi_.timeout_s(), mpi_.peers()));
}

int GradientReducer::test(Request& r) {
  int done = 0;
#ifdef DTNN_HAVE_CUDA
  if (r.on_gpu()) {
    try {
      done = nccl_->test(*r.flight, "NCCL gradient allreduce of " + r.name);
    } catch (const std::exception& e) {
      nccl_->abort();
      mpi_.abort(e.what());
    }
  } else
#endif
  {
    MPI_Test(&r.mpi, &done, MPI_STATUS_IGNORE);
  }
  if (!done && std::chrono::steady_clock::now() - r.started > std::chrono::seconds(mpi_.timeout_s())) {
    time_out(r);
  }
  return done;
}

void GradientReducer::wait_for(Request& r) {
  if (!r.on_gpu()) {
    mpi_.wait(r.mpi, fmt::format("gradient allreduce of {}", r.name), kMaxPauseUs);
    return;
  }
  auto pause = std::chrono::microseconds(10);
  while (!test(r)) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(kMaxPauseUs));
  }
}

void GradientReducer::run() {
#ifdef DTNN_HAVE_CUDA
  if (nccl_) nccl_->bind_thread();
#endif
  std::unique_lock lock(mutex_);
  auto pause = std::chrono::microseconds(10);
  while (true) {
    // Start, in submission order, every request whose gradients are all final.
    while (!queue_.empty()) {
      Request& front = *queue_.front();
      const bool ready = front.acquired.load(std::memory_order_acquire) == static_cast<int>(front.grads.size());
      const bool allowed =
          options_.mode_ == AllreduceMode::kOverlapped || front.step < 0 || front.step < steps_closed_;
      if (!ready || !allowed) break;
      if (options_.mode_ == AllreduceMode::kBlocking && front.step >= 0) {
        // The baseline waits for the step's whole backward pass: every bucket of the step must be ready.
        bool all = true;
        for (const auto& r : queue_) {
          if (r->step != front.step) break;
          all = all && r->acquired.load(std::memory_order_acquire) == static_cast<int>(r->grads.size());
        }
        if (!all) break;
      }
      std::unique_ptr<Request> r = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      start(*r);
      if (options_.mode_ == AllreduceMode::kBlocking) {
        wait_for(*r);
        finish(*r);
        lock.lock();
        --pending_;
        cv_.notify_all();
      } else {
        lock.lock();
        flying_.push_back(std::move(r));
      }
    }
    if (!flying_.empty()) {
      lock.unlock();
      for (auto& r : flying_) {
        if (test(*r)) {
          finish(*r);
          r.reset();
        }
      }
      const auto before = flying_.size();
      flying_.erase(std::remove(flying_.begin(), flying_.end(), nullptr), flying_.end());
      lock.lock();
      if (flying_.size() < before) {
        pending_ -= static_cast<std::int64_t>(before - flying_.size());
        cv_.notify_all();
        pause = std::chrono::microseconds(10);
      }
      // Open MPI progresses non-blocking collectives only inside MPI calls: poll often, back off when idle.
      cv_.wait_for(lock, pause);
      pause = std::min(pause * 2, std::chrono::microseconds(kMaxPauseUs));
      continue;
    }
    if (stop_ && queue_.empty()) break;
    if (!queue_.empty()) {
      // Waiting for StarPU's callbacks, which do not notify: poll.
      cv_.wait_for(lock, std::chrono::microseconds(100));
    } else {
      cv_.wait(lock);
    }
  }
}

}  // namespace dtnn::runtime
