// SPDX-License-Identifier: Apache-2.0
#include "models/step_probes.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "runtime/engine.hpp"

namespace dtnn {

DagCapture::DagCapture(std::filesystem::path file, std::int64_t step) : file_(std::move(file)), step_(step) {
  if (step < -1) {
    throw InvalidArgument(fmt::format("--dag-step: {}, expected a step index >= 0 (or -1: the third step)", step));
  }
}

void DagCapture::on_train_begin(TrainState& state) { first_step_ = state.step; }

void DagCapture::on_batch_begin(TrainState& state) {
  const std::int64_t target = step_ >= 0 ? step_ : first_step_ + 2;
  if (recorder_.active()) recorder_.stop();  // the step recorded last ends where the next one begins
  if (state.step <= target) {
    // Every step up to the target restarts the recording, so that a shorter run keeps its last step.
    recorder_.start();
    recorded_step_ = state.step;
  }
}

void DagCapture::on_epoch_end(TrainState&) {
  if (recorder_.active()) recorder_.stop();  // evaluation at the epoch's end is not part of the step
}

void DagCapture::on_train_end(TrainState& state) {
  if (recorder_.active()) recorder_.stop();
  runtime::Engine* engine = runtime::Engine::current();
  if (engine != nullptr) engine->wait_all();
  graph_ = recorder_.graph();
  const int workers = engine != nullptr ? engine->cpu_workers() + engine->cuda_workers() : 1;
  const nlohmann::json meta = {{"step", recorded_step_},
                               {"scheduler", engine != nullptr ? engine->scheduler() : std::string()},
                               {"cpu_workers", engine != nullptr ? engine->cpu_workers() : 0},
                               {"cuda_workers", engine != nullptr ? engine->cuda_workers() : 0}};
  graph_.write_json(file_, workers, meta.dump());
}

void StepTimer::on_batch_begin(TrainState&) {
  const auto now = std::chrono::steady_clock::now();
  if (timing_) seconds_.push_back(std::chrono::duration<double>(now - last_).count());
  last_ = now;
  timing_ = true;
}

void StepTimer::on_epoch_end(TrainState&) {
  // The epoch's last step drains into the evaluation: its interval would not be a step's.
  timing_ = false;
}

void StepTimer::on_train_end(TrainState&) {
  if (!timing_) return;
  if (runtime::Engine* engine = runtime::Engine::current()) engine->wait_all();
  seconds_.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - last_).count());
  timing_ = false;
}

}  // namespace dtnn
