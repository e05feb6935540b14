// SPDX-License-Identifier: Apache-2.0
// Per-channel statistics of a dataset and the normalisation of its images with them. (Per-sample augmentation is
// applied by the batch-loading task: codelets/cpu/augment.hpp.)
#pragma once

#include <vector>

#include "io/dataset.hpp"

namespace dtnn::io {

// Per-channel mean and population standard deviation (divisor N, as numpy's std that PyDTNN uses).
struct ChannelStats {
  std::vector<float> mean;
  std::vector<float> std;
};

// Computed in double over every pixel of the training set, in two passes (mean, then squared deviations), so
// that the 51 million values per CIFAR channel lose nothing to float accumulation. InvalidArgument for an
// empty dataset or one whose images do not match its shape and label count.
ChannelStats channel_stats(const Dataset& train);

// (x - mean[c]) / std[c] over one sample in place; a std of 0 (a constant channel) divides by 1 instead.
// stats must hold `channels` entries each, which normalize checks and this kernel does not.
void normalize_sample(float* sample, int channels, int height, int width, const ChannelStats& stats);

// normalize_sample over every sample of d, in place. Afterwards the images are no longer in [0,1]. Pass the
// training set's statistics for the test set too, as PyDTNN does, so both see the same transform.
// InvalidArgument when stats do not have d.channels entries or hold a negative or non-finite value.
void normalize(Dataset& d, const ChannelStats& stats);

}  // namespace dtnn::io
