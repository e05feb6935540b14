// SPDX-License-Identifier: Apache-2.0
// Machine archives: a machine folder (runtime/machine.hpp) in one file, a tar (.tar, or compressed: .tar.xz,
// .tar.gz; .tar.zst and .tar.bz2 are read too) of machine.json and starpu/ at its top. Read and written with
// libarchive; members are checked from their headers before anything is written (the rules of MachineFolder).
#pragma once

#include <cstdint>
#include <filesystem>

namespace dtnn::runtime {

// Bounds on what an archive may hold, checked from each member's header before it is extracted (and on the bytes
// actually read): the largest calibration here is 110 KB, the largest model file 14 KB.
inline constexpr std::int64_t kMaxMachineMember = std::int64_t{64} << 20;
inline constexpr std::int64_t kMaxMachineArchive = std::int64_t{1} << 30;
inline constexpr int kMaxMachineMembers = 100000;

// A name MachineFolder::create packs into an archive: ends with .tar.xz, .txz, .tar.gz, .tgz or .tar.
[[nodiscard]] bool is_machine_archive_name(const std::filesystem::path& path);

// Extracts the machine archive `archive` into the folder `dir` (created; it must hold nothing of the archive's),
// checked as MachineFolder says.
void extract_machine_archive(const std::filesystem::path& archive, const std::filesystem::path& dir);
// Packs the machine folder `dir` into `archive` (compressed by its name: is_machine_archive_name), reproducibly:
// members sorted by name, no owner, time or mode but 0644. Written to a new file beside it, synced and renamed into
// place, so that `archive` is never a partial one. DataError naming a file of `dir` outside the layout (a link, or
// a file StarPU does not write) or a write that failed.
void pack_machine_archive(const std::filesystem::path& dir, const std::filesystem::path& archive);

}  // namespace dtnn::runtime
