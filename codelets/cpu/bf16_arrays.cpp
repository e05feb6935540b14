// SPDX-License-Identifier: Apache-2.0
#include "codelets/cpu/bf16_arrays.hpp"

#include <array>

#include "codelets/cpu/aligned_floats.hpp"
#include "codelets/cpu/bf16.hpp"
#include "codelets/cpu/convgemm_ukernels.hpp"
#include "core/cpu_features.hpp"

namespace dtnn::kernels::cpu {

void floats_to_bf16(const float* src, std::size_t count, std::uint16_t* dst) {
  if (cpu_has_avx512()) return floats_to_bf16_avx512(src, count, dst);
  for (std::size_t i = 0; i < count; ++i) dst[i] = float_to_bf16(src[i]);
}

void bf16_to_floats(const std::uint16_t* src, std::size_t count, float* dst) {
  if (cpu_has_avx512()) return bf16_to_floats_avx512(src, count, dst);
  for (std::size_t i = 0; i < count; ++i) dst[i] = bf16_to_float(src[i]);
}

float* bf16_staging(int slot, std::size_t count) {
  thread_local std::array<AlignedFloats, 3> buffers;
  return buffers.at(static_cast<std::size_t>(slot)).reserve(count);
}

}  // namespace dtnn::kernels::cpu
