// SPDX-License-Identifier: Apache-2.0
// Keras-style progress line: redrawn in place on a terminal, printed once per epoch otherwise.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace dtnn {

class ProgressLine {
 public:
  // out: where to print (stdout by default); interactive redraws only when it is a terminal.
  explicit ProgressLine(std::FILE* out = stdout);
  // A token model's line: loss per token, perplexity, bits per character, next-token accuracy and tokens/s (each
  // sample holding tokens_per_sample target tokens).
  void token_metrics(std::int64_t tokens_per_sample) { tokens_per_sample_ = tokens_per_sample; }
  void start_epoch(int epoch, int epochs, std::int64_t steps);
  void update(std::int64_t step, double loss, double accuracy, std::int64_t images);
  // suffix: e.g. validation metrics.
  void end_epoch(double loss, double accuracy, std::int64_t images, const std::string& suffix);

 private:
  std::string line(std::int64_t step, double loss, double accuracy, std::int64_t images, double elapsed) const;

  std::FILE* out_;
  int interactive_ = 0;
  std::int64_t steps_ = 0;
  std::int64_t tokens_per_sample_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace dtnn
