// SPDX-License-Identifier: Apache-2.0
// The kernels that merge tensors: fixed-order sums (tile sums of gradients, residual Add) and channel
// concatenation with its inverse. codelets/cuda/merge.cu is their CUDA twin.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "codelets/cpu/kernels.hpp"

namespace dtnn::kernels::cpu {
namespace {

// Blocks of elements go through a local accumulator: each element still sees its additions in source order
// (bitwise identical to the scalar loop), the inner loops vectorise across elements, the block stays in L1, and
// dst may be one of the sources because every dst element is written only after all its inputs were read.
constexpr std::size_t kBlock = 512;

void add_sources(std::size_t len, std::size_t offset, int nsrc, const float* const* src, float* acc) {
  for (int s = 0; s < nsrc; ++s) {
    const float* p = src[s] + offset;
    for (std::size_t i = 0; i < len; ++i) {
      acc[i] += p[i];
    }
  }
}

}  // namespace

void sum_fixed_order(std::size_t count, int nsrc, const float* const* src, float* dst) {
  if (nsrc <= 0) {
    std::fill_n(dst, count, 0.0f);
    return;
  }
  alignas(64) float acc[kBlock];
  for (std::size_t begin = 0; begin < count; begin += kBlock) {
    const std::size_t len = std::min(kBlock, count - begin);
    std::copy_n(src[0] + begin, len, acc);
    add_sources(len, begin, nsrc - 1, src + 1, acc);
    std::copy_n(acc, len, dst + begin);
  }
}

void sum_fixed_order_relu(std::size_t count, int nsrc, const float* const* src, float* dst) {
  if (nsrc <= 0) {
    std::fill_n(dst, count, 0.0f);
    return;
  }
  alignas(64) float acc[kBlock];
  for (std::size_t begin = 0; begin < count; begin += kBlock) {
    const std::size_t len = std::min(kBlock, count - begin);
    std::copy_n(src[0] + begin, len, acc);
    add_sources(len, begin, nsrc - 1, src + 1, acc);
    for (std::size_t i = 0; i < len; ++i) {
      dst[begin + i] = acc[i] < 0.0f ? 0.0f : acc[i];
    }
  }
}

void accumulate_fixed_order(std::size_t count, int nsrc, const float* const* src, float* dst) {
  if (nsrc <= 0) {
    return;
  }
  alignas(64) float acc[kBlock];
  for (std::size_t begin = 0; begin < count; begin += kBlock) {
    const std::size_t len = std::min(kBlock, count - begin);
    std::copy_n(dst + begin, len, acc);
    add_sources(len, begin, nsrc, src, acc);
    std::copy_n(acc, len, dst + begin);
  }
}

void concat_fwd(int n, int nparts, const float* const* parts, const std::int64_t* part_elems, float* y) {
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < nparts; ++p) {
      const std::size_t len = static_cast<std::size_t>(part_elems[p]);
      std::memcpy(y, parts[p] + i * len, len * sizeof(float));
      y += len;
    }
  }
}

void concat_bwd_data(int n, int nparts, const float* dy, const std::int64_t* part_elems, float* const* parts) {
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < nparts; ++p) {
      const std::size_t len = static_cast<std::size_t>(part_elems[p]);
      std::memcpy(parts[p] + i * len, dy, len * sizeof(float));
      dy += len;
    }
  }
}

}  // namespace dtnn::kernels::cpu
