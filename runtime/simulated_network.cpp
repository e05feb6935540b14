// SPDX-License-Identifier: Apache-2.0
#include "runtime/simulated_network.hpp"

#include <starpu.h>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "runtime/trace.hpp"

namespace dtnn::runtime {

double NetworkModel::allreduce_seconds(double bytes) const {
  if (ranks < 2) return 0.0;
  const double steps = 2.0 * (ranks - 1);
  return steps * latency_s + steps / ranks * bytes / bandwidth_bytes_per_s;
}

// Only StarPU's threads, mutexes and conditions: in a simulation they are SimGrid's, so that waiting here advances
// the simulated clock instead of blocking the simulation.
struct SimulatedNetwork::State {
  struct Request {
    State* owner = nullptr;
    std::string name;
    std::vector<starpu_data_handle_t> handles;
    std::size_t acquired = 0;
    double seconds = 0.0;
  };

  starpu_pthread_mutex_t mutex;
  starpu_pthread_cond_t cond;
  starpu_pthread_t thread;
  std::deque<std::unique_ptr<Request>> issued;  // in issue order; the front goes next once acquired
  std::int64_t pending = 0;
  std::int64_t done = 0;
  double busy = 0.0;
  int stop = 0;
  int node = STARPU_MAIN_RAM;

  static void acquired(void* arg) {
    auto* r = static_cast<Request*>(arg);
    State* s = r->owner;
    STARPU_PTHREAD_MUTEX_LOCK(&s->mutex);
    ++r->acquired;
    STARPU_PTHREAD_COND_BROADCAST(&s->cond);
    STARPU_PTHREAD_MUTEX_UNLOCK(&s->mutex);
  }

  static void* run(void* arg) {
    auto* s = static_cast<State*>(arg);
    STARPU_PTHREAD_MUTEX_LOCK(&s->mutex);
    while (true) {
      while (!s->stop && (s->issued.empty() || s->issued.front()->acquired < s->issued.front()->handles.size())) {
        STARPU_PTHREAD_COND_WAIT(&s->cond, &s->mutex);
      }
      if (s->issued.empty() || s->issued.front()->acquired < s->issued.front()->handles.size()) break;
      std::unique_ptr<Request> r = std::move(s->issued.front());
      s->issued.pop_front();
      STARPU_PTHREAD_MUTEX_UNLOCK(&s->mutex);
      const double start = starpu_timing_now();
      starpu_sleep(static_cast<float>(r->seconds));
      Tracer::record("allreduce:" + r->name, -1, 0.0, start, starpu_timing_now());
      for (starpu_data_handle_t h : r->handles) starpu_data_release_on_node(h, s->node);
      STARPU_PTHREAD_MUTEX_LOCK(&s->mutex);
      s->busy += r->seconds;
      ++s->done;
      --s->pending;
      STARPU_PTHREAD_COND_BROADCAST(&s->cond);
    }
    STARPU_PTHREAD_MUTEX_UNLOCK(&s->mutex);
    return nullptr;
  }
};

SimulatedNetwork::SimulatedNetwork(NetworkModel model) : model_(model), state_(std::make_unique<State>()) {
  if (model_.ranks < 2) {
    throw InvalidArgument(fmt::format("--ranks {}: a simulated network needs at least 2 ranks", model_.ranks));
  }
  if (!(model_.bandwidth_bytes_per_s > 0.0)) {
    throw InvalidArgument(fmt::format("--link-gbps: bandwidth {} B/s, expected > 0", model_.bandwidth_bytes_per_s));
  }
  if (!(model_.latency_s >= 0.0)) {
    throw InvalidArgument(fmt::format("--link-latency-us: latency {} s, expected >= 0", model_.latency_s));
  }
  state_->node = model_.node;
  STARPU_PTHREAD_MUTEX_INIT(&state_->mutex, nullptr);
  STARPU_PTHREAD_COND_INIT(&state_->cond, nullptr);
  STARPU_PTHREAD_CREATE(&state_->thread, nullptr, &State::run, state_.get());
}

SimulatedNetwork::~SimulatedNetwork() {
  wait_idle();
  STARPU_PTHREAD_MUTEX_LOCK(&state_->mutex);
  state_->stop = 1;
  STARPU_PTHREAD_COND_BROADCAST(&state_->cond);
  STARPU_PTHREAD_MUTEX_UNLOCK(&state_->mutex);
  starpu_pthread_join(state_->thread, nullptr);
  STARPU_PTHREAD_COND_DESTROY(&state_->cond);
  STARPU_PTHREAD_MUTEX_DESTROY(&state_->mutex);
}

void SimulatedNetwork::sum(const std::vector<Tensor*>& tensors, const std::string& name) {
  auto r = std::make_unique<State::Request>();
  r->owner = state_.get();
  r->name = name;
  double bytes = 0.0;
  for (Tensor* t : tensors) {
    for (int i = 0; i < t->tiles(); ++i) r->handles.push_back(t->tile(i));
    bytes += static_cast<double>(t->numel()) * sizeof(float);
  }
  r->seconds = model_.allreduce_seconds(bytes);
  State::Request* raw = r.get();
  STARPU_PTHREAD_MUTEX_LOCK(&state_->mutex);
  ++state_->pending;
  state_->issued.push_back(std::move(r));
  STARPU_PTHREAD_MUTEX_UNLOCK(&state_->mutex);
  // After the request is queued: a callback may come at once, from this thread or a worker.
  const std::vector<starpu_data_handle_t> handles = raw->handles;
  for (starpu_data_handle_t h : handles) {
    starpu_data_acquire_on_node_cb(h, state_->node, STARPU_RW, &State::acquired, raw);
  }
}

void SimulatedNetwork::all_gather(const Tensor&, Tensor&, const std::vector<std::int64_t>&, const std::string& name) {
  throw InvalidArgument(fmt::format("{}: synchronised BatchNorm is not simulated, expected it off", name));
}

void SimulatedNetwork::wait_idle() {
  STARPU_PTHREAD_MUTEX_LOCK(&state_->mutex);
  while (state_->pending > 0) STARPU_PTHREAD_COND_WAIT(&state_->cond, &state_->mutex);
  STARPU_PTHREAD_MUTEX_UNLOCK(&state_->mutex);
}

double SimulatedNetwork::busy_seconds() const {
  STARPU_PTHREAD_MUTEX_LOCK(&state_->mutex);
  const double b = state_->busy;
  STARPU_PTHREAD_MUTEX_UNLOCK(&state_->mutex);
  return b;
}

std::int64_t SimulatedNetwork::sums() const {
  STARPU_PTHREAD_MUTEX_LOCK(&state_->mutex);
  const std::int64_t n = state_->done;
  STARPU_PTHREAD_MUTEX_UNLOCK(&state_->mutex);
  return n;
}

}  // namespace dtnn::runtime
