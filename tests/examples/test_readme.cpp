// SPDX-License-Identifier: Apache-2.0
// Every `build/bin/dtnn` command of the README runs, in the README's order, in a scratch folder: what a newcomer
// copies must work. The commands run as written but for the size of the runs (a few steps of a few samples each:
// --steps-per-epoch, --train-samples and --test-samples are set where a command trains) and DIR, which becomes a
// folder of small CIFAR-10 files written here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "examples/program.hpp"
#include "support/environment.hpp"

namespace {

namespace fs = std::filesystem;

// The shell commands of the ```sh blocks of a markdown file, continuation lines joined, comments left out.
std::vector<std::string> shell_commands(const fs::path& markdown) {
  std::ifstream in(markdown);
  std::vector<std::string> commands;
  std::string line, command;
  bool in_block = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0) {
      in_block = !in_block && line == "```sh";
      continue;
    }
    if (!in_block) continue;
    const std::size_t hash = line.find(" #");
    if (hash != std::string::npos) line.erase(hash);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    const bool continued = !line.empty() && line.back() == '\\';
    if (continued) line.pop_back();
    command += line;
    if (!continued) {
      if (command.find_first_not_of(' ') != std::string::npos) commands.push_back(command);
      command.clear();
    }
  }
  return commands;
}

std::vector<std::string> words(const std::string& command) {
  std::istringstream in(command);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Sets `option` to `value` in a command's words: its value replaced where the command gives it, appended otherwise.
void set_option(std::vector<std::string>& w, const std::string& option, const std::string& value) {
  for (std::size_t i = 0; i + 1 < w.size(); ++i) {
    if (w[i] == option) {
      w[i + 1] = value;
      return;
    }
  }
  w.push_back(option);
  w.push_back(value);
}

// Six CIFAR-10 batch files of 48 records each: random pixels, labels 0..9 in turn.
void write_cifar10(const fs::path& dir) {
  fs::create_directories(dir);
  std::mt19937 rng(7);
  for (const char* name : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                           "data_batch_5.bin", "test_batch.bin"}) {
    std::ofstream out(dir / name, std::ios::binary);
    for (int r = 0; r < 48; ++r) {
      out.put(static_cast<char>(r % 10));
      for (int p = 0; p < 3 * 32 * 32; ++p) out.put(static_cast<char>(rng() & 0xff));
    }
  }
}

bool have_fashion_mnist() {
  const char* dir = std::getenv("DTNN_FASHION_MNIST_DIR");
  return fs::exists(dir != nullptr && *dir != '\0' ? dir : "/usr/share/datasets/fashion-mnist");
}

TEST(ReadmeTest, EveryProgramCommandRuns) {
  if (!have_fashion_mnist()) {
    DTNN_SKIP_UNLESS_STRICT("dataset-fashion-mnist is not installed (the README trains on it)");
  }
  const std::vector<std::string> commands = shell_commands(fs::path(DTNN_SOURCE_DIR) / "README.md");
  const fs::path scratch = fs::temp_directory_path() / ("dtnn-readme-" + std::to_string(::getpid()));
  fs::create_directories(scratch / "build");  // the commands run from the clone's top, where build/ exists
  write_cifar10(scratch / "cifar10");
  int ran = 0;
  for (const std::string& command : commands) {
    std::vector<std::string> w = words(command);
    if (w.empty() || w[0] != "build/bin/dtnn") continue;
    w[0] = dtnn::test::built_program("dtnn");
    for (std::string& word : w) {
      if (word == "DIR") word = (scratch / "cifar10").string();
    }
    if (w.size() > 1 && (w[1] == "train" || w[1] == "benchmark")) {
      set_option(w, "--steps-per-epoch", "2");
      if (w[1] == "train") {
        set_option(w, "--train-samples", "256");
        set_option(w, "--test-samples", "64");
      }
    }
    const auto command_line = [&] {
      std::string line = "cd " + scratch.string() + " &&";
      for (const std::string& word : w) line += " " + word;
      return line;
    };
    std::string run = command_line();
    dtnn::test::ProgramRun r = dtnn::test::run_program(run);
    // A mixed-precision example needs its instructions (bf16: AVX512-BF16, bf16-amx: AMX); where this CPU lacks
    // them the program says so and names the emulation, with which the command runs again (the same bits as bf16),
    // at a batch of 8 (the emulation is several times slower than vdpbf16ps).
    if (r.status != 0 && r.output.find("error: --precision:") != std::string::npos &&
        r.output.find("bf16-emulated") != std::string::npos) {
      set_option(w, "--precision", "bf16-emulated");
      set_option(w, "--batch-size", "8");
      run = command_line();
      r = dtnn::test::run_program(run);
    }
    EXPECT_EQ(r.status, 0) << command << "\n(ran as: " << run << ")\n" << r.output;
    ++ran;
  }
  std::error_code ignored;
  fs::remove_all(scratch, ignored);
  // The README shows the program's main commands: a README that lost them is a failure too.
  EXPECT_GE(ran, 8) << "build/bin/dtnn commands found in README.md";
}

}  // namespace
