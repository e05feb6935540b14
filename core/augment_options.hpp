// SPDX-License-Identifier: Apache-2.0
// Options of the per-sample training-time augmentation (kernels::cpu::augment_sample), shared by the kernel, the
// batch-loading task that applies it and the training options that set it.
#pragma once

#include <string>

#include "core/errors.hpp"

namespace dtnn {

struct AugmentOptions {
  bool flip = false;     // mirror along W with probability 1/2
  int crop_padding = 0;  // above zero: random_crop_padded at a uniform offset in [0, 2*crop_padding]^2
};

// InvalidArgument when crop_padding is negative. Call it where the options are set, since augment_sample itself
// never throws (a negative padding there means no crop).
inline void check_augment_options(const AugmentOptions& options) {
  if (options.crop_padding < 0) {
    throw InvalidArgument("AugmentOptions: crop_padding must be at least 0, got " +
                          std::to_string(options.crop_padding));
  }
}

}  // namespace dtnn
