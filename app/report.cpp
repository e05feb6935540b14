// SPDX-License-Identifier: Apache-2.0
#include "app/report.hpp"

#include <sys/resource.h>

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "runtime/host_memory.hpp"
#include "runtime/text_file.hpp"

namespace dtnn::app {
namespace {

nlohmann::json epoch_json(const EpochRecord& e) {
  nlohmann::json j = {{"epoch", e.epoch},     {"loss", e.loss},      {"accuracy", e.accuracy},
                      {"top5_accuracy", e.top5_accuracy}, {"mse", e.mse}, {"mae", e.mae},
                      {"seconds", e.seconds}, {"images", e.images}, {"images_per_second", e.images_per_second()},
                      {"learning_rate", e.learning_rate}};
  if (!std::isnan(e.val_loss)) {
    j["val_loss"] = e.val_loss;
    j["val_accuracy"] = e.val_accuracy;
  }
  if (e.tokens > 0) {
    j["tokens"] = e.tokens;
    j["tokens_per_second"] = e.tokens_per_second();
    j["perplexity"] = e.perplexity();
    j["bits_per_char"] = e.bits_per_char();
    if (!std::isnan(e.val_loss)) {
      j["val_perplexity"] = e.val_perplexity();
      j["val_bits_per_char"] = e.val_bits_per_char();
    }
  }
  return j;
}

std::string optional_value(double v) {
  return std::isnan(v) ? "" : fmt::format("{:.6f}", v);
}

double seconds_per_epoch(const History& history) {
  return history.epochs.empty() ? 0.0 : history.train_seconds() / static_cast<double>(history.epochs.size());
}

}  // namespace

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

MemoryBreakdown memory_breakdown(Sequential& model, Optimizer& optimizer) {
  constexpr double kMiB = 1 << 20;
  auto mib = [](const Tensor& t) { return t.defined() ? static_cast<double>(t.bytes()) / kMiB : 0.0; };
  MemoryBreakdown m;
  for (const NamedParameter& p : model.named_parameters()) {
    m.weights += mib(p.parameter->value);
    m.gradients += mib(p.parameter->grad) + mib(p.parameter->tile_grads);
    for (const auto& [name, tensor] : optimizer.state_of(*p.parameter).tensors) m.optimizer_state += mib(*tensor);
  }
  for (const NamedBuffer& b : model.named_buffers()) m.buffers += mib(b.buffer->value);
  const runtime::HostMemoryStats host = runtime::host_memory_stats();
  m.activations_peak = static_cast<double>(host.peak_in_use) / kMiB;
  m.allocator_peak = static_cast<double>(host.peak_reserved) / kMiB;
  m.allocations = host.allocations;
  m.reused = host.reused;
  m.peak_rss = peak_rss_mb();
  return m;
}

void print_train_summary(const History& history, const std::optional<EvalResult>& test, const MemoryBreakdown& memory) {
  const double after_first = history.images_per_second_after_first();
  fmt::print("Training time: {:.2f} s ({:.2f} s per epoch), throughput {:.1f} images/s{}{}\n",
             history.train_seconds(), seconds_per_epoch(history), history.images_per_second(),
             std::isnan(after_first) ? "" : fmt::format(" ({:.1f} images/s without the first epoch)", after_first),
             history.tokens() ? fmt::format(", {:.0f} tokens/s", history.tokens_per_second()) : "");
  if (test && test->tokens > 0) {
    fmt::print("Test loss {:.4f} per token, perplexity {:.3f}, {:.4f} bits per character, next-token accuracy {:.2f}% "
               "on {} tokens ({} windows)\n",
               test->loss, test->perplexity(), test->bits_per_char(), 100.0 * test->accuracy, test->tokens,
               test->samples);
  } else if (test) {
    fmt::print("Test accuracy: {:.2f}% (top-5 {:.2f}%, loss {:.4f}) on {} samples\n", 100.0 * test->accuracy,
               100.0 * test->top5_accuracy, test->loss, test->samples);
  }
  const MemoryBreakdown& m = memory;
  fmt::print("Peak memory: {:.1f} MiB (weights {:.1f}, gradients {:.1f}, optimizer state {:.1f}, buffers {:.1f}; "
             "activations and their gradients at most {:.1f} live at once, allocator peak {:.1f}, {} of {} allocations "
             "reused)\n",
             m.peak_rss, m.weights, m.gradients, m.optimizer_state, m.buffers, m.activations_peak, m.allocator_peak,
             m.reused, m.allocations);
}

void write_history(const std::string& file, const History& history) {
  if (std::filesystem::path(file).extension() == ".json") {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& e : history.epochs) all.push_back(epoch_json(e));
    runtime::write_text_file(file, all.dump(2) + "\n", "history");
    return;
  }
  if (history.tokens()) {
    std::string csv = "epoch,loss,perplexity,bits_per_char,accuracy,val_loss,val_perplexity,val_bits_per_char,"
                      "val_accuracy,learning_rate,seconds,tokens_per_second\n";
    for (const auto& e : history.epochs) {
      csv += fmt::format("{},{:.6f},{:.6f},{:.6f},{:.6f},{},{},{},{},{:.6g},{:.3f},{:.1f}\n", e.epoch, e.loss,
                         e.perplexity(), e.bits_per_char(), e.accuracy, optional_value(e.val_loss),
                         optional_value(e.val_perplexity()), optional_value(e.val_bits_per_char()),
                         optional_value(e.val_accuracy), e.learning_rate, e.seconds, e.tokens_per_second());
    }
    runtime::write_text_file(file, csv, "history");
    return;
  }
  std::string csv = "epoch,loss,accuracy,top5_accuracy,mse,mae,val_loss,val_accuracy,learning_rate,seconds,"
                    "images_per_second\n";
  for (const auto& e : history.epochs) {
    csv += fmt::format("{},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{},{},{:.6g},{:.3f},{:.1f}\n", e.epoch, e.loss,
                       e.accuracy, e.top5_accuracy, e.mse, e.mae,
                       std::isnan(e.val_loss) ? "" : fmt::format("{:.6f}", e.val_loss),
                       std::isnan(e.val_accuracy) ? "" : fmt::format("{:.6f}", e.val_accuracy), e.learning_rate,
                       e.seconds, e.images_per_second());
  }
  runtime::write_text_file(file, csv, "history");
}

void write_train_report(const std::string& file, nlohmann::json run, const History& history,
                        const std::optional<EvalResult>& test, const std::vector<std::uint64_t>& checksums,
                        const MemoryBreakdown& memory) {
  nlohmann::json epochs = nlohmann::json::array();
  for (const auto& e : history.epochs) epochs.push_back(epoch_json(e));
  nlohmann::json all_checksums = nlohmann::json::array();
  for (std::uint64_t c : checksums) all_checksums.push_back(fmt::format("{:016x}", c));
  const double after_first = history.images_per_second_after_first();
  run["train_seconds"] = history.train_seconds();
  run["seconds_per_epoch"] = seconds_per_epoch(history);
  run["images_per_second"] = history.images_per_second();
  run["images_per_second_after_first_epoch"] = std::isnan(after_first) ? nlohmann::json() : nlohmann::json(after_first);
  run["peak_rss_mb"] = memory.peak_rss;
  run["memory_mb"] = {{"weights", memory.weights},
                      {"gradients", memory.gradients},
                      {"optimizer_state", memory.optimizer_state},
                      {"buffers", memory.buffers},
                      {"activations_peak", memory.activations_peak},
                      {"allocator_peak", memory.allocator_peak},
                      {"allocations", memory.allocations},
                      {"reused", memory.reused}};
  run["weights_checksum"] = fmt::format("{:016x}", checksums.at(0));
  run["weights_checksums"] = all_checksums;
  run["history"] = epochs;
  if (test) {
    run["test_accuracy"] = test->accuracy;
    run["test_top5_accuracy"] = test->top5_accuracy;
    run["test_loss"] = test->loss;
    run["test_samples"] = test->samples;
    if (test->tokens > 0) {
      run["test_tokens"] = test->tokens;
      run["test_perplexity"] = test->perplexity();
      run["test_bits_per_char"] = test->bits_per_char();
    }
  }
  if (history.tokens()) run["tokens_per_second"] = history.tokens_per_second();
  runtime::write_text_file(file, run.dump(2) + "\n", "report");
}

}  // namespace dtnn::app
