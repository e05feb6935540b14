// SPDX-License-Identifier: Apache-2.0
// Writing a whole file at once, with the system's reason when it fails (a full disk, a quota, a read-only folder):
// what io's checkpoints and runtime's reports write their temporary files with, before renaming them into place.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <string>
#include <system_error>

#include "core/errors.hpp"

namespace dtnn {

// Writes `size` bytes into the file `path`, created anew (an existing one is replaced: open with O_TRUNC) and
// fsync'ed. DataError "<path>: <what failed>: <the system's reason>"; the file is then removed.
inline void write_new_file(const std::filesystem::path& path, const void* bytes, std::size_t size) {
  const auto fail = [&](const std::string& what, int err) {
    ::unlink(path.c_str());
    return DataError(path.string() + ": " + what + ": " + std::generic_category().message(err));
  };
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw DataError(path.string() + ": cannot create: " + std::generic_category().message(errno));
  const char* p = static_cast<const char*>(bytes);
  std::size_t done = 0;
  int err = 0;
  while (done < size && err == 0) {
    const ssize_t n = ::write(fd, p + done, size - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      err = errno;
    }
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    throw fail("writing " + std::to_string(size) + " bytes failed after " + std::to_string(done), err);
  }
}

}  // namespace dtnn
