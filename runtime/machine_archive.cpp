// SPDX-License-Identifier: Apache-2.0
#include "runtime/machine_archive.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dtnn::runtime {
namespace {

namespace fs = std::filesystem;

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

bool has_suffix(const std::string& name, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return name.size() > n && name.compare(name.size() - n, n, suffix) == 0;
}

// The reading side of an archive: tar only, and only the filters libarchive decodes itself (never one it would hand
// to an outside program).
ArchivePtr open_for_reading(const fs::path& archive_path) {
  ArchivePtr a(archive_read_new());
  if (!a) throw DataError(fmt::format("{}: cannot start reading it (out of memory)", archive_path.string()));
  archive_read_support_format_tar(a.get());
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_xz(a.get());
  archive_read_support_filter_zstd(a.get());
  archive_read_support_filter_bzip2(a.get());
  return a;
}

// A member's header, checked before anything of it is written.
struct Member {
  std::string name;                // as the archive writes it
  std::vector<std::string> parts;  // its path inside the machine folder (empty: the folder itself)
  bool folder = false;
  std::int64_t size = 0;  // a file's bytes, at most kMaxMachineMember
};

Member check_member(const fs::path& archive_path, archive_entry* entry, int index) {
  const std::string file = archive_path.string();
  const char* raw = archive_entry_pathname(entry);
  if (raw == nullptr) throw DataError(fmt::format("{}: member {} has no readable name", file, index));
  Member m;
  m.name = raw;
  if (const char* target = archive_entry_hardlink(entry)) {
    throw DataError(fmt::format("{}: member '{}' is a hard link (to '{}'), expected plain files and folders only",
                                file, m.name, target));
  }
  const mode_t type = archive_entry_filetype(entry);
  if (type != AE_IFREG && type != AE_IFDIR) {
    const char* target = archive_entry_symlink(entry);
    throw DataError(fmt::format("{}: member '{}' is {}{}, expected plain files and folders only", file, m.name,
                                file_kind(type), target != nullptr ? fmt::format(" (to '{}')", target) : ""));
  }
  m.folder = type == AE_IFDIR;
  m.parts = member_parts(archive_path, m.name);
  if (m.parts.empty() && m.folder) return m;
  if (!in_layout(m.parts, m.folder ? 1 : 0)) {
    throw DataError(fmt::format("{}: member '{}' ({}) is not part of a machine folder, expected {}", file, m.name,
                                m.folder ? "a folder" : "a file", kLayout));
  }
  if (m.folder) return m;
  m.size = archive_entry_size_is_set(entry) ? archive_entry_size(entry) : -1;
  if (m.size < 0 || m.size > kMaxMachineMember) {
    throw DataError(fmt::format("{}: member '{}' is {} bytes, expected at most {}", file, m.name,
                                m.size < 0 ? "an unknown number of" : std::to_string(m.size), kMaxMachineMember));
  }
  return m;
}

void create_folders(const fs::path& archive_path, const fs::path& folder) {
  std::error_code error;
  fs::create_directories(folder, error);
  if (error) {
    throw DataError(fmt::format("{}: cannot create {}: {}", archive_path.string(), folder.string(), error.message()));
  }
}

// Writes the data of the member `m` that `a` is at into the new file `target`; the bytes written.
std::int64_t extract_member(archive* a, const fs::path& archive_path, const Member& m, const fs::path& target,
                            std::vector<char>& buffer) {
  const std::string file = archive_path.string();
  create_folders(archive_path, target.parent_path());
  // O_EXCL: a member met twice is refused rather than replaced; O_NOFOLLOW: nothing is written through a link.
  const Fd out(::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (out.fd < 0) {
    throw DataError(fmt::format("{}: member '{}' cannot be written to {}: {}", file, m.name, target.string(),
                                errno == EEXIST ? "it appears twice" : std::strerror(errno)));
  }
  std::int64_t written = 0;
  for (;;) {
    const la_ssize_t n = archive_read_data(a, buffer.data(), buffer.size());
    if (n == 0) break;
    if (n < 0) throw DataError(fmt::format("{}: member '{}' is damaged ({})", file, m.name, archive_message(a)));
    written += n;
    if (written > m.size) {
      throw DataError(fmt::format("{}: member '{}' holds more than the {} bytes its header says", file, m.name, m.size));
    }
    for (la_ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out.fd, buffer.data() + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) throw DataError(fmt::format("{}: writing {} failed: {}", file, target.string(), std::strerror(errno)));
      done += w;
    }
  }
  return written;
}

// The files of a machine folder to pack, relative to it and sorted. DataError naming a file outside the layout.
std::vector<std::string> machine_files(const fs::path& dir, const fs::path& archive) {
  std::vector<std::string> files;
  std::error_code error;
  const fs::path debug = dir / "starpu" / ".starpu" / "sampling" / "debug";
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

// The writing side of an archive into the descriptor `fd`: pax-restricted tar, compressed by the archive's name.
ArchivePtr open_for_writing(const fs::path& archive_path, int fd) {
  const std::string file = archive_path.string();
  ArchivePtr a(archive_write_new());
  if (!a) throw DataError(fmt::format("{}: cannot start writing it (out of memory)", file));
  const auto check = [&](int r, const char* what) {
    if (r < ARCHIVE_WARN) throw DataError(fmt::format("{}: {} failed: {}", file, what, archive_message(a.get())));
  };
  const std::string name = archive_path.filename().string();
  check(archive_write_set_format_pax_restricted(a.get()), "choosing the tar format");
  if (has_suffix(name, ".tar.xz") || has_suffix(name, ".txz")) {
    check(archive_write_add_filter_xz(a.get()), "xz compression");
  } else if (has_suffix(name, ".tar.gz") || has_suffix(name, ".tgz")) {
    check(archive_write_add_filter_gzip(a.get()), "gzip compression");
    // No time stamp in the gzip header: the same folder packs into the same bytes.
    check(archive_write_set_filter_option(a.get(), "gzip", "timestamp", nullptr), "gzip without a time stamp");
  }
  check(archive_write_open_fd(a.get(), fd), "opening");
  return a;
}

// Appends the file dir/rel to the archive as member `rel`: mode 0644, no owner, time 0.
void pack_member(archive* a, const fs::path& archive_path, const fs::path& dir, const std::string& rel,
                 std::vector<char>& buffer) {
  const std::string file = archive_path.string();
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
  if (archive_write_header(a, entry.get()) < ARCHIVE_WARN) {
    throw DataError(fmt::format("{}: writing the header of {} failed: {}", file, rel, archive_message(a)));
  }
  for (std::int64_t left = st.st_size; left > 0;) {
    const auto want = static_cast<std::size_t>(std::min<std::int64_t>(left, static_cast<std::int64_t>(buffer.size())));
    const ssize_t n = ::read(in.fd, buffer.data(), want);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw DataError(fmt::format("{}: reading {} failed: {}", file, source.string(),
                                  n == 0 ? "it became shorter" : std::strerror(errno)));
    }
    if (archive_write_data(a, buffer.data(), static_cast<std::size_t>(n)) != n) {
      throw DataError(fmt::format("{}: writing {} into it failed: {}", file, rel, archive_message(a)));
    }
    left -= n;
  }
}

}  // namespace

bool is_machine_archive_name(const fs::path& path) {
  const std::string name = path.filename().string();
  for (const char* suffix : {".tar.xz", ".txz", ".tar.gz", ".tgz", ".tar"}) {
    if (has_suffix(name, suffix)) return true;
  }
  return false;
}

void extract_machine_archive(const fs::path& archive_path, const fs::path& dir) {
  const std::string file = archive_path.string();
  const ArchivePtr a = open_for_reading(archive_path);
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
    const Member m = check_member(archive_path, entry, members);
    fs::path target = dir;
    for (const std::string& part : m.parts) target /= part;
    if (m.folder) {
      create_folders(archive_path, target);
      continue;
    }
    if (total + m.size > kMaxMachineArchive) {
      throw DataError(fmt::format("{}: more than {} bytes in all at member '{}', expected at most {}", file,
                                  total + m.size, m.name, kMaxMachineArchive));
    }
    total += extract_member(a.get(), archive_path, m, target, buffer);
  }
}

void pack_machine_archive(const fs::path& dir, const fs::path& archive_path) {
  const std::string file = archive_path.string();
  if (!is_machine_archive_name(archive_path)) {
    throw InvalidArgument(fmt::format("{}: not an archive name, expected one ending with .tar.xz, .txz, .tar.gz, .tgz "
                                      "or .tar",
                                      file));
  }
  const std::vector<std::string> files = machine_files(dir, archive_path);
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
  const ArchivePtr a = open_for_writing(archive_path, out.fd);
  std::vector<char> buffer(64 * 1024);
  for (const std::string& rel : files) pack_member(a.get(), archive_path, dir, rel, buffer);
  if (archive_write_close(a.get()) < ARCHIVE_WARN) {
    throw DataError(fmt::format("{}: finishing failed: {}", file, archive_message(a.get())));
  }
  if (::fchmod(out.fd, 0644) != 0 || ::fsync(out.fd) != 0) {
    throw DataError(fmt::format("{}: cannot sync {}: {}", file, tmp, std::strerror(errno)));
  }
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    throw DataError(fmt::format("{}: cannot rename {} into place: {}", file, tmp, std::strerror(errno)));
  }
  unlink_tmp.path.clear();
}

}  // namespace dtnn::runtime
