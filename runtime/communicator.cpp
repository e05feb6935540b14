// SPDX-License-Identifier: Apache-2.0
#include "runtime/communicator.hpp"

#include <pthread.h>
#include <starpu.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "runtime/trace.hpp"

namespace dtnn::runtime {
namespace {

// Longest sleep between two tests of a collective in flight. Open MPI moves a large allreduce forward one segment
// per test, so long sleeps stretch it (measured on resnet18_cifar10, 2 ranks: 500 us made the blocking mode's
// 45 MB of gradients take about 1.7 s a step).
constexpr auto kMaxPause = std::chrono::microseconds(50);

std::unique_ptr<Transport> make_transport(const Mpi& mpi, const CommunicatorOptions& o) {
  if (o.backend_ == AllreduceBackend::kMpi) return std::make_unique<MpiTransport>(mpi);
  // The NCCL transport exists in CUDA builds only (runtime/CMakeLists.txt adds its file).
#ifdef DTNN_HAVE_CUDA
  return make_nccl_transport(mpi, o.cuda_device_);
#else
  throw InvalidArgument("allreduce nccl: this build has no CUDA, expected mpi");
#endif
}

}  // namespace

struct Communicator::Request {
  struct Access {
    starpu_data_handle_t handle;
    int node;
    starpu_data_access_mode mode;
  };

  enum class Kind { kSum, kAllGather, kSend, kReceive, kBroadcast };

  Communicator* owner = nullptr;
  Kind kind = Kind::kSum;
  // The step of a sum; -1 for the others, which any mode starts at once (an all-gather holds the forward pass; a
  // chain's messages, the next rank's chain).
  std::int64_t step = -1;
  std::string name;
  std::string what;        // in messages: "gradient allreduce of <name>"
  // Acquired in this order before the start, released on the same nodes at the end (StarPU requires the node
  // of starpu_data_release_on_node to be the node of the acquisition).
  std::vector<Access> accesses;
  std::atomic<int> acquired{0};
  std::vector<Tensor*> tensors;  // a sum's tensors; the one tensor of a chain's message
  int peer = -1;                 // kSend, kReceive: the other rank; kBroadcast: the root
  int tag = 0;                   // kSend, kReceive
  // An all-gather: the local tiles (rows of one buffer) into the global tensor.
  const Tensor* local = nullptr;
  Tensor* global = nullptr;
  std::vector<int> counts;
  std::vector<int> displacements;
  std::size_t count = 0;         // values this rank contributes
  Transport* transport = nullptr;
  std::unique_ptr<Transport::Flight> flight;
  std::chrono::steady_clock::time_point started;
  double trace_start_us = 0.0;

  [[nodiscard]] bool ready() const {
    return acquired.load(std::memory_order_acquire) == static_cast<int>(accesses.size());
  }
  void release() const {
    for (const Access& a : accesses) starpu_data_release_on_node(a.handle, a.node);
  }
};

void Communicator::acquired(void* request) {
  auto* r = static_cast<Request*>(request);
  r->acquired.fetch_add(1, std::memory_order_acq_rel);
  // Through the mutex, so that the communication thread is either before its test of the count (and sees it) or
  // asleep in the wait (and is woken): it need not poll. No deadlock: the mutex is never held across a StarPU call,
  // so its holder never waits for the StarPU thread (or the starpu_data_acquire_on_node_cb call) running this.
  { const std::lock_guard lock(r->owner->mutex_); }
  r->owner->cv_.notify_all();
}

Communicator::Communicator(const Mpi& mpi, CommunicatorOptions options)
    : Communicator(mpi, make_transport(mpi, options), options.mode_) {}

Communicator::Communicator(const Mpi& mpi, std::unique_ptr<Transport> sums, AllreduceMode mode)
    : mpi_(mpi), mode_(mode), host_(mpi), sums_(std::move(sums)) {
  thread_ = std::thread([this] { run(); });
}

Communicator::~Communicator() {
  close_step();
  wait_drained();
  {
    std::lock_guard lock(mutex_);
    stop_ = 1;
  }
  cv_.notify_all();
  thread_.join();
}

void Communicator::check() const {
  std::lock_guard lock(mutex_);
  if (!failure_.empty()) {
    throw RuntimeError(fmt::format("communication thread of rank {}: {}", mpi_.rank(), failure_));
  }
}

void Communicator::fail(const std::string& what) noexcept {
  std::lock_guard lock(mutex_);
  if (failure_.empty()) failure_ = what.empty() ? "unknown error" : what;
}

void Communicator::enqueue(std::unique_ptr<Request> r) {
  Request* raw = r.get();
  {
    std::lock_guard lock(mutex_);
    ++pending_;
    queue_.push_back(std::move(r));
  }
  // After the request is queued and its list of accesses complete: a callback may fire at once, from a StarPU
  // thread, and the request is ready when the count of callbacks reaches the size of that list.
  for (const Request::Access& a : raw->accesses) {
    starpu_data_acquire_on_node_cb(a.handle, a.node, a.mode, acquired, raw);
  }
  cv_.notify_all();
}

void Communicator::sum(const std::vector<Tensor*>& tensors, const std::string& name) {
  check();
  auto r = std::make_unique<Request>();
  r->owner = this;
  r->kind = Request::Kind::kSum;
  r->name = name;
  r->what = "gradient allreduce of " + name;
  r->transport = sums_.get();
  r->tensors = tensors;
  {
    std::lock_guard lock(mutex_);
    r->step = step_;
  }
  // With NCCL the tensors are acquired where NCCL reads them, on the GPU (StarPU moves them there if the tasks
  // that wrote them ran on a CPU).
  const int node = sums_->memory_node();
  for (Tensor* t : tensors) {
    r->accesses.push_back({t->handle(), node, STARPU_RW});
    r->count += static_cast<std::size_t>(t->numel());
  }
  enqueue(std::move(r));
}

void Communicator::end_step() {
  check();
  close_step();
}

void Communicator::close_step() noexcept {
  {
    std::lock_guard lock(mutex_);
    ++step_;
    steps_closed_ = step_;
  }
  cv_.notify_all();
}

void Communicator::all_gather(const Tensor& local, Tensor& global, const std::vector<std::int64_t>& rows_per_rank,
                              const std::string& name) {
  check();
  auto r = std::make_unique<Request>();
  r->owner = this;
  r->name = name;
  r->kind = Request::Kind::kAllGather;
  r->what = "all-gather of " + name;
  r->transport = &host_;
  r->local = &local;
  r->global = &global;
  int at = 0;
  for (std::int64_t rows : rows_per_rank) {
    r->counts.push_back(static_cast<int>(rows * local.row_elements()));
    r->displacements.push_back(at);
    at += r->counts.back();
  }
  r->count = static_cast<std::size_t>(local.numel());
  for (int t = 0; t < local.tiles(); ++t) r->accesses.push_back({local.tile(t), STARPU_MAIN_RAM, STARPU_R});
  // W: the previous content of the global tensor is not needed.
  r->accesses.push_back({global.handle(), STARPU_MAIN_RAM, STARPU_W});
  enqueue(std::move(r));
}

int Communicator::chain_tag(const Tensor* t, const std::string& name) {
  const auto it = chain_tags_.try_emplace(t, static_cast<int>(chain_tags_.size())).first;
  // MPI guarantees tags up to 32767.
  if (it->second > 32767) {
    throw InvalidArgument(fmt::format("ordered sum of {}: more than 32768 chained tensors, expected at most 32768",
                                      name));
  }
  return it->second;
}

int Communicator::known_chain_tag(const Tensor* t, const std::string& name, const char* call) const {
  const auto found = chain_tags_.find(t);
  if (found == chain_tags_.end()) {
    throw InvalidArgument(fmt::format("ordered sum of {}: {} of a tensor that begin_chain never had, expected "
                                      "begin_chain first", name, call));
  }
  return found->second;
}

namespace {

// One message of a chain: t to or from rank `peer` (kSend, kReceive) or from root `peer` to all (kBroadcast),
// acquired in `mode` on the host.
std::unique_ptr<Communicator::Request> chain_message(Communicator* owner, Transport* host,
                                                     Communicator::Request::Kind kind, Tensor* t, int peer, int tag,
                                                     const std::string& name, std::string what,
                                                     starpu_data_access_mode mode) {
  auto r = std::make_unique<Communicator::Request>();
  r->owner = owner;
  r->transport = host;
  r->kind = kind;
  r->name = name;
  r->what = fmt::format("ordered sum of {}: {}", name, what);
  r->tensors = {t};
  r->peer = peer;
  r->tag = tag;
  r->count = static_cast<std::size_t>(t->numel());
  r->accesses.push_back({t->handle(), STARPU_MAIN_RAM, mode});
  return r;
}

}  // namespace

void Communicator::begin_chain(const std::vector<Tensor*>& tensors, const std::string& name) {
  check();
  for (Tensor* t : tensors) {
    const int tag = chain_tag(t, name);
    if (mpi_.rank() == 0) continue;  // the first rank's chain starts from nothing
    // W: the tensor's old values are overwritten; the chain's tasks submitted afterwards continue the partial sum.
    enqueue(chain_message(this, &host_, Request::Kind::kReceive, t, mpi_.rank() - 1, tag, name,
                          fmt::format("the partial sum from rank {}", mpi_.rank() - 1), STARPU_W));
  }
}

void Communicator::relay_chain(const std::vector<Tensor*>& tensors, const std::string& name) {
  check();
  const int n = mpi_.size();
  const int next = (mpi_.rank() + 1) % n;
  const int previous = (mpi_.rank() + n - 1) % n;
  for (Tensor* t : tensors) {
    const int tag = known_chain_tag(t, name, "relay_chain");
    enqueue(chain_message(this, &host_, Request::Kind::kSend, t, next, tag, name,
                          fmt::format("the partial sum to rank {} (relay)", next), STARPU_R));
    enqueue(chain_message(this, &host_, Request::Kind::kReceive, t, previous, tag, name,
                          fmt::format("the partial sum from rank {} (relay)", previous), STARPU_W));
  }
}

void Communicator::end_chain(const std::vector<Tensor*>& tensors, const std::string& name) {
  check();
  const int last = mpi_.size() - 1;
  for (Tensor* t : tensors) {
    const int tag = known_chain_tag(t, name, "end_chain");
    if (mpi_.rank() < last) {
      enqueue(chain_message(this, &host_, Request::Kind::kSend, t, mpi_.rank() + 1, tag, name,
                            fmt::format("the partial sum to rank {}", mpi_.rank() + 1), STARPU_R));
    }
    // The root only reads; on the others the whole sum replaces the partial one (W: once the send has read it).
    enqueue(chain_message(this, &host_, Request::Kind::kBroadcast, t, last, tag, name,
                          fmt::format("the whole sum from rank {}", last), mpi_.rank() == last ? STARPU_R : STARPU_W));
  }
}

void Communicator::wait_drained() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [this] { return pending_ == 0; });
}

void Communicator::wait_idle() {
  wait_drained();
  check();
}

int Communicator::launch(Request& r) {
  try {
    r.started = std::chrono::steady_clock::now();
    r.trace_start_us = starpu_timing_now();
    if (r.kind == Request::Kind::kAllGather) {
      // Tiles of one tensor are rows of one buffer: the first tile's pointer covers them all.
      const auto* mine = static_cast<const float*>(starpu_data_handle_to_pointer(r.local->tile(0), STARPU_MAIN_RAM));
      auto* all = static_cast<float*>(starpu_data_handle_to_pointer(r.global->handle(), STARPU_MAIN_RAM));
      r.flight = host_.start_all_gather(mine, static_cast<int>(r.count), all, r.counts, r.displacements);
    } else if (r.kind != Request::Kind::kSum) {
      auto* data = static_cast<float*>(starpu_data_handle_to_pointer(r.accesses[0].handle, STARPU_MAIN_RAM));
      r.flight = r.kind == Request::Kind::kSend      ? host_.start_send(data, r.count, r.peer, r.tag)
                 : r.kind == Request::Kind::kReceive ? host_.start_receive(data, r.count, r.peer, r.tag)
                                                     : host_.start_broadcast(data, r.count, r.peer);
    } else {
      std::vector<SumBuffer> buffers;
      for (std::size_t i = 0; i < r.tensors.size(); ++i) {
        const Request::Access& a = r.accesses[i];
        buffers.push_back({static_cast<float*>(starpu_data_handle_to_pointer(a.handle, a.node)),
                           static_cast<std::size_t>(r.tensors[i]->numel())});
      }
      r.flight = r.transport->start_sum(buffers, r.what);
    }
    return 1;
  } catch (const std::exception& e) {
    fail(fmt::format("start of the {}: {}", r.what, e.what()));
  } catch (...) {
    fail(fmt::format("start of the {}: unknown exception", r.what));
  }
  r.release();
  return 0;
}

void Communicator::finish(Request& r) {
  if (r.kind == Request::Kind::kAllGather) {
    Tracer::record("allgather:" + r.name, -1, 0.0, r.trace_start_us, starpu_timing_now());
  } else if (r.kind != Request::Kind::kSum) {
    const char* what = r.kind == Request::Kind::kSend ? "send:" : r.kind == Request::Kind::kReceive ? "receive:"
                                                                                                    : "broadcast:";
    Tracer::record(what + r.name, -1, 0.0, r.trace_start_us, starpu_timing_now());
  } else {
    Tracer::record("allreduce:" + r.name, -1, static_cast<double>(r.count) * mpi_.size(), r.trace_start_us,
                   starpu_timing_now());
  }
  r.release();
}

void Communicator::abort_job(const std::string& message) {
  sums_->abort();
  mpi_.abort(message);
}

int Communicator::test(Request& r) {
  int done = 0;
  try {
    done = r.transport->test(*r.flight, r.what);
  } catch (const std::exception& e) {
    // Started on every rank: the peers wait in it, so the job ends here rather than this rank alone.
    abort_job(e.what());
  }
  if (!done && std::chrono::steady_clock::now() - r.started > std::chrono::seconds(mpi_.timeout_s())) {
    abort_job(fmt::format("{} did not complete within {} s (--mpi-timeout): {} died, hangs or is unreachable",
                          r.what, mpi_.timeout_s(), mpi_.peers()));
  }
  return done;
}

void Communicator::wait_for(Request& r) {
  auto pause = std::chrono::microseconds(10);
  while (!test(r)) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kMaxPause);
  }
}

std::unique_ptr<Communicator::Request> Communicator::next_request() {
  if (queue_.empty() || !queue_.front()->ready()) return nullptr;
  const Request& front = *queue_.front();
  if (failure_.empty() && mode_ == AllreduceMode::kBlocking && front.step >= 0) {
    // The baseline waits for the step's whole backward pass: the step ended and every sum of it is ready.
    if (front.step >= steps_closed_) return nullptr;
    for (const auto& r : queue_) {
      if (r->step != front.step) break;
      if (!r->ready()) return nullptr;
    }
  }
  std::unique_ptr<Request> r = std::move(queue_.front());
  queue_.pop_front();
  return r;
}

int Communicator::dispatch(Request& r, int failed) {
  if (failed) {
    // Nothing is communicated any more: the tensors go back to the task graph as they are.
    r.release();
    return 0;
  }
  if (!launch(r)) return 0;
  if (mode_ == AllreduceMode::kOverlapped) return 1;
  wait_for(r);
  finish(r);
  return 0;
}

std::size_t Communicator::complete_flights() {
  const std::size_t before = flying_.size();
  for (auto& r : flying_) {
    if (test(*r)) {
      finish(*r);
      r.reset();
    }
  }
  flying_.erase(std::remove(flying_.begin(), flying_.end(), nullptr), flying_.end());
  return before - flying_.size();
}

void Communicator::run() noexcept {
  // Named for top -H, perf and gdb: it shares a rank's core with the workers.
  pthread_setname_np(pthread_self(), "dtnn-comm");
  try {
    sums_->attach_thread();
  } catch (const std::exception& e) {
    fail(fmt::format("start: {}", e.what()));
  } catch (...) {
    fail("start: unknown exception");
  }
  std::unique_lock lock(mutex_);
  auto pause = std::chrono::microseconds(10);
  while (true) {
    // Start, in submission order, every request whose tensors are all acquired.
    while (std::unique_ptr<Request> r = next_request()) {
      const int failed = failure_.empty() ? 0 : 1;
      lock.unlock();
      const int in_flight = dispatch(*r, failed);
      lock.lock();
      if (in_flight) {
        flying_.push_back(std::move(r));
      } else {
        --pending_;
        cv_.notify_all();
      }
    }
    if (!flying_.empty()) {
      lock.unlock();
      const std::size_t completed = complete_flights();
      lock.lock();
      if (completed > 0) {
        pending_ -= static_cast<std::int64_t>(completed);
        cv_.notify_all();
        pause = std::chrono::microseconds(10);
      }
      // Open MPI progresses non-blocking collectives only inside MPI calls: poll often, back off when idle.
      cv_.wait_for(lock, pause);
      pause = std::min(pause * 2, kMaxPause);
      continue;
    }
    if (stop_ && queue_.empty()) break;
    // Nothing in flight: asleep until a request is queued, acquired (the callbacks notify) or the step closes.
    cv_.wait(lock);
  }
}

}  // namespace dtnn::runtime
