// SPDX-License-Identifier: Apache-2.0
#include "app/commands.hpp"

namespace dtnn::app {

std::vector<Command> add_commands(CLI::App& program, int argc, char** argv) {
  program.description("dtnn: train neural networks whose every step is a StarPU task graph");
  program.require_subcommand(1);
  program.set_help_all_flag("--help-all", "help for every subcommand");
  return {add_train(program),      add_benchmark(program), add_evaluate(program),  add_models(program),
          add_schedulers(program), add_summary(program),   add_convert(program),   add_calibrate(program),
          add_generate(program),   add_simulate(program, argc, argv)};
}

}  // namespace dtnn::app
