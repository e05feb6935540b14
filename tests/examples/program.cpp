// SPDX-License-Identifier: Apache-2.0
#include "examples/program.hpp"

#include <sys/wait.h>

#include <cstdio>

namespace dtnn::test {

ProgramRun run_program(const std::string& command) {
  const std::string cmd = "STARPU_SILENT=1 OMPI_MCA_btl_vader_single_copy_mechanism=none " + command + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) out += buf;
  const int rc = pclose(pipe);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

std::string built_program(const std::string& name) { return DTNN_BINARY_DIR "/bin/" + name; }

}  // namespace dtnn::test
