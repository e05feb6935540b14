// SPDX-License-Identifier: Apache-2.0
// The program's command line (app/commands.hpp: add_commands, as main builds it): an input is the arguments after
// the program's name, separated by NUL bytes, parsed into every command's options (numbers, lists, sizes in other
// units, names of enums) without running the command. A CLI11 ParseError is the refusal main turns into exit
// status 2; anything else thrown, or undefined behaviour while converting a value, is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "app/commands.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"dtnn"};
  std::string arg;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(arg);
      arg.clear();
    } else {
      arg.push_back(static_cast<char>(data[i]));
    }
  }
  if (!arg.empty()) args.push_back(arg);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int argc = static_cast<int>(args.size());

  CLI::App program;
  const std::vector<dtnn::app::Command> commands = dtnn::app::add_commands(program, argc, argv.data());
  try {
    program.parse(argc, argv.data());
  } catch (const CLI::ParseError&) {
  }
  return 0;
}
