// SPDX-License-Identifier: Apache-2.0
#include "runtime/machine.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <starpu.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
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

// ---- machine archives ----

// A member's path split into its components, after any leading "./" and a folder's trailing '/'. Empty for the
// archive's root folder ("./"). Throws DataError naming the archive for what could leave the folder.
std::vector<std::string> member_parts(const fs::path& archive, const std::string& name) {
  std::string_view rest = name;
  while (rest.substr(0, 2) == "./") rest.remove_prefix(2);
  if (rest == ".") rest = "";
  if (!rest.empty() && rest.front() == '/') {
    throw DataError(fmt::format("{}: member '{}' is an absolute path, expected a path inside the machine folder "
                                "(machine.json, starpu/...)",
                                archive.string(), name));
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  std::vector<std::string> parts;
  while (!rest.empty()) {
    const std::size_t slash = rest.find('/');
    const std::string_view part = rest.substr(0, slash);
    if (part == "..") {
      throw DataError(fmt::format("{}: member '{}' has a '..' component, expected a path inside the machine folder",
                                  archive.string(), name));
    }
    const bool printable =
        std::all_of(part.begin(), part.end(), [](char c) { return c > ' ' && c < 127 && c != '\\'; });
    if (part.empty() || part == "." || !printable) {
      throw DataError(fmt::format("{}: member '{}' has an empty, '.' or unprintable component, expected a plain "
                                  "relative path",
                                  archive.string(), name));
    }
    parts.emplace_back(part);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  }
  return parts;
}

// True where a machine folder may have this file (folder: 0) or folder (1): machine.json,
// starpu/.starpu/sampling/bus/<file>, starpu/.starpu/sampling/codelets/<version>/<file>, the folders above them, and
// StarPU's debug folder (which only a StarPU built with STARPU_MODEL_DEBUG writes into: it stays empty).
bool in_layout(const std::vector<std::string>& p, int folder) {
  static const std::array<const char*, 3> home = {"starpu", ".starpu", "sampling"};
  if (p.size() == 1 && p[0] == "machine.json") return folder == 0;
  for (std::size_t i = 0; i < home.size(); ++i) {
    if (p.size() <= i || p[i] != home[i]) return false;
  }
  if (p.size() <= 3) return folder == 1;
  const bool version = p[3] == "codelets" && p.size() >= 5 &&
                       std::all_of(p[4].begin(), p[4].end(), [](char c) { return c >= '0' && c <= '9'; });
  if (p.size() == 4) return folder == 1 && (p[3] == "bus" || p[3] == "codelets" || p[3] == "debug");
  if (p.size() == 5) return p[3] == "bus" ? folder == 0 : version && folder == 1;
  return p.size() == 6 && version && folder == 0;
}

const char* kLayout =
    "machine.json, starpu/.starpu/sampling/bus/<file> or starpu/.starpu/sampling/codelets/<version>/<file>";

struct ArchiveDeleter {
  void operator()(archive* a) const { archive_free(a); }
};
using ArchivePtr = std::unique_ptr<archive, ArchiveDeleter>;

// A file descriptor closed at the end of its scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

const char* file_kind(mode_t type) {
  switch (type) {
    case AE_IFLNK: return "a symbolic link";
    case AE_IFCHR: return "a character device";
    case AE_IFBLK: return "a block device";
    case AE_IFIFO: return "a fifo";
    case AE_IFSOCK: return "a socket";
    default: return "not a plain file or folder";
  }
}

std::string archive_message(archive* a) {
  const char* m = archive_error_string(a);
  return m != nullptr ? m : "no reason given";
}

// True where the file begins with the magic bytes of xz, gzip, zstd or bzip2, or of a ustar header.
bool looks_like_archive(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::array<unsigned char, 262> head{};
  in.read(reinterpret_cast<char*>(head.data()), head.size());
  const auto n = static_cast<std::size_t>(in.gcount());
  const auto starts = [&](std::initializer_list<unsigned char> magic, std::size_t at) {
    if (n < at + magic.size()) return false;
    return std::equal(magic.begin(), magic.end(), head.begin() + static_cast<std::ptrdiff_t>(at));
  };
  return starts({0xFD, '7', 'z', 'X', 'Z', 0x00}, 0) || starts({0x1F, 0x8B}, 0) ||
         starts({0x28, 0xB5, 0x2F, 0xFD}, 0) || starts({'B', 'Z', 'h'}, 0) || starts({'u', 's', 't', 'a', 'r'}, 257);
}

}  // namespace

bool is_machine_archive_name(const fs::path& path) {
  const std::string name = path.filename().string();
  for (const char* suffix : {".tar.xz", ".txz", ".tar.gz", ".tgz", ".tar"}) {
    const std::size_t n = std::strlen(suffix);
    if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0) return true;
  }
  return false;
}

void extract_machine_archive(const fs::path& archive_path, const fs::path& dir) {
  const std::string file = archive_path.string();
  ArchivePtr a(archive_read_new());
  if (!a) throw DataError(fmt::format("{}: cannot start reading it (out of memory)", file));
  // tar only, and only the filters libarchive decodes itself (never one it would hand to an outside program).
  archive_read_support_format_tar(a.get());
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_xz(a.get());
  archive_read_support_filter_zstd(a.get());
  archive_read_support_filter_bzip2(a.get());
  int members = 0;
  // Members read, or the file begins as a compressed stream or a tar does: an archive cut short or damaged;
  // otherwise something else (libarchive says only what it could not decode).
  const auto unreadable = [&]() {
    const bool damaged = members > 0 || looks_like_archive(archive_path);
    return DataError(fmt::format("{}: {} ({}), expected a .tar, .tar.gz or .tar.xz of a machine folder", file,
                                 damaged ? "damaged or truncated archive" : "not a machine archive",
                                 archive_message(a.get())));
  };
  if (archive_read_open_filename(a.get(), file.c_str(), 64 * 1024) != ARCHIVE_OK) throw unreadable();
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    throw DataError(fmt::format("{}: cannot create {} to extract it into: {}", file, dir.string(), error.message()));
  }
  std::int64_t total = 0;
  std::vector<char> buffer(64 * 1024);
  for (;;) {
    archive_entry* entry = nullptr;
    const int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK) throw unreadable();
    if (++members > kMaxMachineMembers) {
      throw DataError(fmt::format("{}: more than {} members, expected a machine folder's few dozen", file,
                                  kMaxMachineMembers));
    }
    const char* raw = archive_entry_pathname(entry);
    if (raw == nullptr) throw DataError(fmt::format("{}: member {} has no readable name", file, members));
    const std::string name = raw;
    if (const char* target = archive_entry_hardlink(entry)) {
      throw DataError(fmt::format("{}: member '{}' is a hard link (to '{}'), expected plain files and folders only",
                                  file, name, target));
    }
    const mode_t type = archive_entry_filetype(entry);
    if (type != AE_IFREG && type != AE_IFDIR) {
      const char* target = archive_entry_symlink(entry);
      throw DataError(fmt::format("{}: member '{}' is {}{}, expected plain files and folders only", file, name,
                                  file_kind(type), target != nullptr ? fmt::format(" (to '{}')", target) : ""));
    }
    const std::vector<std::string> parts = member_parts(archive_path, name);
    if (parts.empty() && type == AE_IFDIR) continue;
    if (!in_layout(parts, type == AE_IFDIR ? 1 : 0)) {
      throw DataError(fmt::format("{}: member '{}' ({}) is not part of a machine folder, expected {}", file, name,
                                  type == AE_IFDIR ? "a folder" : "a file", kLayout));
    }
    fs::path target = dir;
    for (const std::string& part : parts) target /= part;
    if (type == AE_IFDIR) {
      fs::create_directories(target, error);
      if (error) throw DataError(fmt::format("{}: cannot create {}: {}", file, target.string(), error.message()));
      continue;
    }
    const std::int64_t size = archive_entry_size_is_set(entry) ? archive_entry_size(entry) : -1;
    if (size < 0 || size > kMaxMachineMember) {
      throw DataError(fmt::format("{}: member '{}' is {} bytes, expected at most {}", file, name,
                                  size < 0 ? "an unknown number of" : std::to_string(size), kMaxMachineMember));
    }
    if (total + size > kMaxMachineArchive) {
      throw DataError(fmt::format("{}: more than {} bytes in all at member '{}', expected at most {}", file,
                                  total + size, name, kMaxMachineArchive));
    }
    fs::create_directories(target.parent_path(), error);
    if (error) {
      throw DataError(fmt::format("{}: cannot create {}: {}", file, target.parent_path().string(), error.message()));
    }
    // O_EXCL: a member met twice is refused rather than replaced; O_NOFOLLOW: nothing is written through a link.
    const Fd out(::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (out.fd < 0) {
      throw DataError(fmt::format("{}: member '{}' cannot be written to {}: {}", file, name, target.string(),
                                  errno == EEXIST ? "it appears twice" : std::strerror(errno)));
    }
    std::int64_t written = 0;
    for (;;) {
      const la_ssize_t n = archive_read_data(a.get(), buffer.data(), buffer.size());
      if (n == 0) break;
      if (n < 0) {
        throw DataError(fmt::format("{}: member '{}' is damaged ({})", file, name, archive_message(a.get())));
      }
      written += n;
      if (written > size) {
        throw DataError(fmt::format("{}: member '{}' holds more than the {} bytes its header says", file, name, size));
      }
      for (la_ssize_t done = 0; done < n;) {
        const ssize_t w = ::write(out.fd, buffer.data() + done, static_cast<std::size_t>(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          throw DataError(fmt::format("{}: writing {} failed: {}", file, target.string(), std::strerror(errno)));
        }
        done += w;
      }
    }
    total += written;
  }
}

namespace {

// The files of a machine folder to pack, relative to it and sorted. DataError naming a file outside the layout.
std::vector<std::string> machine_files(const fs::path& dir, const fs::path& archive) {
  std::vector<std::string> files;
  std::error_code error;
  const fs::path debug = sampling(dir) / "debug";
  for (auto it = fs::recursive_directory_iterator(dir, error); !error && it != fs::recursive_directory_iterator();
       it.increment(error)) {
    const fs::path rel = it->path().lexically_relative(dir);
    std::vector<std::string> parts;
    for (const auto& p : rel) parts.push_back(p.string());
    const fs::file_status st = it->symlink_status();
    if (fs::is_directory(st)) {
      // StarPU's debug measurements (a build with STARPU_MODEL_DEBUG only) are no part of a machine.
      if (it->path() == debug) it.disable_recursion_pending();
      continue;
    }
    if (!fs::is_regular_file(st) || !in_layout(parts, 0)) {
      throw DataError(fmt::format("{}: {} is {}, expected only {} in a machine folder (nothing was packed)",
                                  archive.string(), it->path().string(),
                                  fs::is_symlink(st)        ? "a symbolic link"
                                  : fs::is_regular_file(st) ? "not part of a machine folder"
                                                            : "not a plain file",
                                  kLayout));
    }
    files.push_back(rel.generic_string());
  }
  if (error) throw DataError(fmt::format("{}: cannot list {}: {}", archive.string(), dir.string(), error.message()));
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

void pack_machine_archive(const fs::path& dir, const fs::path& archive_path) {
  const std::string file = archive_path.string();
  if (!is_machine_archive_name(archive_path)) {
    throw InvalidArgument(fmt::format("{}: not an archive name, expected one ending with .tar.xz, .txz, .tar.gz, .tgz "
                                      "or .tar",
                                      file));
  }
  const std::vector<std::string> files = machine_files(dir, archive_path);
  const std::string name = archive_path.filename().string();
  const auto ends = [&](const char* s) {
    const std::size_t n = std::strlen(s);
    return name.size() > n && name.compare(name.size() - n, n, s) == 0;
  };
  std::error_code error;
  if (archive_path.has_parent_path()) fs::create_directories(archive_path.parent_path(), error);
  // A new file beside the archive (same file system: the rename is atomic), removed unless renamed into place.
  std::string tmp = file + ".XXXXXX";
  const Fd out(::mkstemp(tmp.data()));
  if (out.fd < 0) throw DataError(fmt::format("{}: cannot create {}: {}", file, tmp, std::strerror(errno)));
  struct Unlink {
    std::string path;
    ~Unlink() {
      if (!path.empty()) ::unlink(path.c_str());
    }
  } unlink_tmp{tmp};
  ArchivePtr a(archive_write_new());
  if (!a) throw DataError(fmt::format("{}: cannot start writing it (out of memory)", file));
  const auto check = [&](int r, const char* what) {
    if (r < ARCHIVE_WARN) throw DataError(fmt::format("{}: {} failed: {}", file, what, archive_message(a.get())));
  };
  check(archive_write_set_format_pax_restricted(a.get()), "choosing the tar format");
  if (ends(".tar.xz") || ends(".txz")) {
    check(archive_write_add_filter_xz(a.get()), "xz compression");
  } else if (ends(".tar.gz") || ends(".tgz")) {
    check(archive_write_add_filter_gzip(a.get()), "gzip compression");
    // No time stamp in the gzip header: the same folder packs into the same bytes.
    check(archive_write_set_filter_option(a.get(), "gzip", "timestamp", nullptr), "gzip without a time stamp");
  }
  check(archive_write_open_fd(a.get(), out.fd), "opening");
  std::vector<char> buffer(64 * 1024);
  for (const std::string& rel : files) {
    const fs::path source = dir / rel;
    const Fd in(::open(source.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (in.fd < 0 || ::fstat(in.fd, &st) != 0) {
      throw DataError(fmt::format("{}: cannot read {}: {}", file, source.string(), std::strerror(errno)));
    }
    if (st.st_size > kMaxMachineMember) {
      throw DataError(fmt::format("{}: {} is {} bytes, expected at most {} (what an archive may hold)", file,
                                  source.string(), st.st_size, kMaxMachineMember));
    }
    std::unique_ptr<archive_entry, void (*)(archive_entry*)> entry(archive_entry_new(), archive_entry_free);
    archive_entry_set_pathname(entry.get(), rel.c_str());
    archive_entry_set_filetype(entry.get(), AE_IFREG);
    archive_entry_set_perm(entry.get(), 0644);
    archive_entry_set_size(entry.get(), st.st_size);
    archive_entry_set_mtime(entry.get(), 0, 0);
    check(archive_write_header(a.get(), entry.get()), "writing a header");
    std::int64_t left = st.st_size;
    while (left > 0) {
      const auto want =
          static_cast<std::size_t>(std::min<std::int64_t>(left, static_cast<std::int64_t>(buffer.size())));
      const ssize_t n = ::read(in.fd, buffer.data(), want);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        throw DataError(fmt::format("{}: reading {} failed: {}", file, source.string(),
                                    n == 0 ? "it became shorter" : std::strerror(errno)));
      }
      if (archive_write_data(a.get(), buffer.data(), static_cast<std::size_t>(n)) != n) {
        throw DataError(fmt::format("{}: writing {} into it failed: {}", file, rel, archive_message(a.get())));
      }
      left -= n;
    }
  }
  check(archive_write_close(a.get()), "finishing");
  if (::fchmod(out.fd, 0644) != 0 || ::fsync(out.fd) != 0) {
    throw DataError(fmt::format("{}: cannot sync {}: {}", file, tmp, std::strerror(errno)));
  }
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    throw DataError(fmt::format("{}: cannot rename {} into place: {}", file, tmp, std::strerror(errno)));
  }
  unlink_tmp.path.clear();
}

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
// mean (us), deviation, sum, sum of squares, samples. The entries follow the "# Model for <arch>_impl<n>" line of
// their architecture (cpu0, cuda0, ...): CPU entries are divided by cpu_speed, CUDA ones by gpu_speed.
std::string scale_model(const std::string& text, double cpu_speed, double gpu_speed) {
  static const std::regex entry(R"(^([0-9a-f]{8})\t(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)\s*$)");
  std::istringstream in(text);
  std::string out, line;
  std::smatch m;
  double speed = 1.0;
  while (std::getline(in, line)) {
    if (line.rfind("# Model for ", 0) == 0) {
      speed = line.compare(12, 4, "cuda") == 0 ? gpu_speed : line.compare(12, 3, "cpu") == 0 ? cpu_speed : 1.0;
    } else if (speed != 1.0 && std::regex_match(line, m, entry)) {
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
    bps = std::stod(m[1]);
    s = std::stod(m[2]);
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
  use_machine_folder(calibrated, 0);
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
        write_text_file(f.path(), scale_model(read_text(f.path()), target.cpu_speed, target.gpu_speed), "model");
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
