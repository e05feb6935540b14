// SPDX-License-Identifier: Apache-2.0
#include "models/step_runner.hpp"

#include <starpu.h>

#include <algorithm>
#include <deque>
#include <numeric>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "runtime/failure.hpp"
#include "runtime/machine.hpp"
#include "runtime/sched.hpp"

namespace dtnn {
namespace {

// Waits for the step's loss tasks (the last readers of its statistics) without reading what they wrote: in a
// simulation the buffers hold nothing.
void wait_for_step(StepSlot& s) {
  for (int t = 0; t < s.stats.tiles(); ++t) {
    const int rc = starpu_data_acquire(s.stats.tile(t), STARPU_R);
    if (rc != 0) throw RuntimeError(fmt::format("step runner: starpu_data_acquire failed ({})", rc));
    starpu_data_release(s.stats.tile(t));
  }
  s.pending = 0;
}

double seconds_us(const timespec& t) { return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3; }

}  // namespace

double StepRunResult::median_step_us() const {
  if (step_us.empty()) return 0.0;
  std::vector<double> v = step_us;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

StepRunResult run_steps(Sequential& model, Optimizer& optimizer, const io::Dataset& data,
                        const StepRunOptions& o) {
  if (o.warmup_ < 0 || o.steps_ <= o.warmup_) {
    throw InvalidArgument(fmt::format("--steps {} with {} warm-up steps, expected more steps than warm-up steps",
                                      o.steps_, o.warmup_));
  }
  if (o.batch_size_ < 1 || o.batch_size_ > data.size()) {
    throw InvalidArgument(fmt::format("--batch-size {}, expected 1 to the {} samples of {}", o.batch_size_,
                                      data.size(), data.name));
  }
  check_model_fits(model, data, "step runner");
  TrainStep steps(model, optimizer, o.step_);
  std::vector<std::int64_t> order(static_cast<std::size_t>(data.size()));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  const std::int64_t per_pass = data.size() / o.batch_size_;
  // Simulated ranks: the loss is scaled by the global batch, as on every rank of a real run.
  const DataParallel& dp = o.step_.data_parallel_;
  const int ranks = dp.communicator != nullptr ? dp.communicator->ranks() : 1;

  const int workers = static_cast<int>(starpu_worker_get_count());
  const int profiling = starpu_profiling_status_get() == STARPU_PROFILING_ENABLE;
  StepRunResult result;
  std::deque<StepSlot*> in_flight;
  double last = 0.0;
  for (std::int64_t step = 0; step < o.steps_; ++step) {
    runtime::notify_step_begins(step);
    StepSlot& s = steps.slot(o.batch_size_, step);
    // fit's window: at most two steps in flight, the oldest waited for before its slot is reused.
    while (s.pending || in_flight.size() >= 2) {
      wait_for_step(*in_flight.front());
      in_flight.pop_front();
    }
    const double now = runtime::now_us();
    if (step == o.warmup_) {
      if (profiling) {
        starpu_profiling_worker_info info;
        for (int w = 0; w < workers; ++w) starpu_profiling_worker_get_info(w, &info);  // resets the counters
      }
      result.span_us = now;
    } else if (step > o.warmup_) {
      result.step_us.push_back(now - last);
    }
    last = now;
    const auto first = static_cast<std::size_t>((step % per_pass) * o.batch_size_);
    const auto rows = std::span(order).subspan(first, static_cast<std::size_t>(o.batch_size_));
    steps.submit(s, StepBatch{&data, rows, o.batch_size_ * ranks, step, 0});
    in_flight.push_back(&s);
  }
  while (!in_flight.empty()) {
    wait_for_step(*in_flight.front());
    in_flight.pop_front();
  }
  const int rc = starpu_task_wait_for_all();
  if (rc != 0) throw RuntimeError(fmt::format("step runner: starpu_task_wait_for_all failed ({})", rc));
  runtime::rethrow_task_failures();
  const double end = runtime::now_us();
  result.step_us.push_back(end - last);
  result.span_us = end - result.span_us;
  if (profiling) {
    for (int w = 0; w < workers; ++w) {
      starpu_profiling_worker_info info;
      starpu_profiling_worker_get_info(w, &info);
      char name[64];
      starpu_worker_get_name(w, name, sizeof(name));
      WorkerUse use;
      use.worker = w;
      use.name = name;
      use.busy_us = seconds_us(info.executing_time);
      use.utilisation = result.span_us > 0.0 ? use.busy_us / result.span_us : 0.0;
      result.tasks += info.executed_tasks;
      result.workers.push_back(use);
    }
  }
  return result;
}

}  // namespace dtnn
