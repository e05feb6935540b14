// SPDX-License-Identifier: Apache-2.0
// The tests of programs run them as child processes (StarPU starts once per process) and read what they print.
#pragma once

#include <string>

namespace dtnn::test {

struct ProgramRun {
  int status = -1;     // the exit status, -1 when the program did not exit normally
  std::string output;  // standard output and standard error, interleaved
};

// Runs a shell command with StarPU's messages silenced and Open MPI's shared-memory single copy off (as the
// test environment needs), waiting for it to end.
ProgramRun run_program(const std::string& command);

// A program built into the build folder's bin/ (DTNN_BINARY_DIR).
std::string built_program(const std::string& name);

}  // namespace dtnn::test
