// SPDX-License-Identifier: Apache-2.0
// The files of a machine folder that dtnn reads itself when `dtnn simulate` runs on it (runtime/machine.cpp):
// machine.json (read_machine_file, and what the program reads of it), the SimGrid platform (its hosts counted by
// machine_cpus and machine_gpus, its GPU 0 read for a derived machine), the bus bandwidth and latency files and the
// performance models (scaled for a derived machine: derive_machine_folder). An input is one byte choosing the file, then that file's bytes; the
// other files are those of a small valid GPU calibration (below), so that each reader is reached.
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

#include "core/errors.hpp"
#include "fuzz/fuzz_input.hpp"
#include "runtime/machine.hpp"

namespace {

namespace fs = std::filesystem;

const char* const kMachineJson =
    R"({"cpu": "AMD EPYC", "calibrations": [{"model": "simplecnn", "batch_size": 64, "tiles": 2, "conv": "convgemm",
"fusion": "on", "device": "all", "cpu_task_overhead_us": 12.5}]}
)";

const char* const kPlatform = R"(<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM 'http://simgrid.gforge.inria.fr/simgrid/simgrid.dtd'>
 <platform version="4">
 <AS  id="AS0"  routing="Full">
   <host id="MAIN" speed="1f"/>
   <host id="CPU0" speed="2000000000f"/>
   <host id="CPU1" speed="2000000000f"/>
   <host id="CUDA0" speed="2000000000f">
     <prop id="memsize" value="150109880320"/>
     <prop id="memcpy_peer" value="1"/>
   </host>
   <host id="RAM" speed="1f"/>
   <link id="Host" bandwidth="54702450739.399391Bps" latency="0.000000s"/>
   <link id="RAM-CUDA0" bandwidth="53848869358.212906Bps" latency="0.000007s"/>
   <link id="CUDA0-RAM" bandwidth="54702450739.399391Bps" latency="0.000007s"/>
   <route src="CUDA0" dst="RAM" symmetrical="NO"><link_ctn id="CUDA0-RAM"/></route>
   <route src="RAM" dst="CUDA0" symmetrical="NO"><link_ctn id="RAM-CUDA0"/></route>
 </AS>
 </platform>
)";

const char* const kBandwidth =
    "# to 0\t\tto 1\t\t\n0.000000e+00\t5.384887e+04\n5.470245e+04\t0.000000e+00\n";
const char* const kLatency = "# to 0\t\tto 1\t\t\n0.000000e+00\t6.549063e+00\n7.241500e+00\t0.000000e+00\n";

const char* const kModel =
    "##################\n# Performance Model Version\n45\n\n####################\n# COMBs\n# number of combinations\n2\n"
    "####################\n# COMB_0\n# number of types devices\n1\n####################\n# DEV_0\n# device type (CPU - "
    "0, CUDA - 1, OPENCL - 2, MIC - 3, MPI_MS - 5)\n0\n####################\n# DEV_0\n# device id \n0\n"
    "####################\n# DEV_0\n# number of cores \n1\n##########\n# number of implementations\n1\n#####\n"
    "# Model for cpu0_impl0 (Comb0)\n# number of entries\n1\n# sumlnx\tsumlnx2\t\tsumlny\t\tsumlnxlny\talpha\t\tbeta"
    "\t\tn\tminx\t\tmaxx\n0.000000e+00\t0.000000e+00\t0.000000e+00\t0.000000e+00\tnan\tnan\t0\t0\t0\n# a\t\tb\t\tc\n"
    "nan\tnan\tnan\n# not multiple-regression-base\n0\n# hash\t\tsize\t\tflops\t\tmean (us)\tdev (us)\tsum\t\tsum2\t"
    "\tn\n5f2d3e1a\t393216         \t0.000000e+00   \t1.523411e+02   \t1.201520e+01   \t3.656186e+03   \t"
    "5.605048e+05   \t24\n\n####################\n# COMB_1\n# number of types devices\n1\n####################\n"
    "# DEV_0\n# device type (CPU - 0, CUDA - 1, OPENCL - 2, MIC - 3, MPI_MS - 5)\n1\n####################\n# DEV_0\n"
    "# device id \n0\n####################\n# DEV_0\n# number of cores \n1\n##########\n# number of implementations\n1\n"
    "#####\n# Model for cuda0_impl0 (Comb1)\n# number of entries\n1\n# hash\t\tsize\t\tflops\t\tmean (us)\tdev (us)"
    "\tsum\t\tsum2\t\tn\n5f2d3e1a\t393216         \t0.000000e+00   \t1.200000e+01   \t1.000000e+00   \t"
    "2.880000e+02   \t3.480000e+03   \t24\n";

// The machine folder's files, in the order of the input's first byte.
struct File {
  const char* path;
  const char* text;
};
const std::array<File, 5> kFiles = {{
    {"machine.json", kMachineJson},
    {"starpu/.starpu/sampling/bus/dtnn-machine.platform.v4.xml", kPlatform},
    {"starpu/.starpu/sampling/bus/dtnn-machine.bandwidth", kBandwidth},
    {"starpu/.starpu/sampling/bus/dtnn-machine.latency", kLatency},
    {"starpu/.starpu/sampling/codelets/45/dense_fwd.dtnn-machine", kModel},
}};

// What dtnn simulate and dtnn calibrate read of a machine description read_machine_file accepted, as they read it
// (app/simulate.cpp: simulated_conv, calibrated_overhead_us, prepare_simulation; app/calibrate.cpp appends a
// calibration): none of it may throw.
void read_as_the_program_does(nlohmann::json doc) {
  (void)doc.value("cpu", std::string("?"));
  for (const auto& c : doc.value("calibrations", nlohmann::json::array())) {
    (void)c.value("model", "");
    (void)c.value("batch_size", 0);
    (void)c.value("tiles", 0);
    (void)c.value("fusion", "");
    (void)c.value("conv", "");
    (void)c.value("device", std::string("cpu"));
    if (c.contains("cpu_task_overhead_us")) (void)c.at("cpu_task_overhead_us").get<double>();
  }
  doc["calibrations"].push_back(nlohmann::json::object());
}

void write_text(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  dtnn::fuzz::write_file(file, reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dtnn;
  if (size == 0) return 0;
  const fs::path dir = fuzz::scratch() / "machine";
  const fs::path derived = fuzz::scratch() / "derived";
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  const std::size_t chosen = data[0] % kFiles.size();
  for (std::size_t i = 0; i < kFiles.size(); ++i) {
    if (i == chosen) {
      fs::create_directories((dir / kFiles[i].path).parent_path());
      fuzz::write_file(dir / kFiles[i].path, data + 1, size - 1);
    } else {
      write_text(dir / kFiles[i].path, kFiles[i].text);
    }
  }
  const int cpus = runtime::machine_cpus(dir);
  const int gpus = runtime::machine_gpus(dir);
  fuzz::require(cpus >= 0 && gpus >= 0, "machine folder: host counts >= 0");
  try {
    read_as_the_program_does(runtime::read_machine_file(dir));
  } catch (const DataError&) {
  }
  // A machine of 3 cores twice as fast and 2 GPUs three times as fast: every file above is read.
  runtime::TargetMachine target;
  target.cpus = 3;
  target.cpu_speed = 2.0;
  target.gpus = 2;
  target.gpu_speed = 3.0;
  try {
    runtime::derive_machine_folder(dir, derived, target);
    fuzz::require(runtime::machine_cpus(derived) == 3 && runtime::machine_gpus(derived) == 2,
                  "machine folder: a derived machine has the hosts asked for");
  } catch (const Error&) {
  }
  fs::remove_all(derived, ignored);
  return 0;
}
