// SPDX-License-Identifier: Apache-2.0
#include "io/h5dataset.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "io/hdf5.hpp"
#include "core/errors.hpp"

namespace dtnn::io {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "dtnn-dataset";
constexpr std::int64_t kTargetChunkBytes = std::int64_t{64} << 10;
constexpr std::int64_t kLabelChunk = std::int64_t{1} << 14;
// Samples converted and written (or read whole) per HDF5 call: bounds the scratch buffer.
constexpr std::int64_t kTransferBytes = std::int64_t{16} << 20;
// A sample larger than this is taken as a damaged header rather than honoured with a huge allocation.
constexpr std::int64_t kMaxSampleBytes = std::int64_t{1} << 26;
// See checkpoint.cpp: deflate cannot shrink data by more than about 1032:1.
constexpr std::int64_t kMaxCompressionRatio = 1100;

struct Geometry {
  int channels = 0;
  int height = 0;
  int width = 0;
  int classes = 0;
  std::int64_t sample_bytes() const { return std::int64_t{channels} * height * width; }
};

// ---- conversion between io::Dataset floats (NCHW, [0,1]) and stored bytes (NHWC) ----

std::uint8_t to_byte(float x) {
  if (!(x > 0.0f)) {
    return 0;
  }
  if (x >= 1.0f) {
    return 255;
  }
  return static_cast<std::uint8_t>(std::lrint(x * 255.0f));
}

void nchw_to_nhwc(const float* in, std::int64_t count, const Geometry& g, std::uint8_t* out) {
  const std::int64_t plane = std::int64_t{g.height} * g.width;
  for (std::int64_t n = 0; n < count; ++n) {
    const float* src = in + n * g.sample_bytes();
    std::uint8_t* dst = out + n * g.sample_bytes();
    for (int c = 0; c < g.channels; ++c) {
      for (std::int64_t p = 0; p < plane; ++p) {
        dst[p * g.channels + c] = to_byte(src[c * plane + p]);
      }
    }
  }
}

void nhwc_to_nchw(const std::uint8_t* in, std::int64_t count, const Geometry& g, float* out) {
  const std::int64_t plane = std::int64_t{g.height} * g.width;
  for (std::int64_t n = 0; n < count; ++n) {
    const std::uint8_t* src = in + n * g.sample_bytes();
    float* dst = out + n * g.sample_bytes();
    for (int c = 0; c < g.channels; ++c) {
      for (std::int64_t p = 0; p < plane; ++p) {
        dst[c * plane + p] = static_cast<float>(src[p * g.channels + c]) / 255.0f;
      }
    }
  }
}

// ---- writing ----

// Where a split's samples come from: fill(first, count, nhwc, labels) is called for consecutive ranges.
struct SplitSource {
  std::string name;
  std::int64_t count = 0;
  std::function<void(std::int64_t, std::int64_t, std::uint8_t*, std::int32_t*)> fill;
};

struct ChannelHistogram {
  std::vector<std::array<std::int64_t, 256>> counts;

  explicit ChannelHistogram(int channels) : counts(static_cast<std::size_t>(channels)) {
    for (auto& c : counts) {
      c.fill(0);
    }
  }
  void add(const std::uint8_t* nhwc, std::int64_t values) {
    const auto channels = static_cast<std::int64_t>(counts.size());
    for (std::int64_t i = 0; i < values; ++i) {
      ++counts[static_cast<std::size_t>(i % channels)][nhwc[i]];
    }
  }
  // Mean and standard deviation per channel in [0,1] units, exact up to double rounding.
  std::pair<std::vector<float>, std::vector<float>> stats() const {
    std::vector<float> mean;
    std::vector<float> stddev;
    for (const auto& c : counts) {
      double n = 0;
      double sum = 0;
      double sum_sq = 0;
      for (int v = 0; v < 256; ++v) {
        const auto k = static_cast<double>(c[static_cast<std::size_t>(v)]);
        n += k;
        sum += k * v;
        sum_sq += k * v * v;
      }
      const double m = n > 0 ? sum / n : 0.0;
      const double var = n > 0 ? std::max(sum_sq / n - m * m, 0.0) : 0.0;
      mean.push_back(static_cast<float>(m / 255.0));
      stddev.push_back(static_cast<float>(std::sqrt(var) / 255.0));
    }
    return {mean, stddev};
  }
};

std::int64_t chunk_samples(std::int64_t requested, std::int64_t sample_bytes, std::int64_t count) {
  const std::int64_t k = requested > 0 ? requested : std::max<std::int64_t>(1, kTargetChunkBytes / sample_bytes);
  // HDF5 refuses chunks larger than a fixed-size dataset.
  return std::min(k, count);
}

void write_splits(const fs::path& file, const std::string& name, const Geometry& g,
                  const std::vector<std::string>& class_names, const std::vector<SplitSource>& splits,
                  const H5DatasetOptions& options) {
  if (options.deflate_level < 0 || options.deflate_level > 9) {
    throw InvalidArgument(fmt::format("{}: deflate_level expected 0..9, got {}", file.string(),
                                      options.deflate_level));
  }
  if (!class_names.empty() && static_cast<int>(class_names.size()) != g.classes) {
    throw InvalidArgument(fmt::format("{}: class_names expected {} names, got {}", file.string(), g.classes,
                                      class_names.size()));
  }
  std::set<std::string> names;
  for (const SplitSource& s : splits) {
    if (s.count < 1) {
      throw InvalidArgument(fmt::format("{}: split {} has no samples, expected at least one", file.string(), s.name));
    }
    if (s.name.empty() || s.name.find('/') != std::string::npos || !names.insert(s.name).second) {
      throw InvalidArgument(fmt::format("{}: split name '{}', expected a unique non-empty name without '/'",
                                        file.string(), s.name));
    }
  }
  if (splits.empty()) {
    throw InvalidArgument(fmt::format("{}: no split to write, expected at least one", file.string()));
  }
  // Statistics come from the training split: they are what a model normalises its inputs with.
  std::size_t stats_split = 0;
  for (std::size_t i = 0; i < splits.size(); ++i) {
    if (splits[i].name == "train") {
      stats_split = i;
    }
  }

  h5::write_atomically(file, [&](h5::File& f) {
    f.set_string("format", kFormat);
    f.set_int("format_version", kH5DatasetFormatVersion);
    f.set_string("name", name);
    f.set_int("classes", g.classes);
    f.set_int("channels", g.channels);
    f.set_int("height", g.height);
    f.set_int("width", g.width);
    f.set_strings("class_names", class_names);
    ChannelHistogram histogram(g.channels);
    for (std::size_t i = 0; i < splits.size(); ++i) {
      const SplitSource& s = splits[i];
      const h5::Group group = f.create_group(s.name);
      const std::int64_t k = chunk_samples(options.samples_per_chunk, g.sample_bytes(), s.count);
      const std::vector<std::int64_t> shape{s.count, g.height, g.width, g.channels};
      const h5::Dataset images = group.create_dataset(
          "images", h5::DType::kUInt8, shape,
          {{k, g.height, g.width, g.channels}, options.deflate_level, h5::ChunkChecksum::kFletcher32});
      const std::vector<std::int64_t> label_shape{s.count};
      const h5::Dataset labels = group.create_dataset(
          "labels", h5::DType::kInt32, label_shape,
          {{std::min(s.count, kLabelChunk)}, options.deflate_level, h5::ChunkChecksum::kFletcher32});
      // Whole chunks per transfer, so that each compressed chunk is written once.
      const std::int64_t per_transfer = k * std::max<std::int64_t>(1, kTransferBytes / (k * g.sample_bytes()));
      std::vector<std::uint8_t> pixels;
      std::vector<std::int32_t> label_values;
      for (std::int64_t first = 0; first < s.count; first += per_transfer) {
        const std::int64_t count = std::min(per_transfer, s.count - first);
        pixels.resize(static_cast<std::size_t>(count * g.sample_bytes()));
        label_values.resize(static_cast<std::size_t>(count));
        s.fill(first, count, pixels.data(), label_values.data());
        images.write_rows(first, count, std::span<const std::uint8_t>(pixels));
        labels.write_rows(first, count, std::span<const std::int32_t>(label_values));
        if (i == stats_split) {
          histogram.add(pixels.data(), static_cast<std::int64_t>(pixels.size()));
        }
      }
    }
    const auto [mean, stddev] = histogram.stats();
    f.set_floats("mean", mean);
    f.set_floats("std", stddev);
  });
}

Geometry geometry_of(const fs::path& file, const Dataset& d, const std::string& split) {
  const Geometry g{d.channels, d.height, d.width, d.classes};
  if (g.channels < 1 || g.height < 1 || g.width < 1 || g.classes < 1) {
    throw InvalidArgument(fmt::format("{}: split {} ({}): {}x{}x{} images of {} classes, expected all >= 1",
                                      file.string(), split, d.name, d.channels, d.height, d.width, d.classes));
  }
  if (static_cast<std::int64_t>(d.images.size()) != d.size() * g.sample_bytes()) {
    throw InvalidArgument(fmt::format("{}: split {} ({}): images hold {} floats, expected {}", file.string(), split,
                                      d.name, d.images.size(), d.size() * g.sample_bytes()));
  }
  for (std::size_t i = 0; i < d.labels.size(); ++i) {
    if (d.labels[i] < 0 || d.labels[i] >= g.classes) {
      throw InvalidArgument(fmt::format("{}: split {} ({}): label at index {} expected 0..{}, got {}", file.string(),
                                        split, d.name, i, g.classes - 1, d.labels[i]));
    }
  }
  return g;
}

// ---- reading ----

struct OpenSplit {
  h5::File file;
  h5::Dataset images;
  h5::Dataset labels;
  H5DatasetInfo info;
  Geometry geometry;
  std::int64_t count = 0;
  std::int64_t chunk_samples = 1;
};

int positive_int(const h5::Object& o, std::string_view attribute, std::int64_t value) {
  if (value < 1 || value > std::numeric_limits<int>::max()) {
    o.fail(fmt::format("attribute {} expected >= 1, got {}", attribute, value));
  }
  return static_cast<int>(value);
}

bool is_split(const h5::File& f, const std::string& name) {
  if (!f.contains_group(name)) {
    return false;
  }
  const h5::Group g = f.open_group(name);
  return g.contains("images") && g.contains("labels");
}

H5DatasetInfo read_info(const h5::File& f) {
  if (f.has_attribute("format")) {
    const std::string format = f.get_string("format");
    if (format != kFormat) {
      f.fail(fmt::format("not a dtnn dataset, expected format \"{}\", got \"{}\"", kFormat, format));
    }
  }
  if (f.has_attribute("format_version")) {
    const std::int64_t version = f.get_int("format_version");
    if (version < 1 || version > kH5DatasetFormatVersion) {
      f.fail(fmt::format("format_version expected 1..{}, got {}", kH5DatasetFormatVersion, version));
    }
  }
  H5DatasetInfo info;
  info.name = f.has_attribute("name") ? f.get_string("name") : fs::path(f.file()).stem().string();
  if (f.has_attribute("class_names")) {
    info.class_names = f.get_strings("class_names");
  }
  if (f.has_attribute("classes")) {
    info.classes = positive_int(f, "classes", f.get_int("classes"));
    if (!info.class_names.empty() && static_cast<int>(info.class_names.size()) != info.classes) {
      f.fail(fmt::format("attribute class_names expected {} names, got {}", info.classes, info.class_names.size()));
    }
  } else if (!info.class_names.empty()) {
    info.classes = static_cast<int>(info.class_names.size());
  } else {
    f.fail("missing attribute classes (or class_names), expected the number of classes");
  }
  const std::array<std::pair<const char*, int*>, 3> extents{
      {{"channels", &info.channels}, {"height", &info.height}, {"width", &info.width}}};
  for (const auto& [key, value] : extents) {
    if (f.has_attribute(key)) {
      *value = positive_int(f, key, f.get_int(key));
    }
  }
  if (f.has_attribute("mean")) {
    info.mean = f.get_floats("mean");
  }
  if (f.has_attribute("std")) {
    info.std = f.get_floats("std");
  }
  for (const std::string& member : f.members()) {
    if (is_split(f, member)) {
      info.splits.push_back(member);
    }
  }
  return info;
}

// Images must hold the bytes their shape promises (allowing for compression), so that a damaged or
// hand-made header cannot ask for an allocation the file could never fill.
void check_storage(const h5::Dataset& d, std::int64_t logical_bytes, std::int64_t chunk_bytes) {
  const std::int64_t stored = d.storage_bytes();
  const std::int64_t ratio = d.filter_count() > 0 ? kMaxCompressionRatio : 1;
  if (logical_bytes > stored * ratio + chunk_bytes) {
    d.fail(fmt::format("shape {} needs {} bytes, the file holds {}", h5::shape_to_string(d.shape()), logical_bytes,
                       stored));
  }
}

// The chunk cache of the images of a split read `chunks_per_read` chunks of `chunk_bytes` at a time: room for them
// (at least 1 MiB), and a prime number of hash slots, about 100 per chunk it holds (HDF5's advice), capped because
// tiny chunks in a 1 MiB cache would otherwise ask for millions of slots.
h5::ChunkCache images_cache(std::int64_t chunk_bytes, std::int64_t chunks_per_read) {
  h5::ChunkCache cache;
  cache.bytes = std::max<std::int64_t>(chunk_bytes * chunks_per_read, std::int64_t{1} << 20);
  const std::int64_t chunks_in_cache =
      std::min<std::int64_t>(cache.bytes / std::max<std::int64_t>(chunk_bytes, 1), 1000);
  std::int64_t slots = std::max<std::int64_t>(521, 100 * chunks_in_cache);
  const auto is_prime = [](std::int64_t v) {
    for (std::int64_t d = 2; d * d <= v; ++d) {
      if (v % d == 0) {
        return false;
      }
    }
    return true;
  };
  while (!is_prime(slots)) {
    ++slots;
  }
  cache.slots = slots;
  return cache;
}

// A split's labels: integers, one per image of its n.
h5::Dataset open_labels(const h5::Group& group, std::int64_t n) {
  h5::Dataset labels = group.open_dataset("labels");
  const h5::DType label_type = labels.dtype();
  if (label_type == h5::DType::kString || label_type == h5::DType::kOther || label_type == h5::DType::kFloat32 ||
      label_type == h5::DType::kFloat64) {
    labels.fail(fmt::format("dtype expected an integer type, got {}", h5::to_string(label_type)));
  }
  const std::vector<std::int64_t> label_shape = labels.shape();
  if (label_shape.size() != 1 || label_shape[0] != n) {
    labels.fail(fmt::format("shape expected [{}] (one label per image), got {}", n, h5::shape_to_string(label_shape)));
  }
  const std::vector<std::int64_t> label_chunk = labels.chunk();
  check_storage(labels, n, label_chunk.empty() ? 0 : label_chunk[0] * 8);
  return labels;
}

OpenSplit open_split(const fs::path& path, std::string_view split, std::int64_t samples_per_read) {
  h5::File file = h5::File::open(path, h5::FileMode::kReadOnly);
  H5DatasetInfo info = read_info(file);
  const std::string split_name(split);
  if (split_name.empty() || split_name.find('/') != std::string::npos || !file.contains_group(split_name)) {
    file.fail(fmt::format("missing split {}, expected one of: {}", split_name,
                          info.splits.empty() ? std::string("(none)")
                                              : fmt::format("{}", fmt::join(info.splits, ", "))));
  }
  const h5::Group group = file.open_group(split_name);

  // The first open only learns the chunk shape, which sizes the cache of the second.
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> chunk;
  {
    const h5::Dataset probe = group.open_dataset("images");
    const h5::DType type = probe.dtype();
    if (type != h5::DType::kUInt8) {
      probe.fail(fmt::format("dtype expected uint8, got {}", h5::to_string(type)));
    }
    shape = probe.shape();
    chunk = probe.chunk();
    if (shape.size() != 4 && shape.size() != 3) {
      probe.fail(fmt::format("shape expected [N, H, W, C] or [N, H, W], got {}", h5::shape_to_string(shape)));
    }
  }
  const std::int64_t n = shape[0];
  const std::int64_t height = shape[1];
  const std::int64_t width = shape[2];
  const std::int64_t channels = shape.size() == 4 ? shape[3] : 1;
  const std::int64_t sample_bytes = height * width * channels;
  if (height < 1 || width < 1 || channels < 1 || sample_bytes > kMaxSampleBytes) {
    group.fail(fmt::format("images: sample shape [{}, {}, {}], expected positive extents of at most {} bytes in all",
                           height, width, channels, kMaxSampleBytes));
  }
  Geometry g;
  g.classes = info.classes;
  g.height = static_cast<int>(height);
  g.width = static_cast<int>(width);
  g.channels = static_cast<int>(channels);
  const std::array<std::pair<int*, int>, 3> dims{{{&info.channels, g.channels}, {&info.height, g.height},
                                                  {&info.width, g.width}}};
  for (const auto& [stored, actual] : dims) {
    if (*stored != 0 && *stored != actual) {
      group.fail(fmt::format("images: shape {} disagrees with the file's channels, height and width {}x{}x{}",
                             h5::shape_to_string(shape), info.channels, info.height, info.width));
    }
    *stored = actual;
  }

  const std::int64_t k = chunk.empty() ? 1 : std::max<std::int64_t>(chunk[0], 1);
  const std::int64_t chunk_bytes = k * sample_bytes;
  h5::Dataset images = group.open_dataset("images", images_cache(chunk_bytes, (samples_per_read + k - 1) / k + 1));
  check_storage(images, n * sample_bytes, chunk_bytes);
  h5::Dataset labels = open_labels(group, n);
  return {std::move(file), std::move(images), std::move(labels), std::move(info), g, n, k};
}

void check_labels(const OpenSplit& s, std::int64_t first, std::span<const std::int32_t> labels) {
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= s.geometry.classes) {
      s.labels.fail(fmt::format("label at index {} expected 0..{}, got {}", first + static_cast<std::int64_t>(i),
                                s.geometry.classes - 1, labels[i]));
    }
  }
}

std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t bound) {
  const std::uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const std::uint64_t draw = rng();
    if (draw >= threshold) {
      return draw % bound;
    }
  }
}

}  // namespace

// ---- public: writing ----

std::vector<std::string> known_class_names(std::string_view dataset, int classes) {
  static const std::vector<std::string> kFashion{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  static const std::vector<std::string> kCifar10{"airplane", "automobile", "bird",  "cat",  "deer",
                                                 "dog",      "frog",       "horse", "ship", "truck"};
  const std::vector<std::string>* known = nullptr;
  if (dataset == "fashion-mnist" || dataset == "fashion_mnist") {
    known = &kFashion;
  } else if (dataset == "cifar10" || dataset == "cifar-10") {
    known = &kCifar10;
  }
  if (known != nullptr && static_cast<int>(known->size()) == classes) {
    return *known;
  }
  std::vector<std::string> names;
  for (int i = 0; i < classes; ++i) {
    names.push_back(std::to_string(i));
  }
  return names;
}

void write_h5_dataset(const fs::path& file, const std::vector<H5Split>& splits, const H5DatasetOptions& options) {
  if (splits.empty()) {
    throw InvalidArgument(fmt::format("{}: no split to write, expected at least one", file.string()));
  }
  const Geometry g = geometry_of(file, splits.front().data, splits.front().name);
  std::vector<SplitSource> sources;
  for (const H5Split& s : splits) {
    const Geometry other = geometry_of(file, s.data, s.name);
    if (other.channels != g.channels || other.height != g.height || other.width != g.width ||
        other.classes != g.classes) {
      throw InvalidArgument(fmt::format("{}: split {}: {}x{}x{} images of {} classes, expected {}x{}x{} of {} like "
                                        "split {}",
                                        file.string(), s.name, other.channels, other.height, other.width,
                                        other.classes, g.channels, g.height, g.width, g.classes,
                                        splits.front().name));
    }
    const Dataset* d = &s.data;
    sources.push_back({s.name, s.data.size(),
                       [d, g](std::int64_t first, std::int64_t count, std::uint8_t* pixels, std::int32_t* labels) {
                         nchw_to_nhwc(d->images.data() + first * g.sample_bytes(), count, g, pixels);
                         std::copy_n(d->labels.begin() + first, count, labels);
                       }});
  }
  std::string name = options.name;
  if (name.empty()) {
    name = splits.front().data.name.substr(0, splits.front().data.name.find('/'));
  }
  if (name.empty()) {
    name = file.stem().string();
  }
  const std::vector<std::string> class_names =
      options.class_names.empty() ? known_class_names(name, g.classes) : options.class_names;
  write_splits(file, name, g, class_names, sources, options);
}

void write_h5_dataset(const fs::path& file, const TrainTest& data, const H5DatasetOptions& options) {
  write_h5_dataset(file, {{"train", data.train}, {"test", data.test}}, options);
}

void write_synthetic_h5_dataset(const fs::path& file, const SyntheticH5Spec& spec) {
  const Geometry g{spec.channels, spec.height, spec.width, spec.classes};
  if (g.channels < 1 || g.height < 1 || g.width < 1 || g.classes < 1) {
    throw InvalidArgument(fmt::format("{}: {}x{}x{} images of {} classes, expected all >= 1", file.string(),
                                      spec.channels, spec.height, spec.width, spec.classes));
  }
  std::vector<SplitSource> sources;
  std::uint64_t split_seed = spec.seed;
  for (const auto& [name, count] : {std::pair<std::string, std::int64_t>{"train", spec.train}, {"test", spec.test}}) {
    if (count == 0) {
      continue;
    }
    // Raw mt19937_64 output (fixed by the standard), so a seed gives the same file everywhere.
    auto rng = std::make_shared<std::mt19937_64>(split_seed++);
    sources.push_back({name, count,
                       [rng, g](std::int64_t, std::int64_t n, std::uint8_t* pixels, std::int32_t* labels) {
                         const std::int64_t bytes = n * g.sample_bytes();
                         for (std::int64_t i = 0; i < bytes; i += 8) {
                           std::uint64_t bits = (*rng)();
                           for (std::int64_t b = i; b < std::min(bytes, i + 8); ++b, bits >>= 8) {
                             pixels[b] = static_cast<std::uint8_t>(bits);
                           }
                         }
                         for (std::int64_t i = 0; i < n; ++i) {
                           labels[i] = static_cast<std::int32_t>(
                               uniform_below(*rng, static_cast<std::uint64_t>(g.classes)));
                         }
                       }});
  }
  H5DatasetOptions options;
  options.deflate_level = 1;  // random bytes do not compress; level 1 costs least for nothing
  write_splits(file, spec.name, g, known_class_names(spec.name, g.classes), sources, options);
}

// ---- public: reading ----

H5DatasetInfo read_h5_dataset_info(const fs::path& file) {
  const h5::File f = h5::File::open(file, h5::FileMode::kReadOnly);
  H5DatasetInfo info = read_info(f);
  if (!info.splits.empty() && (info.channels == 0 || info.height == 0 || info.width == 0)) {
    info = open_split(file, info.splits.front(), 1).info;
  }
  return info;
}

Dataset read_h5_dataset(const fs::path& file, std::string_view split) {
  const OpenSplit s = open_split(file, split, 1);
  Dataset out;
  out.name = s.info.name + "/" + std::string(split);
  out.channels = s.geometry.channels;
  out.height = s.geometry.height;
  out.width = s.geometry.width;
  out.classes = s.geometry.classes;
  const std::int64_t sample = s.geometry.sample_bytes();
  out.images.resize(static_cast<std::size_t>(s.count * sample));
  out.labels.resize(static_cast<std::size_t>(s.count));
  s.labels.read(std::span<std::int32_t>(out.labels));
  check_labels(s, 0, out.labels);
  // Whole chunks per read, so that each chunk is decompressed once whatever the cache holds.
  const std::int64_t per_read =
      s.chunk_samples * std::max<std::int64_t>(1, kTransferBytes / (s.chunk_samples * sample));
  std::vector<std::uint8_t> pixels;
  for (std::int64_t first = 0; first < s.count; first += per_read) {
    const std::int64_t count = std::min(per_read, s.count - first);
    pixels.resize(static_cast<std::size_t>(count * sample));
    s.images.read_rows(first, count, std::span<std::uint8_t>(pixels));
    nhwc_to_nchw(pixels.data(), count, s.geometry, out.images.data() + first * sample);
  }
  return out;
}

// ---- H5DatasetReader ----

struct H5DatasetReader::Impl {
  OpenSplit split;
  std::int64_t begin = 0;
  std::int64_t size = 0;
  std::vector<std::uint8_t> pixels;
  std::vector<std::int32_t> labels;

  // Rows [global_first, global_first + count) of the split into the scratch buffers.
  void load(std::int64_t global_first, std::int64_t count) {
    pixels.resize(static_cast<std::size_t>(count * split.geometry.sample_bytes()));
    labels.resize(static_cast<std::size_t>(count));
    split.images.read_rows(global_first, count, std::span<std::uint8_t>(pixels));
    split.labels.read_rows(global_first, count, std::span<std::int32_t>(labels));
    check_labels(split, global_first, labels);
  }
};

H5DatasetReader::H5DatasetReader(const fs::path& file, const H5ReaderOptions& options) {
  if (options.world < 1 || options.rank < 0 || options.rank >= options.world) {
    throw InvalidArgument(fmt::format("{}: rank {} of world {}, expected world >= 1 and 0 <= rank < world",
                                      file.string(), options.rank, options.world));
  }
  if (options.samples_per_read < 1) {
    throw InvalidArgument(fmt::format("{}: samples_per_read expected >= 1, got {}", file.string(),
                                      options.samples_per_read));
  }
  impl_ = std::make_unique<Impl>(Impl{open_split(file, options.split, options.samples_per_read), 0, 0, {}, {}});
  const std::int64_t n = impl_->split.count;
  const std::int64_t base = n / options.world;
  const std::int64_t extra = n % options.world;
  impl_->begin = options.rank * base + std::min<std::int64_t>(options.rank, extra);
  impl_->size = base + (options.rank < extra ? 1 : 0);
}

H5DatasetReader::H5DatasetReader(const fs::path& file, int rank, int world)
    : H5DatasetReader(file, H5ReaderOptions{.split = "train", .rank = rank, .world = world}) {}

H5DatasetReader::~H5DatasetReader() = default;
H5DatasetReader::H5DatasetReader(H5DatasetReader&&) noexcept = default;
H5DatasetReader& H5DatasetReader::operator=(H5DatasetReader&&) noexcept = default;

std::int64_t H5DatasetReader::size() const { return impl_->size; }
std::int64_t H5DatasetReader::shard_begin() const { return impl_->begin; }
std::int64_t H5DatasetReader::split_size() const { return impl_->split.count; }
std::int64_t H5DatasetReader::sample_elements() const { return impl_->split.geometry.sample_bytes(); }
const H5DatasetInfo& H5DatasetReader::info() const { return impl_->split.info; }

void H5DatasetReader::read(std::int64_t first, std::int64_t count, std::span<float> images,
                           std::span<std::int32_t> labels) {
  const std::string& file = impl_->split.file.file();
  if (first < 0 || count < 0 || first + count > impl_->size) {
    throw InvalidArgument(fmt::format("{}: samples [{}, {}) of a shard of {}, expected a range inside it", file,
                                      first, first + count, impl_->size));
  }
  const std::int64_t sample = sample_elements();
  if (static_cast<std::int64_t>(images.size()) != count * sample ||
      static_cast<std::int64_t>(labels.size()) != count) {
    throw InvalidArgument(fmt::format("{}: {} samples need {} image values and {} labels, got {} and {}", file, count,
                                      count * sample, count, images.size(), labels.size()));
  }
  if (count == 0) {
    return;
  }
  impl_->load(impl_->begin + first, count);
  nhwc_to_nchw(impl_->pixels.data(), count, impl_->split.geometry, images.data());
  std::copy(impl_->labels.begin(), impl_->labels.end(), labels.begin());
}

void H5DatasetReader::read_samples(std::span<const std::int64_t> indices, std::span<float> images,
                                   std::span<std::int32_t> labels) {
  const std::string& file = impl_->split.file.file();
  const std::int64_t sample = sample_elements();
  const auto count = static_cast<std::int64_t>(indices.size());
  if (static_cast<std::int64_t>(images.size()) != count * sample ||
      static_cast<std::int64_t>(labels.size()) != count) {
    throw InvalidArgument(fmt::format("{}: {} samples need {} image values and {} labels, got {} and {}", file, count,
                                      count * sample, count, images.size(), labels.size()));
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> order;  // (shard index, output position)
  order.reserve(indices.size());
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t index = indices[static_cast<std::size_t>(i)];
    if (index < 0 || index >= impl_->size) {
      throw InvalidArgument(fmt::format("{}: sample index {} of a shard of {}, expected 0..{}", file, index,
                                        impl_->size, impl_->size - 1));
    }
    order.emplace_back(index, i);
  }
  std::sort(order.begin(), order.end());
  const Geometry& g = impl_->split.geometry;
  for (std::size_t run = 0; run < order.size();) {
    // A run of consecutive (or repeated) indices becomes one hyperslab read.
    std::size_t end = run + 1;
    while (end < order.size() && order[end].first <= order[end - 1].first + 1) {
      ++end;
    }
    const std::int64_t first = order[run].first;
    impl_->load(impl_->begin + first, order[end - 1].first - first + 1);
    for (std::size_t j = run; j < end; ++j) {
      const std::int64_t local = order[j].first - first;
      const std::int64_t out = order[j].second;
      nhwc_to_nchw(impl_->pixels.data() + local * sample, 1, g, images.data() + out * sample);
      labels[static_cast<std::size_t>(out)] = impl_->labels[static_cast<std::size_t>(local)];
    }
    run = end;
  }
}

}  // namespace dtnn::io

namespace dtnn::io {

std::vector<std::int32_t> H5DatasetReader::labels() {
  std::vector<std::int32_t> out(static_cast<std::size_t>(impl_->size));
  impl_->split.labels.read_rows(impl_->begin, impl_->size, std::span<std::int32_t>(out));
  check_labels(impl_->split, impl_->begin, out);
  return out;
}

namespace {

// The batch-loading tasks of several tiles read at once; one reader serves them in turn (HDF5's own
// thread-safe build serialises its calls anyway).
class H5SampleReader : public SampleReader {
 public:
  explicit H5SampleReader(H5DatasetReader reader) : reader_(std::move(reader)) {}
  void read(std::span<const std::int64_t> indices, float* out) override {
    std::lock_guard lock(mutex_);
    labels_.resize(indices.size());
    reader_.read_samples(indices,
                         std::span<float>(out, indices.size() * static_cast<std::size_t>(reader_.sample_elements())),
                         std::span<std::int32_t>(labels_));
  }

 private:
  std::mutex mutex_;
  H5DatasetReader reader_;
  std::vector<std::int32_t> labels_;
};

}  // namespace

Dataset open_h5_dataset(const std::filesystem::path& file, std::string_view split, std::int64_t batch_hint) {
  H5ReaderOptions options;
  options.split = std::string(split);
  options.samples_per_read = std::max<std::int64_t>(1, batch_hint);
  H5DatasetReader reader(file, options);
  Dataset d;
  const H5DatasetInfo& info = reader.info();
  d.name = info.name + "/" + std::string(split);
  d.channels = info.channels;
  d.height = info.height;
  d.width = info.width;
  d.classes = info.classes;
  d.labels = reader.labels();
  d.reader = std::make_shared<H5SampleReader>(std::move(reader));
  return d;
}

}  // namespace dtnn::io
