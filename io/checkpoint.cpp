// SPDX-License-Identifier: Apache-2.0
#include "io/checkpoint.hpp"

#include <signal.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "io/hdf5.hpp"
#include "core/errors.hpp"

namespace dtnn::io {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "dtnn-checkpoint";
constexpr const char* kBestName = "best.h5";
constexpr const char* kRngStates = "rng_states";
constexpr const char* kCrcAttribute = "crc32";

// Filters (compression in a file written by another tool) make the stored size differ from the logical one;
// deflate cannot shrink data by more than about 1032:1, so a larger claim is a damaged header.
constexpr std::int64_t kMaxCompressionRatio = 1100;

struct Section {
  const char* group;
  const char* what;  // singular, for messages
  std::vector<NamedArray> Checkpoint::*entries;
};

constexpr Section kSections[] = {
    {"parameters", "parameter", &Checkpoint::parameters},
    {"buffers", "buffer", &Checkpoint::buffers},
    {"optimizer_state", "optimizer state", &Checkpoint::optimizer_state},
};

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) {
    n *= d;
  }
  return n;
}

// CRC-32 of bytes, in pieces because zlib takes an unsigned int length.
std::uint32_t crc32_bytes(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  constexpr std::size_t kPiece = std::size_t{1} << 30;
  while (n > 0) {
    const std::size_t len = std::min(n, kPiece);
    crc = static_cast<std::uint32_t>(::crc32(crc, p, static_cast<uInt>(len)));
    p += len;
    n -= len;
  }
  return crc;
}

// Over the little-endian bytes the file stores, so that h5py's zlib.crc32(array.astype('<f4').tobytes())
// gives the same number on any machine.
std::uint32_t crc32_floats(std::span<const float> values) {
  std::uint32_t crc = static_cast<std::uint32_t>(::crc32(0L, Z_NULL, 0));
  if constexpr (std::endian::native == std::endian::little) {
    return crc32_bytes(crc, reinterpret_cast<const unsigned char*>(values.data()), values.size() * sizeof(float));
  } else {
    for (const float v : values) {
      const std::uint32_t swapped = __builtin_bswap32(std::bit_cast<std::uint32_t>(v));
      crc = crc32_bytes(crc, reinterpret_cast<const unsigned char*>(&swapped), sizeof(swapped));
    }
    return crc;
  }
}

std::uint32_t crc32_strings(const std::vector<std::string>& values) {
  std::uint32_t crc = static_cast<std::uint32_t>(::crc32(0L, Z_NULL, 0));
  const unsigned char nul = 0;
  for (const std::string& s : values) {
    crc = crc32_bytes(crc, reinterpret_cast<const unsigned char*>(s.data()), s.size());
    crc = crc32_bytes(crc, &nul, 1);
  }
  return crc;
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

void validate(const fs::path& file, const Checkpoint& c) {
  const std::string name = file.string();
  if (c.world_size < 1) {
    throw InvalidArgument(fmt::format("{}: world_size expected >= 1, got {}", name, c.world_size));
  }
  if (c.epoch < 0 || c.step < 0 || c.samples_seen < 0) {
    throw InvalidArgument(fmt::format("{}: epoch, step and samples_seen expected >= 0, got {}, {} and {}", name,
                                      c.epoch, c.step, c.samples_seen));
  }
  if (!c.rng_states.empty() && static_cast<int>(c.rng_states.size()) != c.world_size) {
    throw InvalidArgument(fmt::format("{}: rng_states expected none or one per rank ({}), got {}", name,
                                      c.world_size, c.rng_states.size()));
  }
  for (const Section& section : kSections) {
    std::set<std::string_view> seen;
    for (const NamedArray& a : c.*section.entries) {
      if (a.name.empty() || a.name.find('/') != std::string::npos || a.name == "." || a.name == "..") {
        throw InvalidArgument(fmt::format("{}: {} name '{}', expected a non-empty name without '/'", name,
                                          section.what, a.name));
      }
      if (!seen.insert(a.name).second) {
        throw InvalidArgument(fmt::format("{}: {} {} appears twice, expected unique names", name, section.what,
                                          a.name));
      }
      if (std::any_of(a.shape.begin(), a.shape.end(), [](std::int64_t d) { return d < 0; }) ||
          element_count(a.shape) != static_cast<std::int64_t>(a.data.size())) {
        throw InvalidArgument(fmt::format("{}: {} {}: shape {} needs {} values, got {}", name, section.what,
                                          a.name, h5::shape_to_string(a.shape), element_count(a.shape),
                                          a.data.size()));
      }
    }
  }
}

void write_checkpoint(h5::File& f, const Checkpoint& c, std::optional<double> metric) {
  f.set_string("format", kFormat);
  f.set_int("format_version", kCheckpointFormatVersion);
  f.set_string("model_name", c.model_name);
  f.set_string("model_options", c.model_options);
  f.set_int("world_size", c.world_size);
  f.set_int("epoch", c.epoch);
  f.set_int("step", c.step);
  f.set_int("samples_seen", c.samples_seen);
  f.set_string("optimizer", c.optimizer);
  f.set_string("schedule", c.schedule);
  f.set_string("created", c.created.empty() ? utc_now() : c.created);
  if (metric) {
    f.set_double("metric", *metric);
  }
  for (const Section& section : kSections) {
    const h5::Group group = f.create_group(section.group);
    for (const NamedArray& a : c.*section.entries) {
      const h5::Dataset d = group.create_dataset(a.name, h5::DType::kFloat32, a.shape);
      d.write(std::span<const float>(a.data));
      d.set_int(kCrcAttribute, crc32_floats(a.data));
    }
  }
  const h5::Dataset rng = f.create_strings(kRngStates, c.rng_states);
  rng.set_int(kCrcAttribute, crc32_strings(c.rng_states));
}

void check_crc(const h5::Object& object, std::uint32_t actual) {
  const std::int64_t stored = object.get_int(kCrcAttribute);
  if (stored != static_cast<std::int64_t>(actual)) {
    object.fail(fmt::format("checksum mismatch, the data is corrupt: crc32 expected {:#010x}, got {:#010x}",
                            static_cast<std::uint64_t>(stored), actual));
  }
}

NamedArray read_entry(const h5::Group& group, const std::string& name) {
  if (!group.contains_dataset(name)) {
    group.fail(fmt::format("{}/{}: expected a dataset, got a group or link", group.path(), name));
  }
  const h5::Dataset d = group.open_dataset(name);
  const h5::DType type = d.dtype();
  if (type != h5::DType::kFloat32) {
    d.fail(fmt::format("dtype expected float32, got {}", h5::to_string(type)));
  }
  NamedArray a;
  a.name = name;
  a.shape = d.shape();
  const std::int64_t n = element_count(a.shape);
  const std::int64_t bytes = n * static_cast<std::int64_t>(sizeof(float));
  const std::int64_t stored = d.storage_bytes();
  const bool plausible = d.filter_count() == 0 ? stored == bytes : bytes <= stored * kMaxCompressionRatio + (1 << 20);
  if (!plausible) {
    d.fail(fmt::format("shape {} needs {} bytes, the file holds {}", h5::shape_to_string(a.shape), bytes, stored));
  }
  a.data.resize(static_cast<std::size_t>(n));
  d.read(std::span<float>(a.data));
  check_crc(d, crc32_floats(a.data));
  return a;
}

std::string problem_list(const std::vector<std::string>& problems) {
  std::string out;
  for (const std::string& p : problems) {
    out += "\n  " + p;
  }
  return out;
}

// ---- checkpoint directories ----

struct CheckpointName {
  std::int64_t epoch = 0;
  std::int64_t step = 0;
};

bool parse_number(std::string_view& text, std::string_view prefix, std::int64_t& value) {
  if (text.substr(0, prefix.size()) != prefix) {
    return false;
  }
  text.remove_prefix(prefix.size());
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end == text.data()) {
    return false;
  }
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  return true;
}

std::optional<CheckpointName> parse_checkpoint_name(std::string_view name) {
  CheckpointName out;
  if (!parse_number(name, "ckpt-epoch", out.epoch) || !parse_number(name, "-step", out.step) || name != ".h5") {
    return std::nullopt;
  }
  return out;
}

std::string checkpoint_file_name(std::int64_t epoch, std::int64_t step) {
  return fmt::format("ckpt-epoch{:04}-step{:06}.h5", epoch, step);
}

// ckpt-*.h5 files of dir, oldest first by (epoch, step).
std::vector<fs::path> list_checkpoints(const fs::path& dir) {
  std::vector<std::pair<CheckpointName, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (const auto parsed = parse_checkpoint_name(entry.path().filename().string())) {
      found.emplace_back(*parsed, entry.path());
    }
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return std::pair(a.first.epoch, a.first.step) < std::pair(b.first.epoch, b.first.step);
  });
  std::vector<fs::path> out;
  for (auto& f : found) {
    out.push_back(std::move(f.second));
  }
  return out;
}

std::optional<double> stored_metric(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    return std::nullopt;
  }
  try {
    const h5::File f = h5::File::open(file, h5::FileMode::kReadOnly);
    if (!f.has_attribute("metric")) {
      return std::nullopt;
    }
    return f.get_double("metric");
  } catch (const DataError&) {
    // A damaged best.h5 is replaced by the next candidate rather than blocking training.
    return std::nullopt;
  }
}

bool improves(double metric, std::optional<double> best, MetricGoal goal) {
  if (std::isnan(metric)) {
    return false;
  }
  if (!best || std::isnan(*best)) {
    return true;
  }
  return goal == MetricGoal::kMaximize ? metric > *best : metric < *best;
}

void warn(const std::string& message) { fmt::print(stderr, "dtnn: warning: {}\n", message); }

}  // namespace

void save_checkpoint(const fs::path& file, const Checkpoint& checkpoint) {
  validate(file, checkpoint);
  h5::write_atomically(file, [&](h5::File& f) { write_checkpoint(f, checkpoint, checkpoint.metric); },
                       h5::Staging::kInMemory);
}

Checkpoint load_checkpoint(const fs::path& file) {
  const h5::File f = h5::File::open(file, h5::FileMode::kReadOnly);
  if (!f.has_attribute("format")) {
    f.fail(fmt::format("not a dtnn checkpoint, expected attribute format = \"{}\", got none", kFormat));
  }
  const std::string format = f.get_string("format");
  if (format != kFormat) {
    f.fail(fmt::format("not a dtnn checkpoint, expected format \"{}\", got \"{}\"", kFormat, format));
  }
  Checkpoint c;
  const std::int64_t version = f.get_int("format_version");
  if (version < 1 || version > kCheckpointFormatVersion) {
    f.fail(fmt::format("format_version expected 1..{}, got {}", kCheckpointFormatVersion, version));
  }
  c.format_version = static_cast<int>(version);
  c.model_name = f.get_string("model_name");
  c.model_options = f.get_string("model_options");
  const std::int64_t world = f.get_int("world_size");
  if (world < 1 || world > std::numeric_limits<int>::max()) {
    f.fail(fmt::format("world_size expected >= 1, got {}", world));
  }
  c.world_size = static_cast<int>(world);
  c.epoch = f.get_int("epoch");
  c.step = f.get_int("step");
  c.samples_seen = f.get_int("samples_seen");
  c.optimizer = f.get_string("optimizer");
  c.schedule = f.get_string("schedule");
  c.created = f.get_string("created");
  if (f.has_attribute("metric")) {
    c.metric = f.get_double("metric");
  }
  for (const Section& section : kSections) {
    const h5::Group group = f.open_group(section.group);
    for (const std::string& name : group.members()) {
      (c.*section.entries).push_back(read_entry(group, name));
    }
  }
  const h5::Dataset rng = f.open_dataset(kRngStates);
  if (rng.shape().size() != 1) {
    rng.fail(fmt::format("shape expected one dimension, got {}", h5::shape_to_string(rng.shape())));
  }
  c.rng_states = rng.read_strings();
  check_crc(rng, crc32_strings(c.rng_states));
  if (!c.rng_states.empty() && static_cast<int>(c.rng_states.size()) != c.world_size) {
    rng.fail(fmt::format("expected one state per rank ({}), got {}", c.world_size, c.rng_states.size()));
  }
  return c;
}

void check_against(const Checkpoint& checkpoint, const std::vector<Expected>& parameters,
                   const std::vector<Expected>& buffers, const fs::path& file) {
  std::vector<std::string> problems;
  const auto compare = [&](const char* what, const std::vector<NamedArray>& stored,
                           const std::vector<Expected>& expected) {
    std::map<std::string_view, const NamedArray*> by_name;
    for (const NamedArray& a : stored) {
      by_name.emplace(a.name, &a);
    }
    std::set<std::string_view> wanted;
    for (const Expected& e : expected) {
      wanted.insert(e.name);
      const auto it = by_name.find(e.name);
      if (it == by_name.end()) {
        problems.push_back(fmt::format("missing {} {} (shape {})", what, e.name, h5::shape_to_string(e.shape)));
      } else if (it->second->shape != e.shape) {
        problems.push_back(fmt::format("{} {}: shape expected {}, got {}", what, e.name,
                                       h5::shape_to_string(e.shape), h5::shape_to_string(it->second->shape)));
      }
    }
    for (const NamedArray& a : stored) {
      if (!wanted.contains(a.name)) {
        problems.push_back(fmt::format("unexpected {} {} (shape {})", what, a.name, h5::shape_to_string(a.shape)));
      }
    }
  };
  compare("parameter", checkpoint.parameters, parameters);
  compare("buffer", checkpoint.buffers, buffers);
  if (!problems.empty()) {
    throw DataError(fmt::format("{}: checkpoint does not match the model {}, {} problem{}:{}", file.string(),
                                checkpoint.model_name.empty() ? "" : "'" + checkpoint.model_name + "'",
                                problems.size(), problems.size() == 1 ? "" : "s", problem_list(problems)));
  }
}

// ---- CheckpointDirectory ----

CheckpointDirectory::CheckpointDirectory(fs::path dir, int keep_last) : dir_(std::move(dir)), keep_last_(keep_last) {
  if (keep_last < 1) {
    throw InvalidArgument(fmt::format("{}: keep_last expected >= 1, got {}", dir_.string(), keep_last));
  }
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_)) {
    throw DataError(fmt::format("{}: cannot create the checkpoint directory: {}", dir_.string(),
                                ec ? ec.message() : "a file of that name exists"));
  }
  remove_stale_temporaries();
}

fs::path CheckpointDirectory::write(const Checkpoint& checkpoint, std::optional<double> metric) {
  const fs::path file = dir_ / checkpoint_file_name(checkpoint.epoch, checkpoint.step);
  validate(file, checkpoint);
  h5::write_atomically(file, [&](h5::File& f) { write_checkpoint(f, checkpoint, metric); }, h5::Staging::kInMemory);
  return file;
}

fs::path CheckpointDirectory::save(const Checkpoint& checkpoint) {
  const fs::path file = write(checkpoint, checkpoint.metric);
  prune();
  remove_stale_temporaries();
  return file;
}

fs::path CheckpointDirectory::save(const Checkpoint& checkpoint, double metric, MetricGoal goal) {
  const fs::path file = write(checkpoint, metric);
  const fs::path best_file = dir_ / kBestName;
  if (improves(metric, stored_metric(best_file), goal)) {
    // A new name that then replaces best.h5 in one rename, so that best.h5 is always a whole checkpoint.
    const fs::path tmp = h5::temporary_path(best_file);
    std::error_code ec;
    fs::remove(tmp, ec);
    fs::create_hard_link(file, tmp, ec);
    if (ec) {
      fs::copy_file(file, tmp, fs::copy_options::overwrite_existing, ec);
      if (ec) {
        throw DataError(fmt::format("{}: cannot copy {} to it: {}", best_file.string(), file.string(), ec.message()));
      }
      h5::sync_path(tmp);
    }
    fs::rename(tmp, best_file, ec);
    if (ec) {
      fs::remove(tmp, ec);
      throw DataError(fmt::format("{}: cannot replace it with {}: {}", best_file.string(), tmp.string(),
                                  ec.message()));
    }
    h5::sync_path(dir_);
  }
  prune();
  remove_stale_temporaries();
  return file;
}

fs::path CheckpointDirectory::latest() const {
  const std::vector<fs::path> all = checkpoints();
  return all.empty() ? fs::path{} : all.back();
}

fs::path CheckpointDirectory::best() const {
  const fs::path file = dir_ / kBestName;
  std::error_code ec;
  return fs::exists(file, ec) ? file : fs::path{};
}

std::vector<fs::path> CheckpointDirectory::checkpoints() const { return list_checkpoints(dir_); }

void CheckpointDirectory::prune() const {
  const std::vector<fs::path> all = checkpoints();
  const auto excess = static_cast<std::ptrdiff_t>(all.size()) - keep_last_;
  for (std::ptrdiff_t i = 0; i < excess; ++i) {
    std::error_code ec;
    fs::remove(all[static_cast<std::size_t>(i)], ec);
  }
}

// Temporary files are named <target>.<pid>.tmp; only those of processes that no longer exist are removed,
// so that a second writer in the same directory keeps its file.
void CheckpointDirectory::remove_stale_temporaries() const {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".tmp") || !(name.starts_with("ckpt-") || name.starts_with(kBestName))) {
      continue;
    }
    const std::string_view stem = std::string_view(name).substr(0, name.size() - 4);
    const std::size_t dot = stem.rfind('.');
    long pid = 0;
    if (dot == std::string_view::npos ||
        std::from_chars(stem.data() + dot + 1, stem.data() + stem.size(), pid).ec != std::errc{}) {
      continue;
    }
    if (pid == ::getpid() || pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) {
      std::error_code remove_ec;
      fs::remove(entry.path(), remove_ec);
    }
  }
}

fs::path resolve_checkpoint(const fs::path& file_or_dir) {
  std::error_code ec;
  const auto status = fs::status(file_or_dir, ec);
  if (!fs::exists(status)) {
    throw DataError(fmt::format("{}: cannot resume, no such file or directory", file_or_dir.string()));
  }
  if (!fs::is_directory(status)) {
    return file_or_dir;
  }
  std::vector<fs::path> candidates = list_checkpoints(file_or_dir);
  std::reverse(candidates.begin(), candidates.end());
  if (fs::exists(file_or_dir / kBestName, ec)) {
    candidates.push_back(file_or_dir / kBestName);
  }
  std::vector<std::string> failures;
  for (const fs::path& candidate : candidates) {
    try {
      load_checkpoint(candidate);
      return candidate;
    } catch (const DataError& e) {
      warn(fmt::format("{} (skipped, trying an older checkpoint)", e.what()));
      failures.emplace_back(e.what());
    }
  }
  if (failures.empty()) {
    throw DataError(fmt::format("{}: no checkpoint to resume from, expected files named {}, got none",
                                file_or_dir.string(), checkpoint_file_name(0, 0)));
  }
  throw DataError(fmt::format("{}: no loadable checkpoint, {} found and all are damaged:{}", file_or_dir.string(),
                              failures.size(), problem_list(failures)));
}

}  // namespace dtnn::io
