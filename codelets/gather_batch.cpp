// SPDX-License-Identifier: Apache-2.0
#include "codelets/gather_batch.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "codelets/cpu/augment.hpp"
#include "runtime/failure.hpp"

namespace dtnn::codelets {
namespace {

// Followed in the argument bytes by `count` sample indices.
struct GatherHeader {
  SampleSource source;
  std::int64_t count;
  int augment;
  Augmentation augmentation;
};

void gather_batch_cpu(void** buffers, void* cl_arg) {
  GatherHeader h;
  std::memcpy(&h, cl_arg, sizeof(h));
  const auto* indices = reinterpret_cast<const std::int64_t*>(static_cast<const char*>(cl_arg) + sizeof(h));
  float* x = runtime::vector_ptr(buffers[0]);
  float* targets = runtime::vector_ptr(buffers[1]);
  const std::size_t row = static_cast<std::size_t>(h.source.sample_elements);
  const float off = h.source.smoothing / static_cast<float>(h.source.classes);
  const float on = 1.0f - h.source.smoothing + off;
  std::fill(targets, targets + h.count * h.source.classes, off);
  const float* images = h.source.images;
  if (h.source.reader != nullptr) {
    // Streamed: the tile's samples are read in one go, into x itself or, to be augmented, beside it.
    thread_local std::vector<float> staging;
    float* into = x;
    if (h.augment) {
      staging.resize(static_cast<std::size_t>(h.count) * row);
      into = staging.data();
    }
    h.source.reader->read(std::span<const std::int64_t>(indices, static_cast<std::size_t>(h.count)), into);
    images = into;
  }
  for (std::int64_t i = 0; i < h.count; ++i) {
    const std::int64_t s = indices[i];
    const std::int64_t at = h.source.reader != nullptr ? i : s;
    if (h.augment) {
      const Augmentation& a = h.augmentation;
      const std::uint64_t seed =
          kernels::cpu::augment_seed(a.seed, static_cast<std::uint64_t>(a.epoch), static_cast<std::uint64_t>(s));
      kernels::cpu::augment_sample(images + at * row, x + i * row, a.channels, a.height, a.width, a.options, seed);
    } else if (h.source.reader == nullptr) {
      std::memcpy(x + i * row, images + at * row, row * sizeof(float));
    }
    targets[i * h.source.classes + h.source.labels[s]] = on;
  }
}

runtime::Codelet cl_gather_batch("gather_batch", runtime::guarded<gather_batch_cpu>, {STARPU_W, STARPU_W},
                                 runtime::Footprint::kData);

}  // namespace

void submit_gather_batch(const TaskTag& tag, const SampleSource& source, std::span<const std::int64_t> indices,
                         const Augmentation* augmentation, Tensor& x, Tensor& targets, int tile) {
  check_same_tiling(tag, x, targets);
  check_dtype(tag, x, DType::kFloat32, "batch");
  const std::int64_t rows = x.tile_range(tile).count;
  if (static_cast<std::int64_t>(indices.size()) != rows || x.row_elements() != source.sample_elements ||
      targets.row_elements() != source.classes) {
    throw InvalidArgument(fmt::format("{}: gather of {} samples of {} values and {} classes into tile {} of {} "
                                      "and targets {}, expected matching sizes",
                                      tag.layer, indices.size(), source.sample_elements, source.classes, tile,
                                      to_string(x.shape()), to_string(targets.shape())));
  }
  GatherHeader header{source, rows, augmentation != nullptr ? 1 : 0, {}};
  if (augmentation != nullptr) {
    header.augmentation = *augmentation;
  }
  std::vector<char> bytes(sizeof(header) + indices.size_bytes());
  std::memcpy(bytes.data(), &header, sizeof(header));
  std::memcpy(bytes.data() + sizeof(header), indices.data(), indices.size_bytes());
  std::string name;
  const std::vector<runtime::Access> data{wr(x.tile(tile)), wr(targets.tile(tile))};
  runtime::submit_task(cl_gather_batch, task_info(tag, "load", tile, 0.0, name), data, bytes.data(), bytes.size());
}

}  // namespace dtnn::codelets
