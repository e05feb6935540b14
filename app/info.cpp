// SPDX-License-Identifier: Apache-2.0
// dtnn models, dtnn schedulers, dtnn summary: what the program offers, without training anything.
#include <memory>
#include <string>

#include <fmt/ranges.h>
#include <starpu.h>

#include "app/commands.hpp"
#include "models/zoo.hpp"
#include "runtime/engine.hpp"
#include "runtime/sched.hpp"

namespace dtnn::app {

Command add_models(CLI::App& program) {
  CLI::App* app = program.add_subcommand("models", "list the model zoo");
  return {app, [] {
            // A language model's input is (context) token ids and its classes are its vocabulary.
            for (const auto& m : models::registry()) {
              const bool tokens = m.input.size() == 1;
              fmt::print("{:<22} input {:<16} {:>5} {:<10} {}\n", m.name, to_string(m.input), m.classes,
                         tokens ? "tokens" : "classes", m.description);
            }
            return 0;
          }};
}

Command add_schedulers(CLI::App& program) {
  CLI::App* app = program.add_subcommand("schedulers", "list the scheduling policies --scheduler accepts");
  return {app, [] {
            fmt::print("StarPU {}.{}.{}'s policies:\n  {}\n", STARPU_MAJOR_VERSION, STARPU_MINOR_VERSION,
                       STARPU_RELEASE_VERSION, fmt::join(runtime::starpu_policy_names(), " "));
            fmt::print("dtnn's own policies (runtime/sched.hpp):\n");
            for (const auto& [name, description] : runtime::registered_policies()) {
              fmt::print("  {:<14} {}\n", name, description);
            }
            fmt::print("auto: lws without GPUs, dmdas with them\n");
            return 0;
          }};
}

Command add_summary(CLI::App& program) {
  auto model = std::make_shared<std::string>("simplecnn");
  CLI::App* app = program.add_subcommand("summary", "print a model's layers, output shapes and parameters");
  app->add_option("model", *model, "model name")->capture_default_str();
  return {app, [model] {
            const models::ModelInfo& info = models::find(*model);
            runtime::Engine engine(runtime::EngineOptions().workers(1));
            Sequential built = info.make();
            built.build(info.input, 0);
            fmt::print("{}", built.summary());
            return 0;
          }};
}

}  // namespace dtnn::app
