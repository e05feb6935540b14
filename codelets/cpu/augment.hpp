// SPDX-License-Identifier: Apache-2.0
// Per-sample augmentation of NCHW float images, applied by the batch-loading task.
//
// The kernels are pure functions of their arguments: no allocation, no global state, no exceptions, so a task
// body may call them on any worker. Random choices come from a counter-based hash of a 64-bit seed (splitmix64),
// never from std:: distributions, whose output differs between standard libraries; a caller that derives the
// seed from (run seed, epoch, sample index) with augment_seed gets the same augmentation whatever the batch
// tiling, thread or machine.
#pragma once

#include <cstdint>

#include "core/augment_options.hpp"

namespace dtnn::kernels::cpu {

// Mirrors one sample along W in place: x[c][h][w] <-> x[c][h][width-1-w]. (PyDTNN flips the NHWC width axis
// of NCHW data, i.e. the height; this is the flip it meant.)
void flip_horizontal(float* sample, int channels, int height, int width);

// The standard CIFAR crop: src padded with `padding` zeros on every side, and the height x width window at
// offset (dy, dx) of the padded image written to dst. Offsets in [0, 2*padding] keep the window inside the
// padded image, (padding, padding) reproduces src. Other offsets are safe too: everything outside src reads
// as zero. src and dst must not overlap.
void random_crop_padded(const float* src, float* dst, int channels, int height, int width, int padding, int dy,
                        int dx);

// One sample's augmentation into dst: the crop first, then the flip. The flip decision and both crop offsets
// are separate hash draws of seed, so enabling the crop does not change which samples are flipped. With no
// augmentation enabled dst receives a copy. src and dst must not overlap unless they are equal and
// crop_padding is 0 (then the sample is augmented in place). Options are checked where they are set
// (check_augment_options), never here.
void augment_sample(const float* src, float* dst, int channels, int height, int width,
                    const AugmentOptions& options, std::uint64_t seed);

// A well-mixed seed for one sample of one epoch: every (run_seed, epoch, sample) gives an unrelated seed.
std::uint64_t augment_seed(std::uint64_t run_seed, std::uint64_t epoch, std::uint64_t sample);

}  // namespace dtnn::kernels::cpu
