// SPDX-License-Identifier: Apache-2.0
// Tar archives written byte by byte (POSIX ustar), for the tests of what the machine archives' reader must refuse:
// members that no packing tool writes on request (absolute paths, `..`, links, devices, a size that lies).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace dtnn::test {

struct TarMember {
  TarMember(std::string name_, char type_, std::string data_ = "", std::string link_ = "", std::int64_t size_ = -1)
      : name(std::move(name_)), type(type_), data(std::move(data_)), link(std::move(link_)), size(size_) {}
  std::string name;
  char type;          // ustar typeflag: '0' file, '1' hard link, '2' symbolic link, '3' character device,
                      // '4' block device, '5' folder, '6' fifo
  std::string data;   // a file's bytes
  std::string link;   // a link's target
  std::int64_t size;  // the size the header says (-1: data's)
};

// The archive of `members`, ending with the two zero blocks of a complete archive.
inline std::string tar_archive(const std::vector<TarMember>& members) {
  std::string out;
  for (const TarMember& m : members) {
    char h[512];
    std::memset(h, 0, sizeof(h));
    const auto put = [&](std::size_t offset, std::size_t width, const std::string& s) {
      std::memcpy(h + offset, s.data(), s.size() < width ? s.size() : width);
    };
    const auto octal = [&](std::size_t offset, std::size_t width, std::uint64_t v) {
      std::snprintf(h + offset, width, "%0*llo", static_cast<int>(width - 1), static_cast<unsigned long long>(v));
    };
    put(0, 100, m.name);
    octal(100, 8, m.type == '5' ? 0755 : 0644);
    octal(108, 8, 0);
    octal(116, 8, 0);
    octal(124, 12, static_cast<std::uint64_t>(m.size >= 0 ? m.size : static_cast<std::int64_t>(m.data.size())));
    octal(136, 12, 0);
    std::memset(h + 148, ' ', 8);
    h[156] = m.type;
    put(157, 100, m.link);
    std::memcpy(h + 257, "ustar", 6);
    std::memcpy(h + 263, "00", 2);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);
    h[155] = ' ';
    out.append(h, sizeof(h));
    out += m.data;
    out.append((512 - m.data.size() % 512) % 512, '\0');
  }
  out.append(1024, '\0');
  return out;
}

}  // namespace dtnn::test
