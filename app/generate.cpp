// SPDX-License-Identifier: Apache-2.0
// dtnn generate: text sampled from a checkpoint of a causal language model of the zoo (byte-level: a token is a
// byte of the text).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "io/checkpoint.hpp"
#include "models/checkpointing.hpp"
#include "models/generate.hpp"

namespace dtnn::app {
namespace {

struct GenerateOptions {
  std::string checkpoint;
  std::string prompt;
  std::int64_t tokens = 200;
  SamplingOptions sampling;
  int workers = 0;
};

int run_generate(const GenerateOptions& o) {
  require_real_build("generate");
  const std::filesystem::path file = io::resolve_checkpoint(o.checkpoint);
  const io::Checkpoint c = io::load_checkpoint(file);
  RunOptions run;
  run.model.name = c.model_name;
  run.device = "cpu";
  run.engine.workers(o.workers);
  runtime::Engine engine(engine_options(run));
  select_device(run, engine);
  Sequential model = build_zoo_model(run.model, 0);
  restore_checkpoint(c, model, nullptr, file);
  if (o.prompt.empty()) throw InvalidArgument("--prompt: empty, expected at least one character");
  // Bytes as token ids: the byte-level vocabulary of dtnn's text datasets.
  std::vector<std::int32_t> prompt;
  for (const char ch : o.prompt) prompt.push_back(static_cast<unsigned char>(ch));
  const std::vector<std::int32_t> text = generate(model, prompt, o.tokens, o.sampling);
  std::string out = o.prompt;
  for (const std::int32_t t : text) out.push_back(static_cast<char>(static_cast<unsigned char>(t)));
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace

Command add_generate(CLI::App& program) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* app = program.add_subcommand("generate", "text sampled from a checkpoint of a language model (gpt_char)");
  app->add_option("--checkpoint", o->checkpoint, "checkpoint file, or a directory (its newest)")->required();
  app->add_option("--prompt", o->prompt, "the text to continue (its bytes are the first tokens)")->required();
  app->add_option("--tokens", o->tokens, "tokens (bytes) to generate")->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--temperature", o->sampling.temperature_, "logits divided by it before sampling; 0: greedy")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--top-k", o->sampling.top_k_, "sample among the k most likely tokens; 0: all")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--seed", o->sampling.seed_, "seed of the draws")->capture_default_str();
  app->add_option("--workers", o->workers, "CPU workers (0: one per core)")->check(CLI::NonNegativeNumber);
  return {app, [o] { return run_generate(*o); }};
}

}  // namespace dtnn::app
