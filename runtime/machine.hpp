// SPDX-License-Identifier: Apache-2.0
// Machine folders for simulation (docs/simulation.md). A calibration (`dtnn calibrate`) runs real steps with
// StarPU's performance models calibrating into a folder: <dir>/starpu is StarPU's home (.starpu/sampling: the
// history of every codelet and shape, and the bus files with the SimGrid platform StarPU writes), under one host
// name, kMachineHost, whatever the machine's own name, so that a folder simulates anywhere; <dir>/machine.json
// says what was calibrated on what. A simulation (`dtnn simulate --machine DIR`, the DTNN_SIMGRID build) points
// StarPU at such a folder before its engine starts. Either command also takes the folder as one archive
// (MachineFolder).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/machine_archive.hpp"

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

// A machine folder as `dtnn calibrate --out` and `dtnn simulate --machine` take it: a folder, used in place, or an
// archive of one (machine.json and starpu/ at its top, as `dtnn calibrate --out NAME.tar.xz` writes it or
// `tar -C DIR -cJf NAME.tar.xz machine.json starpu` makes it), extracted into a private temporary folder that is
// removed with this object. An archive keeps a calibration (some 20-40 small files of StarPU's) in one file.
// Members of an archive are checked before anything is written: only the layout below (machine.json,
// starpu/.starpu/sampling/bus/<file>, starpu/.starpu/sampling/codelets/<version>/<file> and their folders; StarPU's
// empty debug folder), plain files and folders (no link, device or fifo), no absolute path or `..`, at most
// kMaxMachineMember bytes a file and kMaxMachineArchive in all; otherwise DataError naming the archive and the member.
class MachineFolder {
 public:
  // A calibrated machine to read (--machine): a folder, or a regular file that is an archive (.tar, .tar.gz,
  // .tar.xz, .tar.zst or .tar.bz2, whatever its name). InvalidArgument naming `path` when it is neither or holds no
  // calibration; DataError naming it when it is not an archive, is damaged or breaks the rules above.
  [[nodiscard]] static MachineFolder open(const std::filesystem::path& path);
  // A machine to calibrate into (--out): a folder (created where it is missing), or, for a name that
  // is_machine_archive_name accepts and that is not a folder, an archive: extracted where it exists (its models
  // accumulate, as a folder's do), else begun empty; save() packs it back.
  [[nodiscard]] static MachineFolder create(const std::filesystem::path& path);

  MachineFolder(MachineFolder&& other) noexcept;
  MachineFolder& operator=(MachineFolder&&) = delete;
  MachineFolder(const MachineFolder&) = delete;
  MachineFolder& operator=(const MachineFolder&) = delete;
  ~MachineFolder();

  // The folder itself: what use_machine_folder, read_machine_file and the others take.
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }
  // What the user named (the folder or the archive), for messages and reports.
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] bool archived() const { return !temporary_.empty(); }
  // An archive: packs dir() into path() (pack_machine_archive: a new file beside it, renamed into place). A folder:
  // nothing to do, StarPU and write_machine_file wrote into it.
  void save() const;

 private:
  MachineFolder(std::filesystem::path path, std::filesystem::path dir, std::filesystem::path temporary);
  std::filesystem::path path_;
  std::filesystem::path dir_;
  std::filesystem::path temporary_;  // the private folder an archive is extracted into (removed at the end)
};

// What the next Engine does with a machine folder: calibrate into it (it is created where missing), or simulate on
// it (it must hold a calibration).
enum class MachineUse { kCalibrate, kSimulate };
// Points the next Engine at a machine folder (sets STARPU_HOME and STARPU_HOSTNAME for the process). InvalidArgument
// naming the folder when it cannot be created (--out), or is no folder or lacks a calibration (--machine).
void use_machine_folder(const std::filesystem::path& dir, MachineUse use);

// The CPU hosts of a machine folder's SimGrid platform: the most CPU workers a simulation on it can start.
[[nodiscard]] int machine_cpus(const std::filesystem::path& dir);
// Its CUDA hosts (a calibration with `--device cuda|all` on a GPU machine has them; a CPU one has none).
[[nodiscard]] int machine_gpus(const std::filesystem::path& dir);

// <dir>/machine.json, or an empty object when there is none. DataError naming the file when it is not JSON, or when
// a field dtnn reads back has another type (an object at the top; cpu a string; calibrations an array of objects
// whose model, conv, fusion and device are strings, batch_size and tiles integers, cpu_task_overhead_us a number).
[[nodiscard]] nlohmann::json read_machine_file(const std::filesystem::path& dir);
// Writes <dir>/machine.json (atomically).
void write_machine_file(const std::filesystem::path& dir, const nlohmann::json& doc);

// A machine we do not have, described relative to a calibrated one (docs/simulation.md): CPU cores and their
// speed (a task on a CPU takes its calibrated time divided by cpu_speed), GPUs and theirs (a task on a GPU, its
// calibrated GPU time divided by gpu_speed). 0 cpus or gpus: the calibrated machine's own.
struct TargetMachine {
  int cpus = 0;
  double cpu_speed = 1.0;
  int gpus = 0;
  double gpu_speed = 1.0;
  double bus_gbps = 0.0;         // each GPU's link to the host, each way, Gb/s (0: the calibrated GPU 0's)
  double bus_latency_us = -1.0;  // its latency, us (negative: the calibrated GPU 0's)
};

// Writes into `out` (created) a machine folder for `target` derived from the calibrated folder `calibrated`: its
// performance models with every CPU duration divided by cpu_speed and every CUDA duration by gpu_speed (means,
// deviations and sums; squares by the square), and StarPU's SimGrid platform and bus files for `cpus` CPU hosts and
// `gpus` CUDA hosts. Every GPU is a copy of the calibrated GPU 0 (its memory, and its own PCIe link to the host
// with the calibrated bandwidth and latency each way, or bus_gbps and bus_latency_us where given); GPUs exchange data
// through host memory (no peer copies, no NVLink) and do not share the host's memory bandwidth. Throws
// InvalidArgument for cpus < 0 or above STARPU_MAXCPUS, gpus < 0 or above STARPU_MAXCUDADEVS, GPUs or a bus asked of
// a folder without a GPU calibration, a speed <= 0, or a bus bandwidth < 0 or not finite; DataError naming a file that cannot be read or written.
void derive_machine_folder(const std::filesystem::path& calibrated, const std::filesystem::path& out,
                           const TargetMachine& target);

// SimGrid's clock in a simulation, the steady clock otherwise: starpu_timing_now(), microseconds.
[[nodiscard]] double now_us();

}  // namespace dtnn::runtime
