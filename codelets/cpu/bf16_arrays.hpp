// SPDX-License-Identifier: Apache-2.0
// Whole arrays to and from bf16 (core/dtype.hpp's kBFloat16 tensors): each element rounded as bf16.hpp's
// float_to_bf16 (VCVTNEPS2BF16's rounding), and widened exactly. The AVX-512F bodies give the same bits, faster;
// these pick them where the CPU has AVX-512 (under DTNN_MAX_CPU_ISA).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtnn::kernels::cpu {

void floats_to_bf16(const float* src, std::size_t count, std::uint16_t* dst);
void bf16_to_floats(const std::uint16_t* src, std::size_t count, float* dst);

// A thread's scratch of at least `count` floats, kept for the thread's later calls (a codelet that computes in fp32
// and stores bf16 keeps one tile's worth per worker). Each `slot` (0, 1 or 2) is a separate buffer.
float* bf16_staging(int slot, std::size_t count);

}  // namespace dtnn::kernels::cpu
