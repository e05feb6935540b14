// SPDX-License-Identifier: Apache-2.0
#include "runtime/machine.hpp"

#include <starpu.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <regex>
#include <sstream>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "runtime/machine_archive.hpp"
#include "runtime/text_file.hpp"

namespace dtnn::runtime {
namespace {

namespace fs = std::filesystem;

fs::path sampling(const fs::path& dir) { return dir / "starpu" / ".starpu" / "sampling"; }

// What a calibrated folder lacks for a simulation ("": nothing).
std::string missing_calibration(const fs::path& dir) {
  const fs::path platform = sampling(dir) / "bus" / fmt::format("{}.platform.v4.xml", kMachineHost);
  if (fs::exists(platform) && fs::is_directory(sampling(dir) / "codelets")) return "";
  return fmt::format("{} and {}", platform.lexically_relative(dir).string(),
                     (sampling(dir) / "codelets").lexically_relative(dir).string());
}

}  // namespace

MachineFolder::MachineFolder(fs::path path, fs::path dir, fs::path temporary)
    : path_(std::move(path)), dir_(std::move(dir)), temporary_(std::move(temporary)) {}

MachineFolder::MachineFolder(MachineFolder&& other) noexcept
    : path_(std::move(other.path_)), dir_(std::move(other.dir_)), temporary_(std::move(other.temporary_)) {
  other.temporary_.clear();
}

MachineFolder::~MachineFolder() {
  std::error_code ignored;
  if (!temporary_.empty()) fs::remove_all(temporary_, ignored);
}

namespace {

// A new private folder (mode 0700) for an archive's extraction.
fs::path private_folder(const fs::path& archive) {
  std::string name = (fs::temp_directory_path() / "dtnn-machine-XXXXXX").string();
  if (::mkdtemp(name.data()) == nullptr) {
    throw DataError(fmt::format("{}: cannot create a temporary folder to extract it into ({}): {}", archive.string(),
                                name, std::strerror(errno)));
  }
  return name;
}

}  // namespace

MachineFolder MachineFolder::open(const fs::path& path) {
  std::error_code error;
  const fs::file_status st = fs::status(path, error);
  if (fs::is_directory(st)) {
    const std::string missing = missing_calibration(path);
    if (!missing.empty()) {
      throw InvalidArgument(fmt::format("--machine: '{}' holds no calibration, expected {} in it (written by `dtnn "
                                        "calibrate --out {}`)",
                                        path.string(), missing, path.string()));
    }
    return MachineFolder(path, path, {});
  }
  if (!fs::is_regular_file(st)) {
    throw InvalidArgument(fmt::format("--machine: '{}' is not a folder or an archive, expected a machine folder or "
                                      "its archive (NAME.tar.xz) written by `dtnn calibrate --out`",
                                      path.string()));
  }
  const fs::path temporary = private_folder(path);
  MachineFolder folder(path, temporary, temporary);
  extract_machine_archive(path, temporary);
  const std::string missing = missing_calibration(temporary);
  if (!missing.empty()) {
    throw InvalidArgument(fmt::format("--machine: archive '{}' holds no calibration, expected {} in it (written by "
                                      "`dtnn calibrate --out {}`)",
                                      path.string(), missing, path.string()));
  }
  return folder;
}

MachineFolder MachineFolder::create(const fs::path& path) {
  std::error_code error;
  const fs::file_status st = fs::status(path, error);
  if (fs::is_directory(st) || (!fs::exists(st) && !is_machine_archive_name(path))) {
    return MachineFolder(path, path, {});
  }
  if (!is_machine_archive_name(path)) {
    throw InvalidArgument(fmt::format("--out: '{}' is a file, expected a folder or an archive named .tar.xz, .txz, "
                                      ".tar.gz, .tgz or .tar",
                                      path.string()));
  }
  // Past here: an archive's name, of an archive to begin or of a file that must be one.
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    throw InvalidArgument(fmt::format("--out: '{}' is neither a folder nor a file, expected a folder or an archive "
                                      "(.tar.xz, .txz, .tar.gz, .tgz or .tar)",
                                      path.string()));
  }
  const fs::path temporary = private_folder(path);
  MachineFolder folder(path, temporary, temporary);
  if (fs::exists(st)) extract_machine_archive(path, temporary);
  return folder;
}

void MachineFolder::save() const {
  if (archived()) pack_machine_archive(dir_, path_);
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

void use_machine_folder(const fs::path& dir, MachineUse use) {
  std::error_code error;
  if (use == MachineUse::kCalibrate) {
    fs::create_directories(dir / "starpu", error);
    if (error) {
      throw InvalidArgument(fmt::format("--out: folder '{}' cannot be created: {}", dir.string(), error.message()));
    }
  } else if (!fs::is_directory(dir)) {
    throw InvalidArgument(fmt::format("--machine: '{}' is not a folder, expected a machine folder written by "
                                      "`dtnn calibrate --out`",
                                      dir.string()));
  } else if (const std::string missing = missing_calibration(dir); !missing.empty()) {
    throw InvalidArgument(fmt::format("--machine: '{}' holds no calibration, expected {} in it (written by `dtnn "
                                      "calibrate --out {}`)",
                                      dir.string(), missing, dir.string()));
  }
  const fs::path home = fs::absolute(dir / "starpu", error);
  setenv("STARPU_HOME", home.c_str(), 1);
  setenv("STARPU_HOSTNAME", kMachineHost, 1);
}

namespace {

int count_hosts(const fs::path& dir, const std::string& kind) {
  std::ifstream in(sampling(dir) / "bus" / fmt::format("{}.platform.v4.xml", kMachineHost));
  const std::string tag = "<host id=\"" + kind;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.find(tag) != std::string::npos) ++n;
  }
  return n;
}

}  // namespace

int machine_cpus(const fs::path& dir) { return count_hosts(dir, "CPU"); }
int machine_gpus(const fs::path& dir) { return count_hosts(dir, "CUDA"); }

namespace {

// The fields of machine.json that dtnn reads back (app/simulate.cpp, app/calibrate.cpp) have the types it reads them
// as; the rest is what calibrate records for people. DataError naming the file and the field otherwise, rather than
// nlohmann::json's type_error, which names neither.
void check_machine_file(const fs::path& file, const nlohmann::json& doc) {
  const auto fail = [&](const std::string& field, const char* expected, const nlohmann::json& got) {
    throw DataError(fmt::format("{}: {}: expected {}, got {}, not a machine description", file.string(), field,
                                expected, got.type_name()));
  };
  if (!doc.is_object()) fail("the document", "an object", doc);
  if (doc.contains("cpu") && !doc["cpu"].is_string()) fail("cpu", "a string", doc["cpu"]);
  if (!doc.contains("calibrations")) return;
  const nlohmann::json& rows = doc["calibrations"];
  if (!rows.is_array()) fail("calibrations", "an array", rows);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& row = rows[i];
    const std::string where = fmt::format("calibrations[{}]", i);
    if (!row.is_object()) fail(where, "an object", row);
    for (const char* key : {"model", "conv", "fusion", "device"}) {
      if (row.contains(key) && !row[key].is_string()) fail(where + "." + key, "a string", row[key]);
    }
    for (const char* key : {"batch_size", "tiles"}) {
      if (row.contains(key) && !row[key].is_number_integer()) fail(where + "." + key, "an integer", row[key]);
    }
    if (row.contains("cpu_task_overhead_us") && !row["cpu_task_overhead_us"].is_number()) {
      fail(where + ".cpu_task_overhead_us", "a number", row["cpu_task_overhead_us"]);
    }
  }
}

}  // namespace

nlohmann::json read_machine_file(const fs::path& dir) {
  const fs::path file = dir / "machine.json";
  std::ifstream in(file);
  if (!in) return nlohmann::json::object();
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}: not a machine description ({})", file.string(), e.what()));
  }
  check_machine_file(file, doc);
  return doc;
}

void write_machine_file(const fs::path& dir, const nlohmann::json& doc) {
  write_text_file(dir / "machine.json", doc.dump(2) + "\n", "machine description");
}

namespace {

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw DataError(fmt::format("{}: cannot be read", file.string()));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A field of a machine folder's file that must be a number, whole; DataError naming the file, where in it (a line, a
// link) and what the field is.
double number_field(const fs::path& file, const std::string& where, const std::string& field, const char* what) {
  double value = 0.0;
  const char* end = field.data() + field.size();
  const auto [stop, error] = std::from_chars(field.data(), end, value);
  if (error != std::errc{} || stop != end) {
    throw DataError(fmt::format("{}: {}: {} '{}', expected a number{}", file.string(), where, what, field,
                                error == std::errc::result_out_of_range ? " within a double's range" : ""));
  }
  return value;
}

// A history entry of a StarPU 1.3 model file (perfmodel_history.c, dump_history_entry): footprint, size, flops,
// mean (us), deviation, sum, sum of squares, samples. The entries follow the "# Model for <arch>_impl<n>" line of
// their architecture (cpu0, cuda0, ...): CPU entries are divided by cpu_speed, CUDA ones by gpu_speed.
std::string scale_model(const fs::path& file, double cpu_speed, double gpu_speed) {
  static const std::regex entry(R"(^([0-9a-f]{8})\t(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)\s*$)");
  std::istringstream in(read_text(file));
  std::string out, line;
  std::smatch m;
  double speed = 1.0;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.rfind("# Model for ", 0) == 0) {
      speed = line.compare(12, 4, "cuda") == 0 ? gpu_speed : line.compare(12, 3, "cpu") == 0 ? cpu_speed : 1.0;
    } else if (speed != 1.0 && std::regex_match(line, m, entry)) {
      const std::string where = fmt::format("line {}", n);
      const double mean = number_field(file, where, m[4], "mean") / speed;
      const double dev = number_field(file, where, m[5], "deviation") / speed;
      const double sum = number_field(file, where, m[6], "sum") / speed;
      const double sum2 = number_field(file, where, m[7], "sum of squares") / (speed * speed);
      line = fmt::format("{}\t{:<15}\t{:<15}\t{:<15e}\t{:<15e}\t{:<15e}\t{:<15e}\t{}", m[1].str(), m[2].str(), m[3].str(),
                         mean, dev, sum, sum2, m[8].str());
    }
    out += line + "\n";
  }
  return out;
}

// What a derived platform copies of the calibrated GPU 0: its memory, and its link each way (bandwidth in B/s
// and latency in s as the platform gives them; MB/s and us as StarPU's bandwidth and latency files give them,
// which its schedulers read for their transfer predictions).
struct GpuLink {
  std::string memsize;
  double down_bps = 0.0, up_bps = 0.0, down_s = 0.0, up_s = 0.0;      // RAM-CUDA0, CUDA0-RAM in the platform
  double down_mbps = 0.0, up_mbps = 0.0, down_us = 0.0, up_us = 0.0;  // [0][1], [1][0] of the bus files
};

// The first two values of the first two rows of a bus matrix file (nodes 0: RAM and 1: CUDA0).
std::pair<double, double> ram_gpu_pair(const fs::path& file) {
  std::istringstream in(read_text(file));
  std::string line;
  std::vector<std::vector<double>> rows;
  while (rows.size() < 2 && std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::vector<double> row;
    std::string v;
    while (row.size() < 2 && fields >> v) row.push_back(std::strtod(v.c_str(), nullptr));
    rows.push_back(row);
  }
  if (rows.size() < 2 || rows[0].size() < 2 || rows[1].size() < 2 || !(rows[0][1] > 0.0) || !(rows[1][0] > 0.0)) {
    throw DataError(fmt::format("{}: no host-GPU 0 values in its first two rows, expected a GPU calibration's file",
                                file.string()));
  }
  return {rows[0][1], rows[1][0]};
}

GpuLink calibrated_gpu(const fs::path& dir) {
  const fs::path bus = sampling(dir) / "bus";
  const fs::path platform = bus / fmt::format("{}.platform.v4.xml", kMachineHost);
  const std::string xml = read_text(platform);
  GpuLink g;
  std::smatch m;
  static const std::regex memsize(R"re(<host id="CUDA0"[^>]*>\s*<prop id="memsize" value="(\d+)")re");
  if (!std::regex_search(xml, m, memsize)) {
    throw DataError(fmt::format("{}: no CUDA0 host with a memsize, expected the platform of a GPU calibration",
                                platform.string()));
  }
  g.memsize = m[1];
  const auto link = [&](const std::string& id, double& bps, double& s) {
    const std::regex re("<link id=\"" + id + R"re(" bandwidth="([0-9.e+]+)Bps" latency="([0-9.e+-]+)s")re");
    if (!std::regex_search(xml, m, re)) {
      throw DataError(fmt::format("{}: no link {}, expected the platform of a GPU calibration", platform.string(), id));
    }
    bps = number_field(platform, "link " + id, m[1], "bandwidth");
    s = number_field(platform, "link " + id, m[2], "latency");
  };
  link("RAM-CUDA0", g.down_bps, g.down_s);
  link("CUDA0-RAM", g.up_bps, g.up_s);
  std::tie(g.down_mbps, g.up_mbps) = ram_gpu_pair(bus / fmt::format("{}.bandwidth", kMachineHost));
  std::tie(g.down_us, g.up_us) = ram_gpu_pair(bus / fmt::format("{}.latency", kMachineHost));
  return g;
}

// StarPU's own platform format (perfmodel_bus.c, write_bus_platform_file_content): a host per CPU core and per GPU,
// each GPU with its own link each way to the host's memory (RAM).
std::string platform(int cpus, int gpus, const GpuLink& g) {
  std::string s =
      "<?xml version='1.0'?>\n"
      "<!DOCTYPE platform SYSTEM 'http://simgrid.gforge.inria.fr/simgrid/simgrid.dtd'>\n"
      " <platform version=\"4\">\n"
      " <config id=\"General\">\n"
      "   <prop id=\"network/TCP-gamma\" value=\"-1\"></prop>\n"
      "   <prop id=\"network/latency-factor\" value=\"1\"></prop>\n"
      "   <prop id=\"network/bandwidth-factor\" value=\"1\"></prop>\n"
      "   <prop id=\"network/crosstraffic\" value=\"0\"></prop>\n"
      "   <prop id=\"network/weight-S\" value=\"0.0\"></prop>\n"
      " </config>\n"
      " <AS  id=\"AS0\"  routing=\"Full\">\n"
      "   <host id=\"MAIN\" speed=\"1f\"/>\n";
  for (int i = 0; i < cpus; ++i) s += fmt::format("   <host id=\"CPU{}\" speed=\"2000000000f\"/>\n", i);
  for (int i = 0; i < gpus; ++i) {
    s += fmt::format("   <host id=\"CUDA{}\" speed=\"2000000000f\">\n     <prop id=\"memsize\" value=\"{}\"/>\n"
                     "     <prop id=\"memcpy_peer\" value=\"0\"/>\n   </host>\n",
                     i, g.memsize);
  }
  s += "\n   <host id=\"RAM\" speed=\"1f\"/>\n\n   <link id=\"Host\" bandwidth=\"0.000000Bps\" latency=\"0.000000s\"/>\n";
  for (int i = 0; i < gpus; ++i) {
    s += fmt::format("   <link id=\"RAM-CUDA{0}\" bandwidth=\"{1:f}Bps\" latency=\"{2:.9f}s\"/>\n"
                     "   <link id=\"CUDA{0}-RAM\" bandwidth=\"{3:f}Bps\" latency=\"{4:.9f}s\"/>\n",
                     i, g.down_bps, g.down_s, g.up_bps, g.up_s);
  }
  for (int i = 0; i < gpus; ++i) {
    s += fmt::format("   <route src=\"CUDA{0}\" dst=\"RAM\" symmetrical=\"NO\"><link_ctn id=\"CUDA{0}-RAM\"/></route>\n"
                     "   <route src=\"RAM\" dst=\"CUDA{0}\" symmetrical=\"NO\"><link_ctn id=\"RAM-CUDA{0}\"/></route>\n",
                     i);
  }
  s += "\n </AS>\n </platform>\n";
  return s;
}

// StarPU's bandwidth (MB/s) or latency (us) file for memory nodes 0 (RAM) and 1..gpus: host to GPU `down`, GPU to
// host `up`, GPU to GPU through the host (bandwidths in series; latencies added).
std::string bus_matrix(int gpus, double down, double up, bool bandwidth) {
  std::string s = "#";
  for (int j = 0; j <= gpus; ++j) s += fmt::format(" to {}\t\t", j);
  s += "\n";
  for (int i = 0; i <= gpus; ++i) {
    for (int j = 0; j <= gpus; ++j) {
      const double v = i == j ? 0.0 : i == 0 ? down : j == 0 ? up : bandwidth ? 1.0 / (1.0 / up + 1.0 / down) : up + down;
      s += fmt::format("{:e}{}", v, j == gpus ? "\n" : "\t");
    }
  }
  return s;
}

}  // namespace

void derive_machine_folder(const fs::path& calibrated, const fs::path& out, const TargetMachine& target) {
  if (target.cpus < 0 || target.cpus > STARPU_MAXCPUS) {
    throw InvalidArgument(fmt::format("--cpus {}, expected 1 to {} (STARPU_MAXCPUS)", target.cpus, STARPU_MAXCPUS));
  }
  if (target.gpus < 0 || target.gpus > STARPU_MAXCUDADEVS) {
    throw InvalidArgument(fmt::format("--gpus {}, expected 0 to {} (STARPU_MAXCUDADEVS of this StarPU)", target.gpus,
                                      STARPU_MAXCUDADEVS));
  }
  if (!(target.cpu_speed > 0.0)) {
    throw InvalidArgument(fmt::format("--cpu-speed {}, expected > 0 (1: the calibrated cores)", target.cpu_speed));
  }
  if (!(target.gpu_speed > 0.0)) {
    throw InvalidArgument(fmt::format("--gpu-speed {}, expected > 0 (1: the calibrated GPU)", target.gpu_speed));
  }
  const bool bus = target.bus_gbps > 0.0 || target.bus_latency_us >= 0.0;
  if (target.bus_gbps < 0.0 || !std::isfinite(target.bus_gbps) || !std::isfinite(target.bus_latency_us)) {
    throw InvalidArgument(fmt::format("--bus-gbps {} --bus-latency-us {}, expected a finite bandwidth > 0 (or 0: the "
                                      "calibrated GPU's) and a finite latency",
                                      target.bus_gbps, target.bus_latency_us));
  }
  use_machine_folder(calibrated, MachineUse::kSimulate);
  const int calibrated_gpus = machine_gpus(calibrated);
  if (bus && calibrated_gpus == 0) {
    throw InvalidArgument(fmt::format("--bus-gbps/--bus-latency-us: machine folder '{}' has no GPU calibration, "
                                      "expected one written by `dtnn calibrate --device cuda` (the bus is the GPUs' "
                                      "link to the host)",
                                      calibrated.string()));
  }
  if (target.gpus > 0 && calibrated_gpus == 0) {
    throw InvalidArgument(fmt::format("--gpus {}: machine folder '{}' has no GPU calibration, expected one written by "
                                      "`dtnn calibrate --device cuda` (the CUDA build on a GPU machine)",
                                      target.gpus, calibrated.string()));
  }
  std::error_code error;
  fs::remove_all(out, error);
  fs::create_directories(out, error);
  fs::copy(calibrated / "starpu", out / "starpu", fs::copy_options::recursive, error);
  if (error) {
    throw DataError(fmt::format("{}: cannot copy the calibration into it ({})", out.string(), error.message()));
  }
  if (target.cpu_speed != 1.0 || target.gpu_speed != 1.0) {
    for (const auto& f : fs::recursive_directory_iterator(sampling(out) / "codelets")) {
      if (f.is_regular_file()) {
        // Read from the calibrated folder, which a message should name, rather than from its copy.
        const fs::path source = calibrated / f.path().lexically_relative(out);
        write_text_file(f.path(), scale_model(source, target.cpu_speed, target.gpu_speed), "model");
      }
    }
  }
  const int cpus = target.cpus > 0 ? target.cpus : machine_cpus(calibrated);
  const int gpus = target.gpus > 0 ? target.gpus : calibrated_gpus;
  if (target.cpus > 0 || target.gpus > 0 || bus) {
    const fs::path bus_dir = sampling(out) / "bus";
    GpuLink g = gpus > 0 ? calibrated_gpu(calibrated) : GpuLink{};
    // The target's bus, both ways: in the platform (what SimGrid moves the data over) and in StarPU's files (what
    // the dm* schedulers predict the transfers with).
    if (target.bus_gbps > 0.0) {
      g.down_bps = g.up_bps = target.bus_gbps * 1e9 / 8.0;
      g.down_mbps = g.up_mbps = target.bus_gbps * 1e3 / 8.0;
    }
    if (target.bus_latency_us >= 0.0) {
      g.down_s = g.up_s = target.bus_latency_us * 1e-6;
      g.down_us = g.up_us = target.bus_latency_us;
    }
    write_text_file(bus_dir / fmt::format("{}.platform.v4.xml", kMachineHost), platform(cpus, gpus, g), "platform");
    if (gpus > 0) {
      write_text_file(bus_dir / fmt::format("{}.bandwidth", kMachineHost),
                      bus_matrix(gpus, g.down_mbps, g.up_mbps, true), "bus bandwidths");
      write_text_file(bus_dir / fmt::format("{}.latency", kMachineHost), bus_matrix(gpus, g.down_us, g.up_us, false),
                      "bus latencies");
    }
  }
  nlohmann::json doc = read_machine_file(calibrated);
  doc["derived_from"] = fs::absolute(calibrated).string();
  doc["target"] = {{"cpus", cpus}, {"cpu_speed", target.cpu_speed}, {"gpus", gpus}, {"gpu_speed", target.gpu_speed},
                   {"bus_gbps", target.bus_gbps}, {"bus_latency_us", target.bus_latency_us}};
  write_machine_file(out, doc);
}

double now_us() { return starpu_timing_now(); }

}  // namespace dtnn::runtime
