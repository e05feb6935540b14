// SPDX-License-Identifier: Apache-2.0
#include "runtime/machine.hpp"

#include <starpu.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "runtime/text_file.hpp"

namespace dtnn::runtime {
namespace {

namespace fs = std::filesystem;

fs::path sampling(const fs::path& dir) { return dir / "starpu" / ".starpu" / "sampling"; }

}  // namespace

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

void use_machine_folder(const fs::path& dir, int creating) {
  std::error_code error;
  if (creating) {
    fs::create_directories(dir / "starpu", error);
    if (error) {
      throw InvalidArgument(fmt::format("--out: folder '{}' cannot be created: {}", dir.string(), error.message()));
    }
  } else {
    const fs::path platform = sampling(dir) / "bus" / fmt::format("{}.platform.v4.xml", kMachineHost);
    if (!fs::is_directory(dir)) {
      throw InvalidArgument(fmt::format("--machine: '{}' is not a folder, expected a machine folder written by "
                                        "`dtnn calibrate --out` (or `dtnn machine`)",
                                        dir.string()));
    }
    if (!fs::exists(platform) || !fs::is_directory(sampling(dir) / "codelets")) {
      throw InvalidArgument(fmt::format("--machine: '{}' holds no calibration, expected {} and {} (written by "
                                        "`dtnn calibrate --out {}`)",
                                        dir.string(), platform.string(), (sampling(dir) / "codelets").string(),
                                        dir.string()));
    }
  }
  const fs::path home = fs::absolute(dir / "starpu", error);
  setenv("STARPU_HOME", home.c_str(), 1);
  setenv("STARPU_HOSTNAME", kMachineHost, 1);
}

int machine_cpus(const fs::path& dir) {
  std::ifstream in(sampling(dir) / "bus" / fmt::format("{}.platform.v4.xml", kMachineHost));
  std::string line;
  int cpus = 0;
  while (std::getline(in, line)) {
    if (line.find("<host id=\"CPU") != std::string::npos) ++cpus;
  }
  return cpus;
}

nlohmann::json read_machine_file(const fs::path& dir) {
  std::ifstream in(dir / "machine.json");
  if (!in) return nlohmann::json::object();
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}: not a machine description ({})", (dir / "machine.json").string(), e.what()));
  }
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

// A history entry of a StarPU 1.3 model file (perfmodel_history.c, dump_history_entry): footprint, size, flops,
// mean (us), deviation, sum, sum of squares, samples.
std::string scale_model(const std::string& text, double speed) {
  static const std::regex entry(R"(^([0-9a-f]{8})\t(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)\s*$)");
  std::istringstream in(text);
  std::string out, line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, entry)) {
      const double mean = std::stod(m[4]) / speed, dev = std::stod(m[5]) / speed;
      const double sum = std::stod(m[6]) / speed, sum2 = std::stod(m[7]) / (speed * speed);
      char buf[256];
      std::snprintf(buf, sizeof(buf), "%s\t%-15s\t%-15s\t%-15e\t%-15e\t%-15e\t%-15e\t%s", m[1].str().c_str(),
                    m[2].str().c_str(), m[3].str().c_str(), mean, dev, sum, sum2, m[8].str().c_str());
      line = buf;
    }
    out += line + "\n";
  }
  return out;
}

// StarPU's own platform format (perfmodel_bus.c, write_bus_platform_file_content) for CPUs only.
std::string cpu_platform(int cpus) {
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
  s += "\n   <host id=\"RAM\" speed=\"1f\"/>\n\n   <link id=\"Host\" bandwidth=\"0.000000Bps\" latency=\"0.000000s\"/>\n\n"
       " </AS>\n </platform>\n";
  return s;
}

}  // namespace

void derive_machine_folder(const fs::path& calibrated, const fs::path& out, const TargetMachine& target) {
  if (target.cpus < 0 || target.cpus > STARPU_MAXCPUS) {
    throw InvalidArgument(fmt::format("--cpus {}, expected 1 to {} (STARPU_MAXCPUS)", target.cpus, STARPU_MAXCPUS));
  }
  if (!(target.cpu_speed > 0.0)) {
    throw InvalidArgument(fmt::format("--cpu-speed {}, expected > 0 (1: the calibrated cores)", target.cpu_speed));
  }
  use_machine_folder(calibrated, 0);
  std::error_code error;
  fs::remove_all(out, error);
  fs::create_directories(out, error);
  fs::copy(calibrated / "starpu", out / "starpu", fs::copy_options::recursive, error);
  if (error) {
    throw DataError(fmt::format("{}: cannot copy the calibration into it ({})", out.string(), error.message()));
  }
  if (target.cpu_speed != 1.0) {
    for (const auto& f : fs::recursive_directory_iterator(sampling(out) / "codelets")) {
      if (f.is_regular_file()) write_text_file(f.path(), scale_model(read_text(f.path()), target.cpu_speed), "model");
    }
  }
  if (target.cpus > 0) {
    const fs::path bus = sampling(out) / "bus";
    write_text_file(bus / fmt::format("{}.platform.v4.xml", kMachineHost), cpu_platform(target.cpus), "platform");
  }
  nlohmann::json doc = read_machine_file(calibrated);
  doc["derived_from"] = fs::absolute(calibrated).string();
  doc["target"] = {{"cpus", target.cpus}, {"cpu_speed", target.cpu_speed}};
  write_machine_file(out, doc);
}

double now_us() { return starpu_timing_now(); }

}  // namespace dtnn::runtime
