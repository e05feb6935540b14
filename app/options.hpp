// SPDX-License-Identifier: Apache-2.0
// The program's options, bound straight into the library's option structs: a default is the struct's own, shown
// by --help, and written nowhere in the program. What several commands share is here; each command adds its own.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "codelets/loss.hpp"
#include "models/recipe.hpp"
#include "runtime/codelet.hpp"
#include "runtime/engine.hpp"
#include "runtime/mpi.hpp"

namespace dtnn::app {

// The names the command line gives the values of a field (an enum's, mostly), in the order --help lists them.
template <class T>
using Names = std::vector<std::pair<std::string, T>>;

// An option that takes one of `names` and stores its value into `field`; the default shown is the name of the
// field's value when the option is added.
template <class T>
CLI::Option* add_named(CLI::App* app, const std::string& option, T& field, const Names<T>& names,
                       const std::string& help) {
  std::vector<std::string> accepted;
  for (const auto& [name, value] : names) accepted.push_back(name);
  CLI::Option* o = app->add_option_function<std::string>(
                          option,
                          [&field, names](const std::string& given) {
                            for (const auto& [name, value] : names) {
                              if (name == given) field = value;
                            }
                          },
                          help)
                       ->check(CLI::IsMember(accepted));
  for (const auto& [name, value] : names) {
    if (value == field) o->default_str(name);
  }
  return o;
}

// An option given in other units than its field keeps them in: the field receives value x scale, and the default
// shown is the field's own divided by scale. An integer field refuses a value it cannot hold (a CLI11
// ValidationError: exit status 2, as any bad value), which converting would have made undefined.
template <class T>
CLI::Option* add_scaled(CLI::App* app, const std::string& option, T& field, double scale, const std::string& help) {
  return app
      ->add_option_function<double>(
          option,
          [&field, scale, option](double value) {
            const double scaled = value * scale;
            if constexpr (std::is_integral_v<T>) {
              // [lowest, 2^digits): both bounds are exact doubles, and NaN is in neither.
              const double end = std::ldexp(1.0, std::numeric_limits<T>::digits);
              if (!(scaled >= static_cast<double>(std::numeric_limits<T>::lowest()) && scaled < end)) {
                throw CLI::ValidationError(option, fmt::format("{} is out of range, expected at most {:g}", value,
                                                               std::nextafter(end, 0.0) / scale));
              }
            }
            field = static_cast<T>(scaled);
          },
          help)
      ->default_str(fmt::format("{:g}", static_cast<double>(field) / scale));
}

// Gb/s and MiB in the fields' bytes/s and bytes; microseconds in seconds.
inline constexpr double kGbps = 1e9 / 8.0;
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kMicroseconds = 1e-6;

const Names<ConvVariant>& conv_names();           // convgemm, im2col, winograd, auto, onednn
const Names<runtime::Priorities>& priority_names();  // on, off
const Names<codelets::Precision>& precision_names();  // fp32, bf16, bf16-emulated, bf16-amx, tf32

// What the commands that run a zoo model on data share: train, benchmark and evaluate.
struct RunOptions {
  ZooModelOptions model;
  DataOptions data;
  // "auto": lws on CPUs, dmdas with GPUs (decided once the engine knows whether it has GPUs).
  runtime::EngineOptions engine = runtime::EngineOptions().scheduler("auto");
  std::string device = "auto";  // where tasks run: cpu, cuda, all or auto (cuda when a GPU is found)
  int gpus = -1;                // GPUs to use (-1: all; under mpirun one per rank)
  std::string report;           // a JSON summary of the run
  bool quiet = false;           // no summary table and no progress lines
};

// The fields of a command's own library options that the run options set.
struct StepFields {
  std::int64_t& batch_size;
  int& tiles;
  codelets::LossKind& loss;
  std::uint64_t& seed;
};

// --model --dataset ... --quiet: the options train, benchmark and evaluate share.
void add_run_options(CLI::App* app, RunOptions& run, StepFields step);

// The engine of a run (--device, --gpus, --workers, --scheduler, --host-allocator): under mpirun each rank takes
// one GPU (its local rank modulo the node's GPUs). InvalidArgument for GPUs asked of a build without CUDA.
runtime::EngineOptions engine_options(const RunOptions& run, const runtime::Mpi* mpi = nullptr);

// After the engine started: where the tasks go (auto: on the GPUs when there are any). InvalidArgument for
// --device cuda or all without a GPU.
void select_device(const RunOptions& run, const runtime::Engine& engine);

// The simulation build runs no codelet: whatever reads a tensor (training, evaluation, calibration) would read
// nothing. InvalidArgument naming the command there.
void require_real_build(const char* command);

}  // namespace dtnn::app
