// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstddef>

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

void sgd_update(std::size_t count, const SgdParams& p, float* w, const float* g, float* v) {
  const float lr = p.lr;
  const float mu = p.momentum;
  const float wd = p.weight_decay;
  // PyTorch keeps no velocity without momentum, so callers may pass v = null then; the momentum term is
  // meaningless without a velocity buffer, and a null v with momentum != 0 is a caller error.
  if (v == nullptr) {
    for (std::size_t i = 0; i < count; ++i) {
      const float grad = g[i] + wd * w[i];
      w[i] -= lr * grad;
    }
    return;
  }
  if (p.nesterov != 0) {
    for (std::size_t i = 0; i < count; ++i) {
      const float grad = g[i] + wd * w[i];
      const float vel = mu * v[i] + grad;
      v[i] = vel;
      w[i] -= lr * (grad + mu * vel);
    }
  } else {
    for (std::size_t i = 0; i < count; ++i) {
      const float grad = g[i] + wd * w[i];
      const float vel = mu * v[i] + grad;
      v[i] = vel;
      w[i] -= lr * vel;
    }
  }
}

}  // namespace dtnn::kernels::cpu
