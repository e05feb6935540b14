// SPDX-License-Identifier: Apache-2.0
// Per-sample augmentation and per-channel normalisation of NCHW float images.
//
// The sample kernels are pure functions of their arguments: no allocation, no global state, no exceptions,
// so a task body may call them on any worker. Random choices come from a counter-based hash of a 64-bit seed
// (splitmix64), never from std:: distributions, whose output differs between standard libraries; a caller
// that derives the seed from (run seed, epoch, sample index) with augment_seed gets the same augmentation
// whatever the batch tiling, thread or machine.
#pragma once

#include <cstdint>
#include <vector>

#include "io/dataset.hpp"

namespace dtnn::io {

// Mirrors one sample along W in place: x[c][h][w] <-> x[c][h][width-1-w]. (PyDTNN flips the NHWC width axis
// of NCHW data, i.e. the height; this is the flip it meant.)
void flip_horizontal(float* sample, int channels, int height, int width);

// The standard CIFAR crop: src padded with `padding` zeros on every side, and the height x width window at
// offset (dy, dx) of the padded image written to dst. Offsets in [0, 2*padding] keep the window inside the
// padded image, (padding, padding) reproduces src. Other offsets are safe too: everything outside src reads
// as zero. src and dst must not overlap.
void random_crop_padded(const float* src, float* dst, int channels, int height, int width, int padding, int dy,
                        int dx);

struct AugmentOptions {
  int flip = 0;          // nonzero: mirror along W with probability 1/2
  int crop_padding = 0;  // above zero: random_crop_padded at a uniform offset in [0, 2*crop_padding]^2
};

// InvalidArgument when flip is not 0 or 1 or crop_padding is negative. Call it where the options are set,
// since augment_sample itself never throws (a negative padding there means no crop).
void check_augment_options(const AugmentOptions& options);

// One sample's augmentation into dst: the crop first, then the flip. The flip decision and both crop offsets
// are separate hash draws of seed, so enabling the crop does not change which samples are flipped. With no
// augmentation enabled dst receives a copy. src and dst must not overlap unless they are equal and
// crop_padding is 0 (then the sample is augmented in place).
void augment_sample(const float* src, float* dst, int channels, int height, int width,
                    const AugmentOptions& options, std::uint64_t seed);

// A well-mixed seed for one sample of one epoch: every (run_seed, epoch, sample) gives an unrelated seed.
std::uint64_t augment_seed(std::uint64_t run_seed, std::uint64_t epoch, std::uint64_t sample);

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
