// SPDX-License-Identifier: Apache-2.0
// Machine folders for simulation (docs/simulation.md). A calibration (`dtnn calibrate`) runs real steps with
// StarPU's performance models calibrating into a folder: <dir>/starpu is StarPU's home (.starpu/sampling: the
// history of every codelet and shape, and the bus files with the SimGrid platform StarPU writes), under one host
// name, kMachineHost, whatever the machine's own name, so that a folder simulates anywhere; <dir>/machine.json
// says what was calibrated on what. A simulation (`dtnn simulate --machine DIR`, the DTNN_SIMGRID build) points
// StarPU at such a folder before its engine starts.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace dtnn::runtime {

// StarPU's STARPU_HOSTNAME in every machine folder: the suffix of its model files and bus files.
inline constexpr const char* kMachineHost = "dtnn-machine";

// True in the simulation build (DTNN_SIMGRID: StarPU with SimGrid, codelets never run).
[[nodiscard]] constexpr bool simulated() {
#ifdef DTNN_SIMGRID
  return true;
#else
  return false;
#endif
}

// The processor as /proc/cpuinfo names it ("AMD EPYC 7B13"), or "unknown".
[[nodiscard]] std::string cpu_model_name();

// Points the next Engine at a machine folder (sets STARPU_HOME and STARPU_HOSTNAME for the process). creating 1
// makes the folder (calibration); 0 requires it to hold a calibration, else throws InvalidArgument naming the
// folder and what is missing (--machine).
void use_machine_folder(const std::filesystem::path& dir, int creating);

// The CPU hosts of a machine folder's SimGrid platform: the most CPU workers a simulation on it can start.
[[nodiscard]] int machine_cpus(const std::filesystem::path& dir);

// <dir>/machine.json, or an empty object when there is none.
[[nodiscard]] nlohmann::json read_machine_file(const std::filesystem::path& dir);
// Writes <dir>/machine.json (atomically).
void write_machine_file(const std::filesystem::path& dir, const nlohmann::json& doc);

// A machine we do not have, described relative to a calibrated one (docs/simulation.md): CPU cores and their
// speed (a task takes its calibrated time divided by cpu_speed). 0 cpus: the calibrated machine's own.
struct TargetMachine {
  int cpus = 0;
  double cpu_speed = 1.0;
};

// Writes into `out` (created) a machine folder for `target` derived from the calibrated folder `calibrated`: its
// performance models with every duration divided by cpu_speed (means, deviations and sums; squares by its
// square), and a SimGrid platform of `cpus` CPU hosts in StarPU's format. Throws InvalidArgument for cpus < 0 or
// above STARPU_MAXCPUS, or a speed <= 0; DataError naming a file that cannot be read or written.
void derive_machine_folder(const std::filesystem::path& calibrated, const std::filesystem::path& out,
                           const TargetMachine& target);

// SimGrid's clock in a simulation, the steady clock otherwise: starpu_timing_now(), microseconds.
[[nodiscard]] double now_us();

}  // namespace dtnn::runtime
