// SPDX-License-Identifier: Apache-2.0
#include "runtime/text_file.hpp"

#include <system_error>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/new_file.hpp"

namespace dtnn::runtime {

void write_text_file(const std::filesystem::path& file, const std::string& text, const char* what) {
  const std::filesystem::path tmp = file.string() + ".tmp";
  try {
    write_new_file(tmp, text.data(), text.size());
  } catch (const DataError& e) {
    throw DataError(fmt::format("{}: the {} cannot be written ({}); a previous {} there is kept", file.string(), what,
                                e.what(), what));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw DataError(fmt::format("{}: cannot rename {} into place: {}", file.string(), tmp.string(), ec.message()));
  }
}

}  // namespace dtnn::runtime
