// SPDX-License-Identifier: Apache-2.0
// dtnn calibrate: steps of a model with StarPU's performance models calibrating into a machine folder, which
// dtnn simulate reads (docs/simulation.md).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include <fmt/ranges.h>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "app/step_runs.hpp"
#include "runtime/text_file.hpp"

namespace dtnn::app {
namespace {

namespace fs = std::filesystem;

int run_calibrate(StepOptions o) {
  require_real_build("calibrate");
  o.model.conv = o.conv.value_or(o.model.conv);
  // Under mpirun every rank runs the steps and sums its gradients with the others, as `dtnn train` does: rank 0
  // calibrates into the folder, the others' models (the same tasks on their own cores) go to a folder of their own
  // that is removed at the end.
  const runtime::Mpi mpi;
  ScratchFolder scratch;
  if (mpi.rank() > 0) {
    scratch.dir = fs::temp_directory_path() / fmt::format("dtnn-calibrate-{}-rank{}", ::getpid(), mpi.rank());
  }
  // --out a folder, or an archive: extracted (where it exists) into a private folder, packed back at the end.
  const runtime::MachineFolder machine =
      runtime::MachineFolder::create(scratch.dir.empty() ? fs::path(o.folder) : scratch.dir);
  const fs::path dir = machine.dir();
  runtime::use_machine_folder(dir, runtime::MachineUse::kCalibrate);
  // Every task's duration goes into its model's history (without it, lws never measures).
  setenv("STARPU_CALIBRATE", "1", 1);
  nlohmann::json doc = runtime::read_machine_file(dir);
  o.network.ranks = mpi.size();
  const StepOutcome out = run_step_options(o, &mpi, true);
  if (mpi.rank() > 0) return 0;
  fmt::print("dtnn calibrate: {} on {} ({}{}) into {}\n", o.model.name, runtime::cpu_model_name(), out.engine,
             mpi.active() ? fmt::format("; rank 0 of {} MPI ranks, gradients summed over them", mpi.size()) : "",
             machine.path().string());
  print_step_result(out.result, o.run.batch_size_);
  fmt::print("CPU workers' speeds against the mean of the same tasks: {:.3f} (dtnn simulate --worker-speeds)\n",
             fmt::join(out.cpu_worker_speeds, ", "));
  fmt::print("CPU workers' time between two tasks (median, the next one ready): {:.1f} us (dtnn simulate charges it "
             "before each task)\n",
             out.cpu_task_overhead_us);
  doc["host"] = runtime::kMachineHost;
  doc["cpu"] = runtime::cpu_model_name();
  doc["cores"] = static_cast<int>(std::thread::hardware_concurrency());
  nlohmann::json row = step_result_json(o, out.result);
  row["cuda_workers"] = out.cuda_workers;
  row["cpu_worker_speeds"] = out.cpu_worker_speeds;
  row["cpu_task_overhead_us"] = out.cpu_task_overhead_us;
  doc["calibrations"].push_back(row);
  runtime::write_machine_file(dir, doc);
  machine.save();
  if (!o.report.empty()) runtime::write_text_file(o.report, row.dump(2) + "\n", "report");
  return 0;
}

}  // namespace

Command add_calibrate(CLI::App& program) {
  auto o = std::make_shared<StepOptions>();
  o->run.steps(20);
  o->engine.workers(2);
  CLI::App* app = program.add_subcommand("calibrate",
                                         "run steps of a model (synthetic data) with StarPU's performance models "
                                         "calibrating into a machine folder, for dtnn simulate");
  add_step_options(app, *o);
  app->add_option("--out", o->folder, "the machine folder, or its archive NAME.tar.xz (.tar.gz, .tar) (created; models of several runs accumulate)")->required();
  app->add_option("--device", o->device,
                  "where the tasks run: cpu, cuda (the GPUs' models; CUDA build) or all (CPUs and GPUs, placed by "
                  "the scheduler, e.g. dmdas)")
      ->check(CLI::IsMember({"cpu", "cuda", "all"}))
      ->capture_default_str();
  app->add_option("--gpus", o->gpus, "GPUs with --device cuda|all (-1: all)")->capture_default_str();
  return {app, [o] { return run_calibrate(*o); }};
}

}  // namespace dtnn::app
