// SPDX-License-Identifier: Apache-2.0
#include "models/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace dtnn {
namespace {

std::string duration(double seconds) {
  const auto s = static_cast<std::int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  if (s >= 60) return fmt::format("{}:{:02}", s / 60, s % 60);
  return fmt::format("{}s", s);
}

}  // namespace

ProgressLine::ProgressLine(std::FILE* out) : out_(out), interactive_(isatty(fileno(out)) ? 1 : 0) {}

void ProgressLine::start_epoch(int epoch, int epochs, std::int64_t steps) {
  steps_ = steps;
  start_ = last_draw_ = std::chrono::steady_clock::now();
  fmt::print(out_, "Epoch {}/{}\n", epoch, epochs);
  std::fflush(out_);
}

std::string ProgressLine::line(std::int64_t step, double loss, double accuracy, std::int64_t images,
                               double elapsed) const {
  constexpr int kWidth = 30;
  const int done = steps_ > 0 ? static_cast<int>(kWidth * step / steps_) : kWidth;
  std::string bar(static_cast<std::size_t>(done), '=');
  if (done < kWidth) {
    bar += '>';
    bar += std::string(static_cast<std::size_t>(kWidth - done - 1), '.');
  }
  const int digits = static_cast<int>(std::to_string(steps_).size());
  const double rate = elapsed > 0 ? static_cast<double>(images) / elapsed : 0.0;
  std::string s = fmt::format("{:>{}}/{} [{}] - ", step, digits, steps_, bar);
  if (step < steps_ && step > 0) {
    s += fmt::format("ETA: {} - ", duration(elapsed / static_cast<double>(step) * static_cast<double>(steps_ - step)));
  } else {
    s += fmt::format("{} {:.0f}ms/step - ", duration(elapsed), step > 0 ? 1e3 * elapsed / static_cast<double>(step) : 0.0);
  }
  if (tokens_per_sample_ > 0) {
    s += fmt::format("loss: {:.4f} - ppl: {:.3f} - bpc: {:.4f} - accuracy: {:.4f} - {:.0f} tokens/s", loss,
                     std::exp(loss), loss / std::log(2.0), accuracy, rate * static_cast<double>(tokens_per_sample_));
  } else {
    s += fmt::format("loss: {:.4f} - accuracy: {:.4f} - {:.0f} images/s", loss, accuracy, rate);
  }
  return s;
}

void ProgressLine::update(std::int64_t step, double loss, double accuracy, std::int64_t images) {
  if (!interactive_) {
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100) && step < steps_) {
    return;
  }
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  fmt::print(out_, "\r{}\x1b[K", line(step, loss, accuracy, images, elapsed));
  std::fflush(out_);
}

void ProgressLine::end_epoch(double loss, double accuracy, std::int64_t images, const std::string& suffix) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  fmt::print(out_, "{}{}{}\n", interactive_ ? "\r" : "", line(steps_, loss, accuracy, images, elapsed), suffix);
  std::fflush(out_);
}

}  // namespace dtnn
