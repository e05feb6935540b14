// SPDX-License-Identifier: Apache-2.0
// The simulation build (DTNN_SIMGRID) as a user runs it: `dtnn simulate` on the machine archive committed in
// tests/data/machine-zen5.tar.xz (a `dtnn calibrate` of simplecnn on this project's 2-core AMD EPYC Zen 5 (family
// 26)), each run its own process (SimGrid starts once per process). A simulation is deterministic: the same
// prediction twice.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "support/tar_writer.hpp"

namespace {

namespace fs = std::filesystem;

struct CliRun {
  int status;
  std::string output;
};

CliRun dtnn(const std::string& args) {
  const char* bin = std::getenv("DTNN_BIN");
  const std::string cmd =
      "STARPU_SILENT=1 " + std::string(bin != nullptr ? bin : DTNN_BINARY_DIR "/bin/dtnn") + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) out += buf;
  const int rc = pclose(pipe);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("dtnn-sim-" + std::to_string(::getpid()) + "-" + name);
}

const fs::path kZen5 = fs::path("tests") / "data" / "machine-zen5.tar.xz";

// A machine folder from a committed machine archive (by default tests/data/machine-zen5.tar.xz), extracted by tar
// (the archive is a plain tar.xz), which a test may change (and StarPU may write into its home).
fs::path machine_copy(const std::string& name, const fs::path& archive = kZen5) {
  const fs::path dir = temp_path(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string cmd = "tar -xJf '" + (fs::path(DTNN_SOURCE_DIR) / archive).string() + "' -C '" + dir.string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return dir;
}

// The GPU calibration of bench/results/machines/h200_xeon16.tar.xz (an H200 and 16 Xeon cores, simplecnn among its
// models at batch 64, 1 tile, --device cuda, 2 CPU workers, dmdas; bench/results/gpu_h200_2026-12-04).
const fs::path kH200 = fs::path("bench") / "results" / "machines" / "h200_xeon16.tar.xz";

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

const std::string kRun = "simulate --model simplecnn --batch-size 64 --steps 8 --warmup 2 ";

TEST(SimulationTest, SameMachineSameOptionsGiveTheSamePrediction) {
  const fs::path machine = machine_copy("same");
  double first = 0.0;
  for (int run = 0; run < 2; ++run) {
    const fs::path report = temp_path("same-" + std::to_string(run) + ".json");
    const CliRun r = dtnn(kRun + "--tiles 2 --workers 2 --scheduler dmdas --machine " + machine.string() + " --report " +
                          report.string());
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("codelets do not run"), std::string::npos) << r.output;
    // No --conv: the algorithm the folder was calibrated with (tests/data/machine-zen5.tar.xz's is convgemm).
    EXPECT_NE(r.output.find("(conv convgemm)"), std::string::npos) << r.output;
    const auto doc = read_json(report);
    fs::remove(report);
    EXPECT_EQ(doc.at("simulated"), true);
    const double step_ms = doc.at("step_ms");
    EXPECT_GT(step_ms, 0.0);
    ASSERT_EQ(doc.at("worker_use").size(), 2u);
    for (const auto& w : doc.at("worker_use")) {
      EXPECT_GT(w.at("utilisation").get<double>(), 0.0);
      EXPECT_LE(w.at("utilisation").get<double>(), 1.0 + 1e-9);
    }
    if (run == 0) {
      first = step_ms;
    } else {
      EXPECT_EQ(step_ms, first) << "a simulation must be deterministic";
    }
  }
  fs::remove_all(machine);
}

TEST(SimulationTest, MoreWorkersArePredictedFasterAndTheTraceHasSimulatedTasks) {
  const fs::path machine = machine_copy("workers");
  double step_ms[2] = {0.0, 0.0};
  const fs::path trace = temp_path("trace.json");
  for (int workers : {1, 2}) {
    const fs::path report = temp_path("w" + std::to_string(workers) + ".json");
    const CliRun r = dtnn(kRun + "--tiles 2 --scheduler lws --workers " + std::to_string(workers) + " --machine " +
                          machine.string() + " --report " + report.string() +
                          (workers == 2 ? " --trace " + trace.string() : ""));
    ASSERT_EQ(r.status, 0) << r.output;
    step_ms[workers - 1] = read_json(report).at("step_ms");
    fs::remove(report);
  }
  EXPECT_LT(step_ms[1], step_ms[0]);
  const auto events = read_json(trace).at("traceEvents");
  fs::remove(trace);
  int tasks = 0;
  for (const auto& e : events) {
    if (e.value("ph", "") == "X") ++tasks;
  }
  EXPECT_GT(tasks, 100);
  fs::remove_all(machine);
}

// The report of `dtnn simulate` with kRun and options on the machine folder (a failure: an expectation failed and
// a report of step_ms 0).
nlohmann::json simulated_report(const fs::path& machine, const std::string& options) {
  const fs::path report = temp_path("step.json");
  const CliRun r = dtnn(kRun + "--machine " + machine.string() + " --report " + report.string() + " " + options);
  EXPECT_EQ(r.status, 0) << r.output;
  if (r.status != 0) return {{"step_ms", 0.0}};
  nlohmann::json doc = read_json(report);
  fs::remove(report);
  return doc;
}

double simulated_step_ms(const fs::path& machine, const std::string& options) {
  return simulated_report(machine, options).at("step_ms");
}

TEST(SimulationTest, TargetMachinesScaleTheCalibratedTimes) {
  const fs::path machine = machine_copy("target");
  const double calibrated = simulated_step_ms(machine, "--workers 2");
  // Every task twice as fast on a machine without transfers: half the step, but for what StarPU's simulation
  // charges each task whatever its length (submission, fetching its input: about 1% of simplecnn's step).
  const double twice = simulated_step_ms(machine, "--workers 2 --cpu-speed 2");
  EXPECT_NEAR(twice, calibrated / 2, calibrated * 0.02);
  // Eight simulated cores where two were calibrated: more workers than the 2 tiles can use, no slower.
  const double eight = simulated_step_ms(machine, "--workers 8 --cpus 8");
  EXPECT_GT(eight, 0.0);
  EXPECT_LE(eight, calibrated * 1.05);
  // Two ranks on a slow network take longer than one.
  const double ranks = simulated_step_ms(machine, "--workers 2 --ranks 2 --link-gbps 1 --link-latency-us 50");
  EXPECT_GT(ranks, calibrated);
  fs::remove_all(machine);
}

// --sums-on-cores: each gradient sum is a task on one of the rank's CPU workers. With one worker, everything a step
// does is then on it: the one-rank step plus the network's time, where the network beside the cores hides some.
TEST(SimulationTest, SumsOnCoresOccupyTheRanksWorkers) {
  const fs::path machine = machine_copy("cores");
  const std::string net = "--workers 1 --ranks 2 --link-gbps 1 --link-latency-us 50 --bucket-mb 0.25";
  const double one = simulated_step_ms(machine, "--workers 1");
  const fs::path report = temp_path("cores.json");
  const CliRun r = dtnn(kRun + "--machine " + machine.string() + " --report " + report.string() + " " + net +
                        " --sums-on-cores");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("spent on this rank's CPU workers"), std::string::npos) << r.output;
  const nlohmann::json doc = read_json(report);
  fs::remove(report);
  EXPECT_TRUE(doc.at("network").at("sums_on_cores").get<bool>());
  const double sums = doc.at("network").at("allreduce_ms_per_step");
  const double on_cores = doc.at("step_ms");
  EXPECT_GT(sums, 0.1 * one) << "a slow network, so that the sums weigh";
  EXPECT_NEAR(on_cores, one + sums, 0.05 * (one + sums));
  const double beside = simulated_step_ms(machine, net);
  EXPECT_LT(beside, on_cores - 0.3 * sums) << "beside the cores, the sums overlap the backward pass";

  const CliRun single = dtnn(kRun + "--machine " + machine.string() + " --sums-on-cores");
  EXPECT_EQ(single.status, 2) << single.output;
  EXPECT_NE(single.output.find("--sums-on-cores with --ranks 1"), std::string::npos) << single.output;
  fs::remove_all(machine);
}

// The CUDA workers of a report, and how many of them ran tasks.
std::pair<int, int> cuda_workers(const nlohmann::json& report) {
  int n = 0, busy = 0;
  for (const auto& w : report.at("worker_use")) {
    if (w.at("name").get<std::string>().rfind("CUDA", 0) == 0) {
      ++n;
      if (w.at("utilisation").get<double>() > 0.0) ++busy;
    }
  }
  return {n, busy};
}

TEST(SimulationTest, GpusOfAGpuCalibrationAreSimulated) {
  const fs::path machine = machine_copy("gpu", kH200);
  const std::string gpu = "--device cuda --tiles 1 --workers 2 --scheduler dmdas ";
  nlohmann::json reports[3];
  const std::string variants[3] = {"", "--gpu-speed 2", "--gpus 2"};
  for (int i = 0; i < 3; ++i) {
    const fs::path report = temp_path("gpu" + std::to_string(i) + ".json");
    const CliRun r = dtnn(kRun + gpu + variants[i] + " --machine " + machine.string() + " --report " + report.string());
    ASSERT_EQ(r.status, 0) << r.output;
    reports[i] = read_json(report);
    fs::remove(report);
  }
  EXPECT_EQ(cuda_workers(reports[0]), std::make_pair(1, 1));
  EXPECT_EQ(reports[0].at("target").at("gpus"), 1);
  // A GPU twice as fast: a shorter step (not half: the CPU tasks and the transfers keep their times).
  EXPECT_LT(reports[1].at("step_ms").get<double>(), reports[0].at("step_ms").get<double>());
  // A second GPU, a copy of the calibrated one (with one tile the graph is one chain: dmdas may keep it on one).
  EXPECT_EQ(cuda_workers(reports[2]).first, 2);
  EXPECT_EQ(reports[2].at("target").at("gpus"), 2);

  // This folder holds CUDA models only: --device all also needs CPU ones.
  const CliRun all = dtnn(kRun + "--device all --tiles 1 --workers 2 --machine " + machine.string());
  EXPECT_EQ(all.status, 2) << all.output;
  EXPECT_NE(all.output.find("for --device all"), std::string::npos) << all.output;
  fs::remove_all(machine);

  const fs::path cpu_only = machine_copy("gpu-none");
  const CliRun none = dtnn(kRun + "--device cuda --machine " + cpu_only.string());
  EXPECT_EQ(none.status, 2) << none.output;
  EXPECT_NE(none.output.find("has no GPU"), std::string::npos) << none.output;
  fs::remove_all(cpu_only);
}

// dm* decisions one at a time (the SimGrid StarPU's
// scripts/starpu-patches/0004-simgrid-dmda-one-decision-at-a-time.patch): the two tiles of a resnet18 convolution
// become ready at the same simulated instant, and without the patch both went to worker 0 (worker 1 58% busy, 593 ms
// a step; 99.6% and 458 ms with it). tests/data/machine-zen5-resnet18.tar.xz is a copy of the validation's
// calibration bench/results/machines/resnet18_cifar10-w2.tar.xz (batch 32, 2 tiles, 2 workers), which the study
// rewrites.
TEST(SimulationTest, DmdasPlacesSimultaneousTilesOnBothWorkers) {
  const fs::path machine = machine_copy("resnet18", fs::path("tests") / "data" / "machine-zen5-resnet18.tar.xz");
  const fs::path report = temp_path("dmdas.json");
  const CliRun r = dtnn("simulate --model resnet18_cifar10 --batch-size 32 --tiles 2 --workers 2 --scheduler dmdas "
                        "--steps 6 --warmup 2 --machine " + machine.string() + " --report " + report.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const auto doc = read_json(report);
  fs::remove(report);
  ASSERT_EQ(doc.at("worker_use").size(), 2u);
  for (const auto& w : doc.at("worker_use")) {
    EXPECT_GT(w.at("utilisation").get<double>(), 0.9) << r.output;
  }
  fs::remove_all(machine);
}

// --scatter: every task lasts a draw around its model's mean (the SimGrid StarPU's
// 0005-simgrid-duration-scatter.patch), from one generator seeded by --seed: the same seed, the same prediction; the
// draws change the step.
TEST(SimulationTest, ScatteredDurationsAreReproducibleBySeed) {
  const fs::path machine = machine_copy("scatter");
  const std::string run = "--tiles 2 --workers 2 --scheduler dmdas ";
  const double mean = simulated_step_ms(machine, run);
  const double first = simulated_step_ms(machine, run + "--scatter --seed 7");
  const double again = simulated_step_ms(machine, run + "--scatter --seed 7");
  const double other = simulated_step_ms(machine, run + "--scatter --seed 8");
  EXPECT_EQ(first, again);
  EXPECT_NE(first, mean);
  EXPECT_NE(first, other);
  // Draws around the means: the step stays near the one of the means (simplecnn's deviations are 5-15%).
  EXPECT_NEAR(first / mean, 1.0, 0.2);
  fs::remove_all(machine);
}

// --worker-speeds: each simulated CPU worker's tasks last their models' means over its speed (the SimGrid StarPU's
// 0006-simgrid-worker-speeds.patch), while the schedulers still plan with the means, as on a real machine whose cores
// differ.
TEST(SimulationTest, WorkerSpeedsSlowTheTasksOfTheirWorkers) {
  const fs::path machine = machine_copy("speeds");
  // One worker at half speed: every task twice as long (but for StarPU's small charge per task).
  const double one = simulated_step_ms(machine, "--workers 1");
  const double half = simulated_step_ms(machine, "--workers 1 --worker-speeds 0.5");
  EXPECT_NEAR(half, 2 * one, one * 0.04);
  // Two workers, one at half speed: lws's stealing keeps the other busy, so slower than both at full speed and
  // faster than both at half.
  const std::string lws = "--workers 2 --scheduler lws ";
  const double alike = simulated_step_ms(machine, lws);
  const double one_slow = simulated_step_ms(machine, lws + "--worker-speeds 1,0.5");
  const double both_slow = simulated_step_ms(machine, lws + "--worker-speeds 0.5,0.5");
  EXPECT_GT(one_slow, alike * 1.05);
  EXPECT_LT(one_slow, both_slow * 0.95);
  EXPECT_NEAR(both_slow, 2 * alike, alike * 0.04);
  // One speed per worker, each positive.
  const CliRun count = dtnn(kRun + lws + "--worker-speeds 1 --machine " + machine.string());
  EXPECT_EQ(count.status, 2) << count.output;
  EXPECT_NE(count.output.find("--worker-speeds 1: 1 speeds for --workers 2, expected one per CPU worker"),
            std::string::npos)
      << count.output;
  const CliRun zero = dtnn(kRun + lws + "--worker-speeds 1,0 --machine " + machine.string());
  EXPECT_EQ(zero.status, 2) << zero.output;
  EXPECT_NE(zero.output.find("--worker-speeds"), std::string::npos) << zero.output;
  fs::remove_all(machine);
}

// The target's bus (each GPU's link to the host): a slower or longer link lengthens the step of simplecnn on the
// simulated H200 (each step's batch goes to the GPU); with --device cpu there is no bus to set.
TEST(SimulationTest, BusBandwidthAndLatencyOfTheTarget) {
  const fs::path machine = machine_copy("bus", kH200);
  const std::string gpu = "--device cuda --tiles 1 --workers 2 --scheduler dmdas ";
  auto step = [&](const std::string& options) { return simulated_step_ms(machine, gpu + options); };
  const double calibrated = step("");
  // 1 Gb/s: simplecnn's input batch (64 x 28 x 28 floats, 200 KB) alone takes 1.6 ms a step to the GPU.
  const double slow = step("--bus-gbps 1");
  EXPECT_GT(slow, calibrated + 1.5) << calibrated;
  EXPECT_GT(step("--bus-latency-us 2000"), calibrated + 2.0) << calibrated;
  // The calibrated link given explicitly changes nothing measurable (the calibrated H200 link: tens of GB/s).
  EXPECT_LT(step("--bus-gbps 100000"), calibrated * 1.01);
  const CliRun cpu = dtnn(kRun + "--bus-gbps 10 --machine " + machine.string());
  EXPECT_EQ(cpu.status, 2) << cpu.output;
  EXPECT_NE(cpu.output.find("expected --device cuda or all"), std::string::npos) << cpu.output;
  fs::remove_all(machine);
}

// The time a real CPU worker spends between two tasks (`dtnn calibrate` measures it: cpu_task_overhead_us) is
// charged before each simulated task, in place of StarPU's 1 us per buffer; by default the calibration's own.
TEST(SimulationTest, TaskOverheadIsChargedBeforeEachTask) {
  const fs::path machine = machine_copy("overhead");
  auto run = [&](const std::string& options) { return simulated_report(machine, "--tiles 2 --workers 1 " + options); };
  // tests/data/machine-zen5.tar.xz predates the measure: no overhead of its own.
  const auto base = run("");
  EXPECT_EQ(base.at("task_overhead_us"), 0.0);
  const auto charged = run("--task-overhead-us 100");
  EXPECT_EQ(charged.at("task_overhead_us"), 100.0);
  // One worker runs the N tasks of a step one after the other: 100 us more a task grows the step by N x 0.1 ms,
  // and 100 us against none by N x 0.1 ms less StarPU's own 1 us a buffer, which the overhead replaces.
  const double step_ms = base.at("step_ms").get<double>();
  const double grown = charged.at("step_ms").get<double>() - step_ms;
  const double tasks = (run("--task-overhead-us 200").at("step_ms").get<double>() - step_ms - grown) / 0.1;
  EXPECT_GT(tasks, 40.0);  // simplecnn in 2 tiles: about 60 tasks a step
  EXPECT_LT(tasks, 80.0);
  EXPECT_LT(grown, tasks * 0.1);
  EXPECT_GT(grown, tasks * (0.1 - 0.006));  // at most 6 buffers a task
  // A calibration that measured it is charged by default, on cores of --cpu-speed at that speed.
  nlohmann::json doc = read_json(machine / "machine.json");
  doc.at("calibrations")[0]["cpu_task_overhead_us"] = 100.0;
  std::ofstream(machine / "machine.json") << doc.dump(2);
  const auto calibrated = run("");
  EXPECT_EQ(calibrated.at("task_overhead_us"), 100.0);
  EXPECT_DOUBLE_EQ(calibrated.at("step_ms").get<double>(), charged.at("step_ms").get<double>());
  EXPECT_EQ(run("--cpu-speed 2").at("task_overhead_us"), 50.0);
  EXPECT_DOUBLE_EQ(run("--task-overhead-us 0").at("step_ms").get<double>(), base.at("step_ms").get<double>());
  fs::remove_all(machine);
}

std::size_t temporary_folders(const std::string& prefix) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path())) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

// The target machines derived for a run (runtime::derive_machine_folder).
std::size_t derived_folders() { return temporary_folders("dtnn-target-"); }
// The private folders of archives extracted for a run (runtime::MachineFolder).
std::size_t extracted_folders() { return temporary_folders("dtnn-machine-"); }

// The simulation runs in a second process (app/simulate.cpp): what stops it reaches the user with its cause and a
// non-zero status, and the first process still removes the derived target folder and the archive's extraction.
TEST(SimulationTest, AFailureInTheSimulationProcessIsReported) {
  // The H200 calibration's resnet18 has tile_sum shapes with fewer than 10 samples: StarPU aborts mid-run.
  const fs::path machine = fs::path(DTNN_SOURCE_DIR) / kH200;
  const std::size_t before = derived_folders();
  const std::size_t extracted = extracted_folders();
  const CliRun r = dtnn("simulate --model resnet18_cifar10 --batch-size 64 --tiles 1 --device cuda --gpus 2 "
                        "--workers 2 --scheduler dmdas --steps 4 --warmup 1 --machine " + machine.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("tile_sum"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the simulation process ended by signal"), std::string::npos) << r.output;
  EXPECT_EQ(derived_folders(), before);
  EXPECT_EQ(extracted_folders(), extracted);
}

// A machine archive is simulated as the folder it holds: the same prediction from `--machine NAME.tar.xz` as from
// its extraction by tar, on the calibrated machine and on targets derived from it (CPUs; GPUs: the second process
// reads the first one's extraction), and the archive is what the output and the report name.
TEST(SimulationTest, AnArchiveIsSimulatedAsItsExtractedFolder) {
  const std::size_t before = extracted_folders();
  const std::pair<fs::path, std::string> cases[] = {
      {kZen5, "--tiles 2 --workers 2 --scheduler dmdas"},
      {kZen5, "--tiles 2 --workers 8 --cpus 8"},
      {kH200, "--device cuda --tiles 1 --workers 2 --scheduler dmdas --gpus 2"},
  };
  for (const auto& [name, options] : cases) {
    const fs::path archive = fs::path(DTNN_SOURCE_DIR) / name;
    const fs::path report = temp_path("archive.json");
    const CliRun r = dtnn(kRun + options + " --machine " + archive.string() + " --report " + report.string());
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("on machine " + archive.string() + " ("), std::string::npos) << r.output;
    const auto doc = read_json(report);
    fs::remove(report);
    EXPECT_EQ(doc.at("machine"), archive.string());
    const fs::path folder = machine_copy("extracted", name);
    EXPECT_EQ(doc.at("step_ms").get<double>(), simulated_step_ms(folder, options)) << options;
    fs::remove_all(folder);
  }
  EXPECT_EQ(extracted_folders(), before);
}

// What is not a machine archive, or one whose members would land outside its folder, is refused before anything
// is simulated, naming the file (status 1: bad data), and leaves nothing behind.
TEST(SimulationTest, HostileOrDamagedArchivesAreRefusedNamingTheFile) {
  using dtnn::test::tar_archive;
  const std::size_t before = extracted_folders();
  const fs::path escaped = fs::temp_directory_path() / ("dtnn-escaped-" + std::to_string(::getpid()));
  const auto refused = [&](const std::string& name, const std::string& bytes, const std::string& why) {
    const fs::path file = temp_path(name);
    std::ofstream(file, std::ios::binary) << bytes;
    const CliRun r = dtnn(kRun + "--machine " + file.string());
    EXPECT_EQ(r.status, 1) << name << ": " << r.output;
    EXPECT_NE(r.output.find("dtnn: error: " + file.string() + ": "), std::string::npos) << name << ": " << r.output;
    EXPECT_NE(r.output.find(why), std::string::npos) << name << ": " << r.output;
    fs::remove(file);
  };
  const dtnn::test::TarMember json{"machine.json", '0', "{}\n"};
  const std::string relative = "starpu/../../" + escaped.lexically_relative(fs::temp_directory_path()).string();
  refused("dotdot.tar", tar_archive({json, {relative, '0', "x"}}), "has a '..' component");
  refused("absolute.tar", tar_archive({json, {escaped.string(), '0', "x"}}), "is an absolute path");
  refused("symlink.tar.xz",
          tar_archive({{"starpu/.starpu/sampling/bus/dtnn-machine.platform.v4.xml", '2', "", "/etc/passwd"}}),
          "is a symbolic link (to '/etc/passwd')");
  std::ifstream in(fs::path(DTNN_SOURCE_DIR) / kZen5, std::ios::binary);
  const std::string whole{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  ASSERT_GT(whole.size(), 1000u);
  refused("truncated.tar.xz", whole.substr(0, whole.size() / 2), "damaged");
  refused("text.tar.xz", "not an archive\n", "not a machine archive");
  EXPECT_FALSE(fs::exists(escaped));
  EXPECT_EQ(extracted_folders(), before);
}

TEST(SimulationTest, BadMachineFolderAndRealCommandsAreRefused) {
  const fs::path machine = machine_copy("bad");
  const CliRun tiles = dtnn(kRun + "--tiles 3 --machine " + machine.string());
  EXPECT_EQ(tiles.status, 2) << tiles.output;
  EXPECT_NE(tiles.output.find("no calibration of simplecnn with batch 64, 3 tiles"), std::string::npos)
      << tiles.output;
  const CliRun workers = dtnn(kRun + "--workers 3 --machine " + machine.string());
  EXPECT_EQ(workers.status, 2) << workers.output;
  EXPECT_NE(workers.output.find("--workers 3"), std::string::npos) << workers.output;
  fs::remove_all(machine);

  const CliRun missing = dtnn(kRun + "--machine /nonexistent-machine");
  EXPECT_EQ(missing.status, 2) << missing.output;
  EXPECT_NE(missing.output.find("--machine: '/nonexistent-machine' is not a folder"), std::string::npos)
      << missing.output;
  const fs::path empty = temp_path("empty");
  fs::create_directories(empty);
  const CliRun uncalibrated = dtnn(kRun + "--machine " + empty.string());
  EXPECT_EQ(uncalibrated.status, 2) << uncalibrated.output;
  EXPECT_NE(uncalibrated.output.find("holds no calibration"), std::string::npos) << uncalibrated.output;
  fs::remove_all(empty);
  const CliRun train = dtnn("train --steps-per-epoch 1 --dataset synthetic");
  EXPECT_EQ(train.status, 2) << train.output;
  EXPECT_NE(train.output.find("simulation build"), std::string::npos) << train.output;
}

}  // namespace
