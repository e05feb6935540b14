// SPDX-License-Identifier: Apache-2.0
#include "io/normalize.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dtnn::io {

ChannelStats channel_stats(const Dataset& train) {
  const std::int64_t plane = std::int64_t{train.height} * train.width;
  const std::int64_t n = train.sample_elements();
  if (train.channels <= 0 || plane <= 0 || train.size() == 0 ||
      static_cast<std::int64_t>(train.images.size()) != train.size() * n) {
    throw InvalidArgument(fmt::format("{}: channel statistics need a non-empty dataset whose images match its "
                                      "shape, expected {} floats ({} samples of {}x{}x{}), got {}",
                                      train.name, train.size() * n, train.size(), train.channels, train.height,
                                      train.width, train.images.size()));
  }
  const auto channels = static_cast<std::size_t>(train.channels);
  std::vector<double> sum(channels, 0.0);
  for (std::int64_t i = 0; i < train.size(); ++i) {
    for (std::size_t c = 0; c < channels; ++c) {
      const float* p = train.images.data() + i * n + static_cast<std::int64_t>(c) * plane;
      double s = 0.0;
      for (std::int64_t k = 0; k < plane; ++k) {
        s += p[k];
      }
      sum[c] += s;
    }
  }
  const double count = static_cast<double>(train.size()) * static_cast<double>(plane);
  std::vector<double> mean(channels);
  for (std::size_t c = 0; c < channels; ++c) {
    mean[c] = sum[c] / count;
  }
  std::vector<double> squares(channels, 0.0);
  for (std::int64_t i = 0; i < train.size(); ++i) {
    for (std::size_t c = 0; c < channels; ++c) {
      const float* p = train.images.data() + i * n + static_cast<std::int64_t>(c) * plane;
      double s = 0.0;
      for (std::int64_t k = 0; k < plane; ++k) {
        const double d = p[k] - mean[c];
        s += d * d;
      }
      squares[c] += s;
    }
  }
  ChannelStats stats;
  for (std::size_t c = 0; c < channels; ++c) {
    stats.mean.push_back(static_cast<float>(mean[c]));
    stats.std.push_back(static_cast<float>(std::sqrt(squares[c] / count)));
  }
  return stats;
}

void normalize_sample(float* sample, int channels, int height, int width, const ChannelStats& stats) {
  const std::int64_t plane = std::int64_t{height} * width;
  for (std::int64_t c = 0; c < channels; ++c) {
    const float mean = stats.mean[static_cast<std::size_t>(c)];
    const float s = stats.std[static_cast<std::size_t>(c)];
    // A constant channel carries no information; dividing by 1 keeps it at zero instead of making NaN.
    const float divisor = s == 0.0f ? 1.0f : s;
    float* p = sample + c * plane;
    for (std::int64_t k = 0; k < plane; ++k) {
      p[k] = (p[k] - mean) / divisor;
    }
  }
}

void normalize(Dataset& d, const ChannelStats& stats) {
  const auto channels = static_cast<std::size_t>(std::max(d.channels, 0));
  if (stats.mean.size() != channels || stats.std.size() != channels) {
    throw InvalidArgument(fmt::format("{}: normalize: statistics for {} channels (mean) and {} (std), expected "
                                      "{}",
                                      d.name, stats.mean.size(), stats.std.size(), d.channels));
  }
  for (std::size_t c = 0; c < channels; ++c) {
    if (!std::isfinite(stats.mean[c]) || !std::isfinite(stats.std[c]) || stats.std[c] < 0.0f) {
      throw InvalidArgument(fmt::format("{}: normalize: channel {} has mean {} and std {}, expected a finite "
                                        "mean and a finite std of at least 0",
                                        d.name, c, stats.mean[c], stats.std[c]));
    }
  }
  const std::int64_t n = d.sample_elements();
  if (n <= 0 || static_cast<std::int64_t>(d.images.size()) != d.size() * n) {
    throw InvalidArgument(fmt::format("{}: normalize: images hold {} floats, expected {} ({} samples of {}x{}x{})",
                                      d.name, d.images.size(), d.size() * n, d.size(), d.channels, d.height,
                                      d.width));
  }
  for (std::int64_t i = 0; i < d.size(); ++i) {
    normalize_sample(d.images.data() + i * n, d.channels, d.height, d.width, stats);
  }
}

}  // namespace dtnn::io
