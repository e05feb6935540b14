// SPDX-License-Identifier: Apache-2.0
// A run's models outside its main line: the model a run starts with, and the run replayed to a step (to find where
// a diverged step's values stopped being finite, or to skip that step's update).
#include <filesystem>
#include <limits>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "app/train.hpp"
#include "io/checkpoint.hpp"
#include "models/diagnosis.hpp"
#include "models/schedules.hpp"

namespace dtnn::app {
namespace {

namespace fs = std::filesystem;

// The newest checkpoint of the run that is a resume point at or before `step`: of --checkpoint-dir, else --resume's
// (a file, or the newest of a directory); empty when there is none (the run's first state is then its seed's).
std::string restore_point(const TrainOptions& o, std::int64_t step) {
  if (!o.checkpoint_dir.empty() && fs::is_directory(o.checkpoint_dir)) {
    const std::vector<fs::path> all = io::CheckpointDirectory(o.checkpoint_dir, o.keep).checkpoints();
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      try {
        if (io::load_checkpoint(*it).step <= step) return it->string();
      } catch (const DataError&) {
        // A damaged one is no resume point: an older one is.
      }
    }
  }
  if (!o.resume.empty() && io::load_checkpoint(io::resolve_checkpoint(o.resume)).step <= step) return o.resume;
  return {};
}

}  // namespace

Trainee start_trainee(const TrainOptions& o, const models::ModelInfo& info, const io::TrainTest& data,
                      const runtime::Mpi& mpi, const std::string& checkpoint) {
  Trainee t;
  t.model = build_zoo_model(o.run.model, o.fit.seed_);
  OptimizerConfig config = o.optimizer;
  if (o.scale_lr) config.learning_rate = scale_lr_for_ranks(config.learning_rate, mpi.size());
  t.optimizer = make_default_optimizer(config);
  t.base_learning_rate = t.optimizer->learning_rate();
  exempt_from_weight_decay(*t.optimizer, t.model, o.no_weight_decay);
  if (!checkpoint.empty()) {
    const ResumePoint at = resume_training(checkpoint, info.name, t.model, *t.optimizer, o.schedule);
    t.initial_step = at.step;
    t.restored_from = at.file.string();
    t.restored_epoch = at.epoch;
  }
  DataParallelOptions parallel = o.parallel;
  const codelets::Precision precision = o.run.model.precision;
  parallel.agreement(fmt::format("model={} conv={} {}", info.name, to_string(o.run.model.conv),
                                 precision == codelets::Precision::kFp32
                                     ? std::string()
                                     : fmt::format("precision={} ", codelets::to_string(precision))) +
                     fmt::format("no_weight_decay={} clip_grad_norm={} ", fmt::join(o.no_weight_decay, ","),
                                 o.fit.clip_grad_norm_) +
                     agreement_text(o.fit, *t.optimizer, data.train, &data.test, parallel));
  t.data_parallel = std::make_unique<DataParallelRun>(mpi, t.model, parallel);
  return t;
}

Trainee replay_to(const TrainOptions& o, const models::ModelInfo& info, const io::TrainTest& data,
                  const io::Dataset* validation, const runtime::Mpi& mpi, std::int64_t step,
                  const std::vector<std::int64_t>& skipped) {
  Trainee t = start_trainee(o, info, data, mpi, restore_point(o, step));
  FitOptions fit = o.fit;
  fit.callbacks_.clear();
  for (auto& callback : schedule_callbacks(o.schedule, fit.epochs_)) fit.callback(callback);
  fit.verbose(false).data_parallel(t.data_parallel->data_parallel());
  // Up to each skipped step after the restore point, then past it; then up to `step`.
  std::vector<std::int64_t> ends;
  for (std::int64_t s : skipped) {
    if (s >= t.initial_step && s < step) ends.push_back(s);
  }
  ends.push_back(step);
  for (std::int64_t end : ends) {
    dtnn::fit(t.model, *t.optimizer, data.train,
              FitOptions(fit).initial_step(t.initial_step).stop_when([end](std::int64_t next) {
                return next >= end ? 1 : 0;
              }),
              validation);
    t.initial_step = end == step ? end : end + 1;
    rewind_learning_rate(*t.optimizer, t.base_learning_rate, o.schedule);
  }
  t.data_parallel->wait_idle();
  return t;
}

void report_nonfinite(const TrainOptions& o, const models::ModelInfo& info, const io::TrainTest& data,
                      const io::Dataset* validation, const runtime::Mpi& mpi, std::int64_t step,
                      const std::vector<std::int64_t>& skipped, std::int64_t max_replay_steps) {
  const std::string from = restore_point(o, step);
  const std::int64_t first = from.empty() ? 0 : io::load_checkpoint(io::resolve_checkpoint(from)).step;
  if (step - first > max_replay_steps) {
    if (mpi.rank() == 0) {
      fmt::print(stderr,
                 "dtnn: the layer was not looked for: the replay of the run to step {} would take {} steps from {} "
                 "(more than {}); checkpoints every N steps (--checkpoint-steps N) keep it short\n",
                 step, step - first, from.empty() ? "its start" : from, max_replay_steps);
    }
    return;
  }
  Trainee t = replay_to(o, info, data, validation, mpi, step, skipped);
  FitOptions fit = o.fit;
  fit.data_parallel(t.data_parallel->data_parallel());
  const StepRows rows = step_rows(data.train, fit, step);
  const NonFiniteSite site = first_nonfinite(t.model, data.train, rows.rows, step, rows.epoch, fit);
  if (site.found() || mpi.rank() == 0) {
    fmt::print(stderr, "dtnn: step {} replayed from {}{}: {}\n", step,
               t.restored_from.empty() ? "the seed's weights" : t.restored_from,
               mpi.active() ? fmt::format(", rank {}", mpi.rank()) : "", site.describe());
  }
}

}  // namespace dtnn::app
