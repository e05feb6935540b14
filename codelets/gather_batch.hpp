// SPDX-License-Identifier: Apache-2.0
// Loading a batch is a task too: it copies the chosen samples of an in-memory dataset into an input tile
// and writes their one-hot targets, so loading the next batch overlaps the current step.
#pragma once

#include <cstdint>
#include <span>

#include "codelets/common.hpp"
#include "core/augment_options.hpp"
#include "core/sample_reader.hpp"

namespace dtnn::codelets {

// Samples in memory; the caller keeps them alive until the tasks that read them have run.
struct SampleSource {
  const float* images = nullptr;         // [count, sample_elements]; null when reader is set
  SampleReader* reader = nullptr;    // streams the images of a dataset larger than memory
  const std::int32_t* labels = nullptr;  // [count], in [0, classes)
  std::int64_t sample_elements = 0;
  int classes = 0;
  // Label smoothing: targets are (1 - smoothing) * one_hot + smoothing / classes.
  float smoothing = 0.0f;
};

// Training-time augmentation of the gathered samples: each sample's draw is seeded by (seed, epoch, sample
// index in the dataset), so it does not depend on the tiling or on which worker runs the task.
struct Augmentation {
  AugmentOptions options;
  std::uint64_t seed = 0;
  std::int64_t epoch = 0;
  int channels = 0, height = 0, width = 0;
};

// x[tile] = images[indices] (augmented when augmentation is not null), targets[tile] = one_hot(labels[indices]).
// indices has the tile's row count.
void submit_gather_batch(const TaskTag& tag, const SampleSource& source, std::span<const std::int64_t> indices,
                         const Augmentation* augmentation, Tensor& x, Tensor& targets, int tile);

}  // namespace dtnn::codelets
