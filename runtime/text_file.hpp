// SPDX-License-Identifier: Apache-2.0
// Text outputs (traces, reports, histories) written so that an earlier file is never replaced by a partial one.
#pragma once

#include <filesystem>
#include <string>

namespace dtnn::runtime {

// Writes beside the target and renames into place; DataError naming the file (what: "trace", "report", ...).
void write_text_file(const std::filesystem::path& file, const std::string& text, const char* what);

}  // namespace dtnn::runtime
