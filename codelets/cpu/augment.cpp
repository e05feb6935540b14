// SPDX-License-Identifier: Apache-2.0
#include "codelets/cpu/augment.hpp"

#include <algorithm>
#include <cstddef>

namespace dtnn::kernels::cpu {
namespace {

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;  // splitmix64's increment

// splitmix64's output function: a bijection on 64 bits with full avalanche.
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Output `index` of a splitmix64 stream started at seed, computed directly: draws are independent of each
// other's order, which is what makes the augmentation counter-based.
std::uint64_t draw(std::uint64_t seed, std::uint64_t index) {
  return mix64(seed + (index + 1) * kGolden);
}

// Uniform in [0, bound) for bound < 2^32 from the top 32 bits (multiply-shift). The bias is below 2^-32 per
// value, far under anything augmentation can notice, and the result is exact integer arithmetic everywhere.
std::uint64_t below(std::uint64_t bits, std::uint64_t bound) {
  return ((bits >> 32) * bound) >> 32;
}

enum Draw : std::uint64_t { kFlipDraw = 0, kRowDraw = 1, kColumnDraw = 2 };

}  // namespace

void flip_horizontal(float* sample, int channels, int height, int width) {
  const std::int64_t rows = std::int64_t{channels} * height;
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = sample + r * width;
    std::reverse(row, row + width);
  }
}

void random_crop_padded(const float* src, float* dst, int channels, int height, int width, int padding, int dy,
                        int dx) {
  // dst[y][x] = src[y + dy - padding][x + dx - padding], zero where that leaves src. For each row the valid
  // columns form one interval, so a row is a zero run, a copy and a zero run.
  const std::int64_t shift_y = std::int64_t{dy} - padding;
  const std::int64_t shift_x = std::int64_t{dx} - padding;
  const std::int64_t x_begin = std::clamp<std::int64_t>(-shift_x, 0, width);
  const std::int64_t x_end = std::clamp<std::int64_t>(width - shift_x, x_begin, width);
  for (std::int64_t c = 0; c < channels; ++c) {
    const float* plane = src + c * height * width;
    for (std::int64_t y = 0; y < height; ++y) {
      float* out = dst + (c * height + y) * width;
      const std::int64_t sy = y + shift_y;
      if (sy < 0 || sy >= height) {
        std::fill(out, out + width, 0.0f);
        continue;
      }
      const float* in = plane + sy * width;
      std::fill(out, out + x_begin, 0.0f);
      if (x_begin < x_end) {
        std::copy(in + x_begin + shift_x, in + x_end + shift_x, out + x_begin);
      }
      std::fill(out + x_end, out + width, 0.0f);
    }
  }
}

void augment_sample(const float* src, float* dst, int channels, int height, int width,
                    const AugmentOptions& options, std::uint64_t seed) {
  if (options.crop_padding > 0) {
    const std::uint64_t span = 2 * static_cast<std::uint64_t>(options.crop_padding) + 1;
    const auto dy = static_cast<int>(below(draw(seed, kRowDraw), span));
    const auto dx = static_cast<int>(below(draw(seed, kColumnDraw), span));
    random_crop_padded(src, dst, channels, height, width, options.crop_padding, dy, dx);
  } else if (src != dst) {
    std::copy(src, src + std::int64_t{channels} * height * width, dst);
  }
  if (options.flip && (draw(seed, kFlipDraw) >> 63) != 0) {
    flip_horizontal(dst, channels, height, width);
  }
}

std::uint64_t augment_seed(std::uint64_t run_seed, std::uint64_t epoch, std::uint64_t sample) {
  // Each step is a bijection of its new input for a fixed state, so distinct epochs (or samples) under the
  // same prefix never share a seed.
  std::uint64_t h = mix64(run_seed + kGolden);
  h = mix64(h + epoch + kGolden);
  return mix64(h + sample + kGolden);
}

}  // namespace dtnn::kernels::cpu
