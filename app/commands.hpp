// SPDX-License-Identifier: Apache-2.0
// The program's commands. Each add_* adds one subcommand to the program with its options, bound into options that
// live as long as the returned command, and returns what runs it once the command line is parsed.
#pragma once

#include <functional>
#include <vector>

#include <CLI/CLI.hpp>

namespace dtnn::app {

struct Command {
  CLI::App* app = nullptr;   // the subcommand: *app is true when the command line chose it
  std::function<int()> run;  // its exit status; throws InvalidArgument (status 2) or another Error (status 1)
};

Command add_train(CLI::App& program);       // app/train.cpp
Command add_benchmark(CLI::App& program);   // app/train.cpp
Command add_evaluate(CLI::App& program);    // app/evaluate.cpp
Command add_models(CLI::App& program);      // app/info.cpp
Command add_schedulers(CLI::App& program);  // app/info.cpp
Command add_summary(CLI::App& program);     // app/info.cpp
Command add_convert(CLI::App& program);     // app/convert.cpp
Command add_generate(CLI::App& program);    // app/generate.cpp
Command add_calibrate(CLI::App& program);   // app/calibrate.cpp
// The simulation runs in a second process of this program, with the same arguments (app/simulate.cpp).
Command add_simulate(CLI::App& program, int argc, char** argv);
// True in that second process, whose main is StarPU's (app/main.cpp).
bool simulation_process();

// The whole program's command line in `program`: its description, every command above and the options they share
// (app/commands.cpp). main parses with it, and so does the options harness (fuzz/fuzz_options.cpp), which runs no
// command. argc and argv: the program's own, which the simulation's second process is given again.
std::vector<Command> add_commands(CLI::App& program, int argc, char** argv);

}  // namespace dtnn::app
