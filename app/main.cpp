// SPDX-License-Identifier: Apache-2.0
// dtnn: the command-line program. Every training step it runs is a StarPU task graph.
//   dtnn train       train a model of the zoo on a dataset, report test accuracy (also under mpirun)   app/train.cpp
//   dtnn benchmark   training throughput on synthetic data of the model's input shape                  app/train.cpp
//   dtnn evaluate    test accuracy of a checkpoint                                                      app/evaluate.cpp
//   dtnn models      the model zoo                                                                      app/info.cpp
//   dtnn schedulers  the scheduling policies --scheduler accepts                                        app/info.cpp
//   dtnn summary     a model's layers, output shapes and parameters                                     app/info.cpp
//   dtnn convert     a dataset (IDX, CIFAR binary) into an HDF5 file                                    app/convert.cpp
//   dtnn calibrate   StarPU's performance models of a model's steps into a machine folder               app/calibrate.cpp
//   dtnn simulate    predicted step time of a model on a machine folder (the DTNN_SIMGRID build)         app/simulate.cpp
// Options bind into the library's option structs (app/options.hpp). Exit status: 0, 2 for a bad option or value
// (InvalidArgument), 1 for any other error (a file, StarPU, MPI).
#include <dlfcn.h>

#include <cstdio>
#include <exception>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <starpu.h>

#include "app/commands.hpp"
#include "core/errors.hpp"

#ifdef DTNN_SIMGRID
// starpu.h renames main into starpu_main in a SimGrid StarPU, whose own main would start SimGrid before this one
// runs. dtnn keeps its main, and hands over to StarPU's only in the simulation's second process (below).
#undef main
#endif

namespace dtnn::app {
namespace {

int dtnn_main(int argc, char** argv) {
  CLI::App program;
  const std::vector<Command> commands = add_commands(program, argc, argv);
  try {
    program.parse(argc, argv);
  } catch (const CLI::ParseError& err) {
    const int rc = program.exit(err);
    return rc == 0 ? 0 : 2;
  }
  try {
    for (const Command& command : commands) {
      if (*command.app) return command.run();
    }
  } catch (const InvalidArgument& err) {
    fmt::print(stderr, "dtnn: error: {}\n", err.what());
    return 2;
  } catch (const std::exception& err) {
    fmt::print(stderr, "dtnn: error: {}\n", err.what());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace dtnn::app

#ifdef DTNN_SIMGRID
// StarPU's main (below) runs this one as a SimGrid actor; the linker exports it to libstarpu, which refers to it.
extern "C" int starpu_main(int argc, char** argv) { return dtnn::app::dtnn_main(argc, argv); }

int main(int argc, char** argv) {
  if (!dtnn::app::simulation_process()) return dtnn::app::dtnn_main(argc, argv);
  // The simulation's second process (app/simulate.cpp): StarPU's main, the weak one of libstarpu that this one
  // hides, starts SimGrid on the platform of STARPU_HOME and runs starpu_main in it.
  using Main = int (*)(int, char**);
  const auto starpu = reinterpret_cast<Main>(dlsym(RTLD_NEXT, "main"));
  if (starpu == nullptr) {
    std::fprintf(stderr, "dtnn simulate: StarPU's main not found (%s), expected a StarPU built with --enable-simgrid\n",
                 dlerror());
    return 1;
  }
  return starpu(argc, argv);
}
#else
int main(int argc, char** argv) { return dtnn::app::dtnn_main(argc, argv); }
#endif
