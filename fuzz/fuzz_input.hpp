// SPDX-License-Identifier: Apache-2.0
// What the harnesses share. The readers take paths, so the fuzzed bytes become a file in a folder of this
// process's own; a property a reader's result must keep is checked with require, which stops the run as a crash
// that libFuzzer records (an exception would be taken for the reader's refusal).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace dtnn::fuzz {

// A new folder under $TMPDIR (default /tmp) for this process, removed when it exits normally.
inline const std::filesystem::path& scratch() {
  struct Folder {
    std::filesystem::path path;
    Folder() {
      std::string name = (std::filesystem::temp_directory_path() / "dtnn-fuzz-XXXXXX").string();
      if (::mkdtemp(name.data()) == nullptr) {
        std::perror("dtnn fuzz: mkdtemp");
        std::abort();
      }
      path = name;
    }
    ~Folder() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Folder folder;
  return folder.path;
}

// Writes the bytes to `file` as a new file (a new inode: a library that kept the previous input open, HDF5's
// file cache for one, never sees this one through it).
inline void write_file(const std::filesystem::path& file, const std::uint8_t* data, std::size_t size) {
  ::unlink(file.c_str());
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::perror(file.c_str());
    std::abort();
  }
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) {
      std::perror(file.c_str());
      std::abort();
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

// The bytes as scratch()/name.
inline std::filesystem::path write_input(const std::string& name, const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path file = scratch() / name;
  write_file(file, data, size);
  return file;
}

// Stops the run (a crash for libFuzzer) when a reader's result breaks what its header promises.
inline void require(bool holds, const char* what) {
  if (!holds) {
    std::fprintf(stderr, "dtnn fuzz: broken property: %s\n", what);
    std::abort();
  }
}

}  // namespace dtnn::fuzz
