// SPDX-License-Identifier: Apache-2.0
#include "runtime/simulated_network.hpp"

#include <starpu.h>

#include <cstdio>
#include <cstdlib>

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

namespace {

// A sum on the rank's cores: a CPU task whose simulated length is its cl_arg (seconds), by a cost-function model.
struct CoreSum {
  SimulatedNetwork::State* state;
  double seconds;
  std::string name;
};

double core_sum_us(starpu_task* task, unsigned /*nimpl*/) { return static_cast<CoreSum*>(task->cl_arg)->seconds * 1e6; }

void core_sum_body(void** /*buffers*/, void* /*cl_arg*/) {
  // Only simulations create these tasks, and there codelets do not run.
  std::fputs("dtnn: a simulated gradient sum ran outside a simulation\n", stderr);
  std::abort();
}

starpu_perfmodel& core_sum_model() {
  static starpu_perfmodel m = [] {
    starpu_perfmodel p{};
    p.type = STARPU_COMMON;
    p.cost_function = &core_sum_us;
    p.symbol = "dtnn_simulated_sum";
    return p;
  }();
  return m;
}

starpu_codelet& core_sum_codelet() {
  static starpu_codelet cl = [] {
    starpu_codelet c{};
    c.where = STARPU_CPU;
    c.cpu_funcs[0] = &core_sum_body;
    c.nbuffers = STARPU_VARIABLE_NBUFFERS;
    c.model = &core_sum_model();
    c.name = "simulated_sum";
    return c;
  }();
  return cl;
}

}  // namespace

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
  std::vector<starpu_data_handle_t> handles;
  double bytes = 0.0;
  for (Tensor* t : tensors) {
    for (int i = 0; i < t->tiles(); ++i) handles.push_back(t->tile(i));
    bytes += static_cast<double>(t->bytes());
  }
  const double seconds = model_.allreduce_seconds(bytes);
  if (model_.on_cores) {
    sum_on_cores(handles, seconds, name);
    return;
  }
  auto r = std::make_unique<State::Request>();
  r->owner = state_.get();
  r->name = name;
  r->handles = handles;
  r->seconds = seconds;
  State::Request* raw = r.get();
  STARPU_PTHREAD_MUTEX_LOCK(&state_->mutex);
  ++state_->pending;
  state_->issued.push_back(std::move(r));
  STARPU_PTHREAD_MUTEX_UNLOCK(&state_->mutex);
  // After the request is queued: a callback may come at once, from this thread or a worker (the local copy of the
  // handles, as the request may be served and freed before this loop ends).
  for (starpu_data_handle_t h : handles) {
    starpu_data_acquire_on_node_cb(h, state_->node, STARPU_RW, &State::acquired, raw);
  }
}

void SimulatedNetwork::sum_on_cores(const std::vector<starpu_data_handle_t>& handles, double seconds,
                                    const std::string& name) {
  STARPU_PTHREAD_MUTEX_LOCK(&state_->mutex);
  ++state_->pending;
  STARPU_PTHREAD_MUTEX_UNLOCK(&state_->mutex);
  auto* arg = new CoreSum{state_.get(), seconds, "allreduce:" + name};
  starpu_task* task = starpu_task_create();
  task->cl = &core_sum_codelet();
  // Every gradient of the bucket, read and written: the updates after the sum wait for it. StarPU frees the arrays
  // with the task.
  const std::size_t n = handles.size();
  task->nbuffers = static_cast<int>(n);
  task->dyn_handles = static_cast<starpu_data_handle_t*>(std::malloc(n * sizeof(starpu_data_handle_t)));
  task->dyn_modes = static_cast<starpu_data_access_mode*>(std::malloc(n * sizeof(starpu_data_access_mode)));
  for (std::size_t i = 0; i < n; ++i) {
    task->dyn_handles[i] = handles[i];
    task->dyn_modes[i] = STARPU_RW;
  }
  task->cl_arg = arg;
  task->priority = STARPU_MAX_PRIO;
  task->callback_func = [](void* p) {
    std::unique_ptr<CoreSum> s(static_cast<CoreSum*>(p));
    const double end = starpu_timing_now();
    Tracer::record(s->name, -1, 0.0, end - s->seconds * 1e6, end);
    STARPU_PTHREAD_MUTEX_LOCK(&s->state->mutex);
    s->state->busy += s->seconds;
    ++s->state->done;
    --s->state->pending;
    STARPU_PTHREAD_COND_BROADCAST(&s->state->cond);
    STARPU_PTHREAD_MUTEX_UNLOCK(&s->state->mutex);
  };
  task->callback_arg = arg;
  const int rc = starpu_task_submit(task);
  if (rc != 0) {
    task->destroy = 0;
    starpu_task_destroy(task);
    delete arg;
    STARPU_PTHREAD_MUTEX_LOCK(&state_->mutex);
    --state_->pending;
    STARPU_PTHREAD_MUTEX_UNLOCK(&state_->mutex);
    throw RuntimeError(fmt::format("{}: starpu_task_submit of its simulated sum failed ({})", name, rc));
  }
}

void SimulatedNetwork::all_gather(const Tensor&, Tensor&, const std::vector<std::int64_t>&, const std::string& name) {
  throw InvalidArgument(fmt::format("{}: synchronised BatchNorm is not simulated, expected it off", name));
}

void SimulatedNetwork::begin_chain(const std::vector<Tensor*>&, const std::string& name) {
  throw InvalidArgument(fmt::format("{}: ordered sums over the ranks are not simulated, expected allreduce", name));
}

void SimulatedNetwork::end_chain(const std::vector<Tensor*>&, const std::string& name) {
  throw InvalidArgument(fmt::format("{}: ordered sums over the ranks are not simulated, expected allreduce", name));
}

void SimulatedNetwork::relay_chain(const std::vector<Tensor*>&, const std::string& name) {
  throw InvalidArgument(fmt::format("{}: ordered sums over the ranks are not simulated, expected allreduce", name));
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
