// SPDX-License-Identifier: Apache-2.0
#include "io/dataset.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "io/idx.hpp"
#include "core/errors.hpp"

namespace dtnn::io {
namespace {

// Unbiased integer in [0, bound) by rejection on the raw 64-bit draws; std::uniform_int_distribution would
// be shorter but its output differs between standard libraries.
std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t bound) {
  const std::uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound: draws below it would bias low values
  for (;;) {
    const std::uint64_t draw = rng();
    if (draw >= threshold) {
      return draw % bound;
    }
  }
}

// The top 24 bits fill a float mantissa exactly, so the value is the same on every machine.
float uniform_unit(std::mt19937_64& rng) {
  return static_cast<float>(rng() >> 40) * 0x1.0p-24f;
}

void check_consistent(const Dataset& d, const char* operation) {
  if (d.has_tokens()) {
    if (!d.tokens && !d.token_reader) {
      throw InvalidArgument(fmt::format("{}: {}: a token dataset of {} windows without tokens, expected the stream "
                                        "its windows are cut from", d.name, operation, d.windows.size()));
    }
    return;
  }
  const std::int64_t expected = static_cast<std::int64_t>(d.labels.size()) * d.sample_elements();
  if (d.sample_elements() <= 0 || static_cast<std::int64_t>(d.images.size()) != expected) {
    throw InvalidArgument(fmt::format("{}: {}: images hold {} floats, expected {} ({} samples of {}x{}x{})",
                                      d.name, operation, d.images.size(), expected, d.labels.size(), d.channels,
                                      d.height, d.width));
  }
}

Dataset empty_like(const Dataset& d, std::string name) {
  Dataset out;
  out.name = std::move(name);
  out.channels = d.channels;
  out.height = d.height;
  out.width = d.width;
  out.classes = d.classes;
  out.sequence = d.sequence;
  out.tokens = d.tokens;
  out.token_reader = d.token_reader;
  return out;
}

void append_sample(Dataset& out, const Dataset& in, std::int64_t index) {
  const std::int64_t n = in.sample_elements();
  const auto begin = in.images.begin() + index * n;
  out.images.insert(out.images.end(), begin, begin + n);
  out.labels.push_back(in.labels[static_cast<std::size_t>(index)]);
}

std::filesystem::path find_idx_file(const std::filesystem::path& dir, const std::string& stem) {
  const std::array<std::filesystem::path, 2> candidates = {dir / stem, dir / (stem + ".gz")};
  for (const auto& candidate : candidates) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec)) {
      return candidate;
    }
  }
  throw DataError(fmt::format("{}: missing {}, expected one of {} or {}, found neither", dir.string(), stem,
                              candidates[0].string(), candidates[1].string()));
}

}  // namespace

std::int64_t Dataset::size() const {
  return static_cast<std::int64_t>(has_tokens() ? windows.size() : labels.size());
}

std::int64_t Dataset::sample_elements() const {
  return has_tokens() ? std::int64_t{sequence} : std::int64_t{channels} * height * width;
}

Dataset Dataset::subset(std::int64_t first, std::int64_t count) const {
  if (reader) {
    throw InvalidArgument(fmt::format("{}: subsets of a dataset streamed from disk are not supported, expected an "
                                      "in-memory dataset", name));
  }
  if (first < 0 || count < 0 || first > size() || count > size() - first) {
    throw InvalidArgument(fmt::format("{}: subset [{}, {}+{}) out of range, expected a range within [0, {})", name,
                                      first, first, count, size()));
  }
  check_consistent(*this, "subset");
  Dataset out = empty_like(*this, fmt::format("{}[{}:{}]", name, first, first + count));
  if (has_tokens()) {
    out.windows.assign(windows.begin() + first, windows.begin() + first + count);
    return out;
  }
  const std::int64_t n = sample_elements();
  out.images.assign(images.begin() + first * n, images.begin() + (first + count) * n);
  out.labels.assign(labels.begin() + first, labels.begin() + first + count);
  return out;
}

Dataset Dataset::stratified_subset(std::int64_t count, std::uint64_t seed) const {
  if (reader) {
    throw InvalidArgument(fmt::format("{}: subsets of a dataset streamed from disk are not supported, expected an "
                                      "in-memory dataset", name));
  }
  if (count < 0 || count > size()) {
    throw InvalidArgument(fmt::format("{}: stratified subset of {} samples, expected 0..{}", name, count, size()));
  }
  check_consistent(*this, "stratified subset");
  Dataset out = empty_like(*this, fmt::format("{}[stratified {} seed {}]", name, count, seed));
  if (count == 0) {
    return out;
  }
  if (has_tokens()) {
    // One pool: the same partial Fisher-Yates as a class's below.
    std::vector<std::int64_t> pool(static_cast<std::size_t>(size()));
    std::iota(pool.begin(), pool.end(), 0);
    std::mt19937_64 rng(seed);
    for (std::int64_t k = 0; k < count; ++k) {
      const auto pick = static_cast<std::size_t>(k) +
                        static_cast<std::size_t>(uniform_below(rng, static_cast<std::uint64_t>(size() - k)));
      std::swap(pool[static_cast<std::size_t>(k)], pool[pick]);
    }
    pool.resize(static_cast<std::size_t>(count));
    std::sort(pool.begin(), pool.end());
    for (const std::int64_t i : pool) out.windows.push_back(windows[static_cast<std::size_t>(i)]);
    return out;
  }
  if (classes <= 0) {
    throw InvalidArgument(fmt::format("{}: stratified subset needs the class count, expected at least 1, got {}",
                                      name, classes));
  }
  std::vector<std::vector<std::int64_t>> by_class(static_cast<std::size_t>(classes));
  for (std::int64_t i = 0; i < size(); ++i) {
    const std::int32_t label = labels[static_cast<std::size_t>(i)];
    if (label < 0 || label >= classes) {
      throw InvalidArgument(fmt::format("{}: label at index {} out of range, expected 0..{}, got {}", name, i,
                                        classes - 1, label));
    }
    by_class[static_cast<std::size_t>(label)].push_back(i);
  }

  // Largest remainder: floor shares first, then one extra sample to the classes whose share lost the most
  // to rounding (ties to the lower class), so the quotas add up to count exactly.
  std::vector<std::int64_t> quota(by_class.size());
  std::vector<std::pair<std::int64_t, std::size_t>> remainders;
  std::int64_t assigned = 0;
  for (std::size_t c = 0; c < by_class.size(); ++c) {
    const std::int64_t share = count * static_cast<std::int64_t>(by_class[c].size());
    quota[c] = share / size();
    remainders.emplace_back(share % size(), c);
    assigned += quota[c];
  }
  std::sort(remainders.begin(), remainders.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (std::int64_t k = 0; k < count - assigned; ++k) {
    ++quota[remainders[static_cast<std::size_t>(k)].second];
  }

  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> chosen;
  chosen.reserve(static_cast<std::size_t>(count));
  for (std::size_t c = 0; c < by_class.size(); ++c) {
    auto& pool = by_class[c];
    // Partial Fisher-Yates: only the first quota positions are needed.
    for (std::int64_t k = 0; k < quota[c]; ++k) {
      const auto remaining = static_cast<std::uint64_t>(pool.size()) - static_cast<std::uint64_t>(k);
      const auto pick = static_cast<std::size_t>(k) + static_cast<std::size_t>(uniform_below(rng, remaining));
      std::swap(pool[static_cast<std::size_t>(k)], pool[pick]);
      chosen.push_back(pool[static_cast<std::size_t>(k)]);
    }
  }
  std::sort(chosen.begin(), chosen.end());

  out.images.reserve(static_cast<std::size_t>(count * sample_elements()));
  out.labels.reserve(static_cast<std::size_t>(count));
  for (const std::int64_t index : chosen) {
    append_sample(out, *this, index);
  }
  return out;
}

Dataset load_idx_dataset(const std::filesystem::path& images_file, const std::filesystem::path& labels_file,
                         std::string name, int classes) {
  if (classes < 1) {
    throw InvalidArgument(fmt::format("{}: classes must be at least 1, got {}", name, classes));
  }
  const IdxImages images = read_idx_images(images_file);
  const std::vector<std::uint8_t> labels = read_idx_labels(labels_file);
  if (static_cast<std::int64_t>(labels.size()) != images.count) {
    throw DataError(fmt::format("{}: label count does not match the images in {}, expected {} labels, got {}",
                                labels_file.string(), images_file.string(), images.count, labels.size()));
  }
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= classes) {
      throw DataError(fmt::format("{}: label at index {} out of range, expected 0..{}, got {}",
                                  labels_file.string(), i, classes - 1, labels[i]));
    }
  }

  Dataset out;
  out.name = std::move(name);
  out.channels = 1;
  out.height = images.rows;
  out.width = images.cols;
  out.classes = classes;
  out.images.resize(images.pixels.size());
  std::transform(images.pixels.begin(), images.pixels.end(), out.images.begin(),
                 [](std::uint8_t p) { return static_cast<float>(p) / 255.0f; });
  out.labels.assign(labels.begin(), labels.end());
  return out;
}

TrainTest load_mnist_like(const std::filesystem::path& dir, std::string name) {
  constexpr int kClasses = 10;
  // All four files are located before any is read, so a missing one is reported without a long load first.
  const auto train_images = find_idx_file(dir, "train-images-idx3-ubyte");
  const auto train_labels = find_idx_file(dir, "train-labels-idx1-ubyte");
  const auto test_images = find_idx_file(dir, "t10k-images-idx3-ubyte");
  const auto test_labels = find_idx_file(dir, "t10k-labels-idx1-ubyte");
  TrainTest out{load_idx_dataset(train_images, train_labels, name + "/train", kClasses),
                load_idx_dataset(test_images, test_labels, name + "/test", kClasses)};
  if (out.test.height != out.train.height || out.test.width != out.train.width) {
    throw DataError(fmt::format("{}: test images are {}x{}, expected the {}x{} of the training images in {}",
                                test_images.string(), out.test.height, out.test.width, out.train.height,
                                out.train.width, train_images.string()));
  }
  return out;
}

std::filesystem::path default_fashion_mnist_dir() {
  const char* env = std::getenv("DTNN_FASHION_MNIST_DIR");
  if (env != nullptr && *env != '\0') {
    return env;
  }
  return "/usr/share/datasets/fashion-mnist";
}

Dataset synthetic_dataset(int count, int channels, int height, int width, int classes, std::uint64_t seed) {
  if (count < 1 || channels < 1 || height < 1 || width < 1 || classes < 1) {
    throw InvalidArgument(fmt::format("synthetic dataset: count, channels, height, width and classes must be at "
                                      "least 1, got {}, {}, {}, {}, {}",
                                      count, channels, height, width, classes));
  }
  if (std::int64_t{channels} * height * width > kIdxMaxImagePixels) {
    throw InvalidArgument(fmt::format("synthetic dataset: sample of {}x{}x{} too large, expected at most {} "
                                      "elements, got {}",
                                      channels, height, width, kIdxMaxImagePixels,
                                      std::int64_t{channels} * height * width));
  }
  Dataset out;
  out.name = fmt::format("synthetic/{}x{}x{}x{}/seed-{}", count, channels, height, width, seed);
  out.channels = channels;
  out.height = height;
  out.width = width;
  out.classes = classes;
  const std::int64_t n = out.sample_elements();
  out.images.resize(static_cast<std::size_t>(count * n));
  out.labels.resize(static_cast<std::size_t>(count));
  // One stream consumed sample by sample (label, then pixels): with the same seed and shape, a smaller
  // dataset is a prefix of a larger one, so tests and benchmarks can grow count without changing samples.
  std::mt19937_64 rng(seed);
  for (std::int64_t i = 0; i < count; ++i) {
    out.labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(uniform_below(rng, classes));
    for (std::int64_t j = 0; j < n; ++j) {
      out.images[static_cast<std::size_t>(i * n + j)] = uniform_unit(rng);
    }
  }
  return out;
}

Dataset synthetic_token_dataset(int count, int sequence, int vocabulary, std::uint64_t seed) {
  if (count < 1 || sequence < 1 || vocabulary < 1) {
    throw InvalidArgument(fmt::format("synthetic token dataset: count, sequence and vocabulary must be at least 1, "
                                      "got {}, {}, {}", count, sequence, vocabulary));
  }
  auto tokens = std::make_shared<std::vector<std::int32_t>>(static_cast<std::size_t>(count) * sequence + 1);
  std::mt19937_64 rng(seed);
  for (auto& t : *tokens) t = static_cast<std::int32_t>(uniform_below(rng, static_cast<std::uint64_t>(vocabulary)));
  return token_windows(std::move(tokens), sequence, vocabulary,
                       fmt::format("synthetic-tokens/{}x{}/vocabulary-{}/seed-{}", count, sequence, vocabulary, seed),
                       "synthetic token dataset");
}

Dataset token_windows(std::shared_ptr<const std::vector<std::int32_t>> tokens, int sequence, int vocabulary,
                      std::string name, const std::string& source) {
  if (sequence < 1 || vocabulary < 1 || !tokens) {
    throw InvalidArgument(fmt::format("{}: token windows of sequence {} over a vocabulary of {}, expected both >= 1 "
                                      "and a token stream", source, sequence, vocabulary));
  }
  const auto n = static_cast<std::int64_t>(tokens->size());
  if (n < std::int64_t{sequence} + 1) {
    throw DataError(fmt::format("{}: {} tokens, expected at least {} for one window (sequence {} + 1)", source, n,
                                std::int64_t{sequence} + 1, sequence));
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t t = (*tokens)[static_cast<std::size_t>(i)];
    if (t < 0 || t >= vocabulary) {
      throw DataError(fmt::format("{}: token {} at position {}, expected 0 <= token < {} (the vocabulary)", source, t,
                                  i, vocabulary));
    }
  }
  Dataset out;
  out.name = std::move(name);
  out.classes = vocabulary;
  out.sequence = sequence;
  const std::int64_t count = (n - 1) / sequence;
  out.windows.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) out.windows[static_cast<std::size_t>(i)] = i * sequence;
  out.tokens = std::move(tokens);
  return out;
}

}  // namespace dtnn::io
