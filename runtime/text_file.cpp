// SPDX-License-Identifier: Apache-2.0
#include "runtime/text_file.hpp"

#include <fstream>
#include <system_error>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dtnn::runtime {

void write_text_file(const std::filesystem::path& file, const std::string& text, const char* what) {
  const std::filesystem::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) {
      throw DataError(fmt::format("{}: cannot open for writing the {}", file.string(), what));
    }
    out << text;
    if (!out.flush()) {
      throw DataError(fmt::format("{}: writing the {} failed", file.string(), what));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) {
    throw DataError(fmt::format("{}: cannot rename {} into place: {}", file.string(), tmp.string(), ec.message()));
  }
}

}  // namespace dtnn::runtime
