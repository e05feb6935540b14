// SPDX-License-Identifier: Apache-2.0
// Machine archives (runtime/machine_archive.cpp: extract_machine_archive), what `dtnn simulate --machine` and
// `dtnn calibrate --out` take: each input is extracted into a new folder, which must then hold nothing outside a
// machine folder's layout (the checks of the members' headers are the archive's only gate).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

#include "core/errors.hpp"
#include "fuzz/fuzz_input.hpp"
#include "runtime/machine_archive.hpp"

namespace {

namespace fs = std::filesystem;

// Every path under dir: a regular file or folder, inside dir, where a machine folder may have one.
void check_extracted(const fs::path& dir) {
  using dtnn::fuzz::require;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const fs::file_status st = e.symlink_status();
    require(fs::is_regular_file(st) || fs::is_directory(st), "machine archive: only files and folders extracted");
    const std::string rel = e.path().lexically_relative(dir).generic_string();
    require(rel == "machine.json" || rel == "starpu" || rel.rfind("starpu/", 0) == 0,
            "machine archive: only machine.json and starpu/ extracted");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dtnn;
  const fs::path archive = fuzz::write_input("input.tar", data, size);
  const fs::path dir = fuzz::scratch() / "extracted";
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  try {
    runtime::extract_machine_archive(archive, dir);
  } catch (const DataError&) {
  }
  // Also after a refusal: what was extracted before it must keep to the layout.
  if (fs::exists(dir)) check_extracted(dir);
  fs::remove_all(dir, ignored);
  return 0;
}
