// SPDX-License-Identifier: Apache-2.0
// dtnn simulate: the predicted step time of a model on a calibrated machine folder, or on a machine derived from
// it, under StarPU's SimGrid mode (the DTNN_SIMGRID build; docs/simulation.md).
//
// Two processes. The first (prepare_simulation) checks the machine folder and the options, derives the target
// machine's folder and sets the SimGrid StarPU's environment, then runs this program again with the same
// arguments and kSimulationProcess set. That second process's main is StarPU's (app/main.cpp): it starts SimGrid
// on the platform of STARPU_HOME and runs this program's main as a SimGrid actor, which simulates the steps
// (run_simulation). Started from starpu_init in one process instead, SimGrid would have to attach the running
// thread, which forces its thread contexts: every switch between simulated workers is then a hand-over between OS
// threads through the kernel (resnet50_imagenet on 32 simulated workers: 23 min for 2 steps, 70% of it in the
// kernel), where SimGrid's own contexts switch within one thread. The platform must exist before SimGrid starts,
// hence the two processes.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/ranges.h>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "app/step_runs.hpp"
#include "core/errors.hpp"
#include "runtime/text_file.hpp"

namespace dtnn::app {
namespace {

namespace fs = std::filesystem;

// Set in the simulation's second process, whose machine folder is STARPU_HOME's.
constexpr const char* kSimulationProcess = "DTNN_SIMULATION_PROCESS";
// The machine folder of --machine for that second process: the first one's (an archive's extraction lives as long
// as the first process, which waits for the second).
constexpr const char* kSimulationMachine = "DTNN_SIMULATION_MACHINE";

struct SimulateOptions {
  StepOptions steps;
  std::vector<char*> arguments;  // this process's, for the second one
};

// Runs this program again with `arguments` and kSimulationProcess set; its exit status.
int run_simulation_process(std::vector<char*> args) {
  setenv(kSimulationProcess, "1", 1);
  // SimGrid takes its own options out of the arguments before dtnn's main sees them: its INFO lines (platform
  // version, configuration changes) are left out, warnings stay.
  static char quiet[] = "--log=root.thres:warning";
  args.push_back(quiet);
  args.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) throw RuntimeError(fmt::format("simulate: fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    execv("/proc/self/exe", args.data());
    std::fprintf(stderr, "dtnn simulate: cannot run /proc/self/exe again: %s\n", std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw RuntimeError(fmt::format("simulate: waitpid failed: {}", std::strerror(errno)));
  }
  if (WIFSIGNALED(status)) {
    throw RuntimeError(fmt::format("simulate: the simulation process ended by signal {} ({})", WTERMSIG(status),
                                   strsignal(WTERMSIG(status))));
  }
  return WEXITSTATUS(status);
}

// Whether a machine folder's calibration row is of the steps asked for (conv: the one to run, unset: any).
bool same_steps(const nlohmann::json& c, const StepOptions& o, const std::string& conv) {
  return c.value("model", "") == o.model.name && c.value("batch_size", 0) == o.run.batch_size_ &&
         c.value("tiles", 0) == o.run.step_.tiles_ && c.value("fusion", "") == (o.model.fusion ? "on" : "off") &&
         c.value("precision", "fp32") == codelets::to_string(o.model.precision) &&
         (conv.empty() || c.value("conv", "") == conv);
}

// --conv where none was given: the algorithm the machine folder was calibrated with for this model, batch, tiles
// and fusion (the model's default among several; the default where there is none, for the error that follows).
ConvVariant simulated_conv(const StepOptions& o, const nlohmann::json& machine) {
  if (o.conv) return *o.conv;
  const std::string preferred = to_string(o.model.conv);
  std::string found;
  for (const auto& c : machine.value("calibrations", nlohmann::json::array())) {
    if (!same_steps(c, o, "")) continue;
    const std::string conv = c.value("conv", "");
    if (conv == preferred) return o.model.conv;
    if (found.empty()) found = conv;
  }
  return found.empty() ? o.model.conv : parse_conv_variant(found, "--machine's calibration");
}

// The options that contradict each other or the machine folder `dir` (InvalidArgument).
void check_options(const StepOptions& o, const fs::path& dir) {
  if (o.device != "cpu" && o.device != "cuda" && o.device != "all") {
    throw InvalidArgument(fmt::format("--device {}, expected cpu, cuda or all", o.device));
  }
  const bool gpu = o.device != "cpu";
  const runtime::TargetMachine& t = o.target;
  if ((t.bus_gbps > 0.0 || t.bus_latency_us >= 0.0) && !gpu) {
    throw InvalidArgument(fmt::format("--bus-gbps {} / --bus-latency-us {} with --device {}: the bus is the GPUs' link "
                                      "to the host, expected --device cuda or all",
                                      t.bus_gbps, t.bus_latency_us, o.device));
  }
  if (o.network.on_cores && (o.network.ranks < 2 || gpu)) {
    throw InvalidArgument(fmt::format("--sums-on-cores with --ranks {} and --device {}: the gradient sums of CPU "
                                      "ranks, expected --ranks 2 or more and --device cpu",
                                      o.network.ranks, o.device));
  }
  if (gpu && runtime::machine_gpus(dir) == 0) {
    throw InvalidArgument(fmt::format("--device {}: machine folder '{}' has no GPU, expected one calibrated with "
                                      "`dtnn calibrate --device cuda` on a GPU machine (or --device cpu)",
                                      o.device, o.folder));
  }
  if (gpu && o.gpus == 0) {
    throw InvalidArgument(fmt::format("--gpus 0 with --device {}, expected -1 (the machine's GPUs) or a count", o.device));
  }
}

// The last matching CPU calibration's time between two tasks (0: none). Simulated tasks take their calibrated
// times: a shape nobody calibrated would stop StarPU in the middle, so a folder without this graph's calibration
// (for the device asked: --device all needs both kinds) is an InvalidArgument that says how to calibrate it.
double calibrated_overhead_us(const StepOptions& o, const nlohmann::json& machine) {
  const std::string conv = to_string(o.model.conv);
  const std::string fusion = o.model.fusion ? "on" : "off";
  const bool fp32 = o.model.precision == codelets::Precision::kFp32;
  const std::string precision = codelets::to_string(o.model.precision);
  const std::string precision_words = fp32 ? "" : ", precision " + precision;
  const std::string precision_option = fp32 ? "" : " --precision " + precision;
  bool cpu = false;
  bool gpu = false;
  double overhead_us = 0.0;
  std::string have;
  for (const auto& c : machine.value("calibrations", nlohmann::json::array())) {
    const std::string device = c.value("device", std::string("cpu"));
    have += fmt::format("{}{} batch {} tiles {} conv {} fusion {}{} device {}", have.empty() ? "" : "; ",
                        c.value("model", ""), c.value("batch_size", 0), c.value("tiles", 0), c.value("conv", ""),
                        c.value("fusion", ""),
                        c.value("precision", "fp32") == "fp32" ? "" : " precision " + c.value("precision", ""),
                        device);
    if (!same_steps(c, o, conv)) continue;
    // A calibration with --device cuda holds the CUDA models of that graph's shapes (and the CPU ones only of the
    // tasks without a CUDA body); cpu the CPU ones; all both.
    cpu = cpu || device != "cuda";
    gpu = gpu || device != "cpu";
    if (device != "cuda" && c.contains("cpu_task_overhead_us")) overhead_us = c.at("cpu_task_overhead_us").get<double>();
  }
  const bool calibrated = o.device == "cpu" ? cpu : o.device == "cuda" ? gpu : cpu && gpu;
  if (!calibrated) {
    throw InvalidArgument(fmt::format(
        "--machine {}: no calibration of {} with batch {}, {} tiles, conv {}, fusion {}{} for --device {} (it has: "
        "{}), expected `dtnn calibrate --model {} --batch-size {} --tiles {} --conv {} --fusion {}{} --device {} --out {}` "
        "first",
        o.folder, o.model.name, o.run.batch_size_, o.run.step_.tiles_, conv, fusion, precision_words, o.device,
        have.empty() ? "none" : have, o.model.name, o.run.batch_size_, o.run.step_.tiles_, conv, fusion,
        precision_option, o.device, o.folder));
  }
  return overhead_us;
}

// A machine we do not have: a folder derived from the calibrated one into `derived`, which the engine is then
// pointed at; `derived` stays empty when the target is the calibrated machine. More GPUs than the calibrated machine
// had are copies of its GPU 0 (runtime::derive_machine_folder).
void derive_target(const StepOptions& o, const fs::path& calibrated, ScratchFolder& derived) {
  const bool gpu = o.device != "cpu";
  const int calibrated_gpus = runtime::machine_gpus(calibrated);
  runtime::TargetMachine t = o.target;
  t.gpus = gpu && o.gpus > calibrated_gpus ? o.gpus : 0;
  if (!gpu) t.gpu_speed = 1.0;
  const bool bus = t.bus_gbps > 0.0 || t.bus_latency_us >= 0.0;
  if (t.cpus == 0 && t.cpu_speed == 1.0 && t.gpus == 0 && t.gpu_speed == 1.0 && !bus) return;
  derived.dir = fs::temp_directory_path() / fmt::format("dtnn-target-{}", ::getpid());
  runtime::derive_machine_folder(calibrated, derived.dir, t);
  runtime::use_machine_folder(derived.dir, runtime::MachineUse::kSimulate);
  fmt::print("target machine: {} CPU cores at {} times the calibrated cores' speed{}{}\n",
             t.cpus > 0 ? fmt::format("{}", t.cpus) : "the calibrated machine's", t.cpu_speed,
             gpu ? fmt::format(", {} GPUs at {} times the calibrated GPU's speed",
                               t.gpus > 0 ? t.gpus : calibrated_gpus, t.gpu_speed)
                 : "",
             bus ? fmt::format(", each linked to the host at {} and {}",
                               t.bus_gbps > 0.0 ? fmt::format("{} Gb/s", t.bus_gbps) : "the calibrated bandwidth",
                               t.bus_latency_us >= 0.0 ? fmt::format("{} us", t.bus_latency_us)
                                                       : "the calibrated latency")
                 : "");
}

// A SimGrid StarPU built before one of dtnn's patches (scripts/starpu-patches) lacks its symbol.
void require_patch(const char* symbol, const std::string& option) {
  if (dlsym(RTLD_DEFAULT, symbol) == nullptr) {
    throw InvalidArgument(fmt::format("{}: this SimGrid StarPU lacks dtnn's patch for it (a build before the patch), "
                                      "expected one built by the current scripts/build_starpu.sh --simgrid; rebuild it",
                                      option));
  }
}

// The environment the SimGrid StarPU's patches read (scripts/starpu-patches): durations drawn around their means,
// each CPU worker's speed, and a CPU worker's time between two tasks (overhead_us, on cores of --cpu-speed).
void set_simgrid_environment(const StepOptions& o, double overhead_us) {
  setenv("DTNN_SIMGRID_SCATTER", o.scatter ? "1" : "0", 1);
  setenv("DTNN_SIMGRID_SEED", std::to_string(o.run.step_.seed_ % 1000000000u + 1).c_str(), 1);
  if (o.scatter) {
    require_patch("_dtnn_history_based_job_deviation", "--scatter");
    fmt::print("task durations drawn around their models' means (log-normal, their calibrated deviations, seed {})\n",
               o.run.step_.seed_);
  }
  if (!o.worker_speeds.empty()) {
    if (static_cast<int>(o.worker_speeds.size()) != o.engine.workers_) {
      throw InvalidArgument(fmt::format("--worker-speeds {}: {} speeds for --workers {}, expected one per CPU worker",
                                        fmt::join(o.worker_speeds, ","), o.worker_speeds.size(), o.engine.workers_));
    }
    require_patch("_dtnn_worker_length", "--worker-speeds");
    setenv("DTNN_SIMGRID_WORKER_SPEEDS", fmt::format("{}", fmt::join(o.worker_speeds, ",")).c_str(), 1);
    fmt::print("CPU workers at {} times their models' means\n", fmt::join(o.worker_speeds, ", "));
  } else {
    unsetenv("DTNN_SIMGRID_WORKER_SPEEDS");
  }
  if (overhead_us > 0.0) {
    require_patch("_dtnn_task_overhead_s", fmt::format("--task-overhead-us {} (or --task-overhead-us 0)", overhead_us));
    setenv("DTNN_SIMGRID_TASK_OVERHEAD_US", fmt::format("{}", overhead_us).c_str(), 1);
    setenv("STARPU_SIMGRID_FETCHING_INPUT_COST", "0", 1);
    fmt::print("CPU workers spend {:.1f} us between two tasks ({})\n", overhead_us,
               o.task_overhead_us ? "--task-overhead-us" : "the calibration's");
  } else {
    unsetenv("DTNN_SIMGRID_TASK_OVERHEAD_US");
  }
}

// The simulation's first process.
int prepare_simulation(const SimulateOptions& given) {
  const runtime::MachineFolder folder = runtime::MachineFolder::open(given.steps.folder);
  const fs::path dir = folder.dir();
  runtime::use_machine_folder(dir, runtime::MachineUse::kSimulate);
  setenv(kSimulationMachine, fs::absolute(dir).c_str(), 1);
  const nlohmann::json machine = runtime::read_machine_file(dir);
  StepOptions o = given.steps;
  o.model.conv = simulated_conv(o, machine);
  check_options(o, dir);
  const double calibrated_us = calibrated_overhead_us(o, machine);
  fmt::print("dtnn simulate: SimGrid, {} (conv {}) on machine {} ({}); codelets do not run and buffers hold "
             "nothing, so there is no loss, metric, checkpoint or evaluation\n",
             o.model.name, to_string(o.model.conv), o.folder, machine.value("cpu", std::string("?")));
  ScratchFolder derived;
  derive_target(o, dir, derived);
  // Every simulated GPU takes the models of the calibrated GPU 0 (StarPU keys CUDA models by device otherwise).
  if (o.device != "cpu") setenv("STARPU_PERF_MODEL_HOMOGENEOUS_CUDA", "1", 1);
  const int cpus = runtime::machine_cpus(derived.dir.empty() ? dir : derived.dir);
  if (o.engine.workers_ > cpus) {
    throw InvalidArgument(fmt::format("--workers {}: the machine has {} CPU cores, expected at most {} (or a target "
                                      "machine with more: --cpus N)",
                                      o.engine.workers_, cpus, cpus));
  }
  set_simgrid_environment(o, o.task_overhead_us.value_or(calibrated_us) / o.target.cpu_speed);
  if (o.network.ranks > 1) {
    fmt::print("{} data-parallel ranks: this rank's graph, each gradient bucket's allreduce timed as a ring over "
               "links of {:g} Gb/s and {:g} us (no byte moves){}\n",
               o.network.ranks, o.network.bandwidth_bytes_per_s / kGbps, o.network.latency_s / kMicroseconds,
               o.network.on_cores ? ", spent on this rank's CPU workers (--sums-on-cores)" : "");
  }
  return run_simulation_process(given.arguments);
}

// The second process, a SimGrid actor: STARPU_HOME is the machine folder to simulate (derived from --machine, whose
// calibrations the first process checked).
int run_simulation(StepOptions o) {
  const char* extracted = std::getenv(kSimulationMachine);
  const fs::path machine = extracted != nullptr ? fs::path(extracted) : fs::path(o.folder);
  o.model.conv = simulated_conv(o, runtime::read_machine_file(machine));
  const StepOutcome out = run_step_options(o, nullptr, false);
  const StepRunResult& r = out.result;
  fmt::print("{}\npredicted ", out.engine);
  print_step_result(r, o.run.batch_size_ * o.network.ranks);
  const double per_step_ms = out.network_busy_s * 1e3 / static_cast<double>(o.run.steps_);
  if (o.network.ranks > 1) {
    fmt::print("  network: {} allreduces, {:.2f} ms a step (hidden or not; compare with --ranks 1 for the exposed "
               "part)\n",
               out.allreduces, per_step_ms);
  }
  if (!o.trace.empty()) fmt::print("Trace: {} (simulated times)\n", o.trace);
  if (o.report.empty()) return 0;
  const bool gpu = o.device != "cpu";
  nlohmann::json doc = step_result_json(o, r);
  doc["machine"] = fs::absolute(o.folder).string();
  doc["simulated"] = true;
  doc["scatter"] = o.scatter;
  doc["target"] = {{"cpus", o.target.cpus},       {"cpu_speed", o.target.cpu_speed},
                   {"gpus", gpu ? out.cuda_workers : 0}, {"gpu_speed", gpu ? o.target.gpu_speed : 1.0},
                   {"worker_speeds", o.worker_speeds},    {"bus_gbps", o.target.bus_gbps},
                   {"bus_latency_us", o.target.bus_latency_us}};
  const char* overhead = std::getenv("DTNN_SIMGRID_TASK_OVERHEAD_US");
  doc["task_overhead_us"] = overhead != nullptr ? std::stod(overhead) : 0.0;
  doc["network"] = {{"link_gbps", o.network.bandwidth_bytes_per_s / kGbps},
                    {"link_latency_us", o.network.latency_s / kMicroseconds},
                    {"sums_on_cores", o.network.on_cores},
                    {"bucket_mb", static_cast<double>(o.buckets.bytes_) / kMiB},
                    {"allreduces", out.allreduces},
                    {"allreduce_ms_per_step", per_step_ms}};
  runtime::write_text_file(o.report, doc.dump(2) + "\n", "report");
  return 0;
}

int run_simulate(const SimulateOptions& o) {
  if (!runtime::simulated()) {
    throw InvalidArgument("simulate: this build runs its codelets; simulations run in the DTNN_SIMGRID build "
                          "(scripts/setup.sh test builds it in build-simgrid: build-simgrid/bin/dtnn simulate ...)");
  }
  return simulation_process() ? run_simulation(o.steps) : prepare_simulation(o);
}

void add_simulate_options(CLI::App* app, StepOptions& o) {
  add_step_options(app, o);
  app->add_option("--machine", o.folder, "a machine folder or its archive (dtnn calibrate --out)")->required();
  app->add_option("--cpus", o.target.cpus, "CPU cores of the target machine (0: the calibrated machine's)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--cpu-speed", o.target.cpu_speed,
                  "the target's cores against the calibrated ones (2: twice as fast; every task's calibrated time is "
                  "divided by it)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--device", o.device,
                  "cpu: every task on the CPU workers; cuda: every task with a CUDA body on the simulated GPUs; all: "
                  "the scheduler chooses (cuda needs a calibration with --device cuda or all, all one with --device "
                  "all or one of each)")
      ->check(CLI::IsMember({"cpu", "cuda", "all"}))
      ->capture_default_str();
  app->add_option("--gpus", o.gpus,
                  "simulated GPUs with --device cuda|all (-1: the calibrated machine's; more are copies of its GPU 0)")
      ->capture_default_str();
  app->add_option("--gpu-speed", o.target.gpu_speed,
                  "the target's GPUs against the calibrated one (every CUDA task's calibrated time is divided by it)")
      ->capture_default_str();
  app->add_option("--bus-gbps", o.target.bus_gbps,
                  "with --device cuda|all: each GPU's link to the host's memory, Gb/s each way (in the platform "
                  "SimGrid moves the data over and in the bus files the dm* schedulers predict with); default the "
                  "calibrated GPU's")
      ->check(CLI::PositiveNumber);
  app->add_option("--bus-latency-us", o.target.bus_latency_us,
                  "with --device cuda|all: that link's latency, us; default the calibrated GPU's")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--ranks", o.network.ranks,
                  "data-parallel ranks (one simulated; the others' allreduces on a simulated network)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  add_scaled(app, "--link-gbps", o.network.bandwidth_bytes_per_s, kGbps, "bandwidth of each node's link, Gb/s")
      ->check(CLI::PositiveNumber);
  add_scaled(app, "--link-latency-us", o.network.latency_s, kMicroseconds, "latency of a message between two nodes, us")
      ->check(CLI::NonNegativeNumber);
  app->add_flag("--sums-on-cores", o.network.on_cores,
                "each gradient sum is a task on one of the rank's CPU workers for the network model's time (ranks "
                "through shared memory or TCP, where the cores copy and add the bytes), not a network beside them "
                "(RDMA, NCCL)");
  add_scaled(app, "--bucket-mb", o.buckets.bytes_, kMiB, "size of a gradient bucket for the allreduce, MiB")
      ->check(CLI::PositiveNumber);
  app->add_option("--tail-buckets", o.buckets.tail_buckets_, "as dtnn train --tail-buckets")
      ->type_name("INT")
      ->check(CLI::IsMember({0, 1}))
      ->default_str(o.buckets.tail_buckets_ ? "1" : "0");
  app->add_option("--worker-speeds", o.worker_speeds,
                  "comma-separated speed of each simulated CPU worker, one per --workers (each task on it lasts its "
                  "model's mean / the speed; the schedulers still plan with the means): cores of unequal speed, as "
                  "`dtnn calibrate` measures them (its cpu_worker_speeds); default all 1")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app->add_option("--task-overhead-us", o.task_overhead_us,
                  "a CPU worker's time between two tasks, charged before each simulated CPU task (divided by "
                  "--cpu-speed); default the calibration's own measure (its cpu_task_overhead_us, 0 in one without "
                  "it); 0: StarPU's own 1 us per buffer")
      ->check(CLI::NonNegativeNumber);
  app->add_flag("--scatter", o.scatter,
                "each task lasts a draw from a log-normal distribution of its model's mean and deviation (one "
                "generator seeded by --seed) instead of the mean");
}

}  // namespace

bool simulation_process() { return std::getenv(kSimulationProcess) != nullptr; }

Command add_simulate(CLI::App& program, int argc, char** argv) {
  auto o = std::make_shared<SimulateOptions>();
  o->steps.run.steps(12);
  o->steps.engine.workers(1);
  o->arguments.assign(argv, argv + argc);
  CLI::App* app = program.add_subcommand("simulate",
                                         "predicted step time, images/s and worker utilisation of a model on a "
                                         "calibrated machine (SimGrid; the DTNN_SIMGRID build)");
  add_simulate_options(app, o->steps);
  return {app, [o] { return run_simulate(*o); }};
}

}  // namespace dtnn::app
