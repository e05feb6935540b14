// SPDX-License-Identifier: Apache-2.0
// dtnn evaluate: test accuracy, top-5, loss, MSE and MAE of a checkpoint.
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "io/checkpoint.hpp"
#include "models/checkpointing.hpp"
#include "runtime/text_file.hpp"

namespace dtnn::app {
namespace {

struct EvaluateOptions {
  RunOptions run;
  // Batches of training's size by default.
  EvalOptions eval = EvalOptions().batch_size(FitOptions().batch_size_);
  std::uint64_t seed = FitOptions().seed_;
  std::string checkpoint;
};

int run_evaluate(const EvaluateOptions& o) {
  require_real_build("evaluate");
  const models::ModelInfo info = zoo_model_info(o.run.model);
  runtime::Engine engine(engine_options(o.run));
  select_device(o.run, engine);
  io::TrainTest data = load_data(o.run.data, info, o.eval.batch_size_, o.seed);
  Sequential model = build_zoo_model(o.run.model, o.seed);
  const std::filesystem::path file = io::resolve_checkpoint(o.checkpoint);
  const io::Checkpoint c = io::load_checkpoint(file);
  restore_checkpoint(c, model, nullptr, file);
  const EvalResult r = evaluate(model, data.test, o.eval);
  if (r.tokens > 0) {
    fmt::print("{} of {} (step {}) on {}: loss {:.4f} per token, perplexity {:.3f}, {:.4f} bits per character, "
               "next-token accuracy {:.2f}% (top-5 {:.2f}%), {} tokens in {} windows, {:.2f} s\n",
               info.name, file.string(), c.step, data.test.name, r.loss, r.perplexity(), r.bits_per_char(),
               100.0 * r.accuracy, 100.0 * r.top5_accuracy, r.tokens, r.samples, r.seconds);
  } else {
    fmt::print("{} of {} (step {}) on {}: accuracy {:.2f}%, top-5 {:.2f}%, loss {:.4f}, MSE {:.5f}, MAE {:.5f}, {} "
               "samples in {:.2f} s\n",
               info.name, file.string(), c.step, data.test.name, 100.0 * r.accuracy, 100.0 * r.top5_accuracy, r.loss,
               r.mse, r.mae, r.samples, r.seconds);
  }
  if (!o.run.report.empty()) {
    nlohmann::json report{{"model", info.name}, {"checkpoint", file.string()},
                          {"test_accuracy", r.accuracy}, {"test_top5_accuracy", r.top5_accuracy},
                          {"test_loss", r.loss}, {"mse", r.mse}, {"mae", r.mae},
                          {"test_samples", r.samples}};
    if (r.tokens > 0) {
      report["test_tokens"] = r.tokens;
      report["test_perplexity"] = r.perplexity();
      report["test_bits_per_char"] = r.bits_per_char();
    }
    runtime::write_text_file(o.run.report, report.dump(2) + "\n", "report");
  }
  return 0;
}

}  // namespace

Command add_evaluate(CLI::App& program) {
  auto options = std::make_shared<EvaluateOptions>();
  CLI::App* app = program.add_subcommand("evaluate", "test accuracy, top-5, loss, MSE and MAE of a checkpoint");
  add_run_options(app, options->run, {options->eval.batch_size_, options->eval.tiles_, options->eval.loss_,
                                      options->seed});
  app->add_option("--checkpoint", options->checkpoint, "checkpoint file, or a directory (its newest)")->required();
  return {app, [options] { return run_evaluate(*options); }};
}

}  // namespace dtnn::app
