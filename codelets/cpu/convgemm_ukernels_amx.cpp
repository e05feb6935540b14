// SPDX-License-Identifier: Apache-2.0
// The AMX micro-kernel of convgemm's bf16 passes (convgemm_ukernels.hpp): TDPBF16PS on 2 x 2 tiles of 16 x 16 fp32.
// Compiled with -mavx512f -mamx-tile -mamx-bf16 only (CMake); callers check cpu_has_amx_bf16() first, which also
// has Linux grant the tile state.
#include <immintrin.h>

#include <cstdint>

#include "codelets/cpu/convgemm_ukernels.hpp"

namespace dtnn::kernels::cpu {
namespace {

// Palette 1, tiles 0-7 each 16 rows of 64 bytes (16 fp32, or 16 pair words).
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

// In static memory: GCC 12 takes LDTILECFG for an instruction that reads nothing and drops the stores that fill a
// configuration on the stack (then TILEZERO faults: no tile configured).
constexpr TileConfig every_tile_16x64() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  return cfg;
}
const TileConfig kConfig = every_tile_16x64();

}  // namespace

void bf16_amx_begin() { _tile_loadconfig(&kConfig); }

void bf16_amx_end() { _tile_release(); }

// C tiles (rows v, columns u, row-major in the 32 x 32 scratch): 0 = v 0-15 x u 0-15, 1 = v 0-15 x u 16-31,
// 2 = v 16-31 x u 0-15, 3 = v 16-31 x u 16-31. TDPBF16PS's first operand (rows M = v): tiles 4 and 5, 16 rows of
// b each; its second (rows = pairs, columns N = u, VNNI's layout, which is the u-side pair panel): tiles 6 and 7,
// the panel's two halves of 16 columns.
void bf16gemm_ukr_amx_32x32(dim_t m, dim_t n, dim_t kp, const std::uint32_t* a, const std::uint32_t* b, float beta,
                            float* c, inc_t cs_c) {
  alignas(64) float tile[32 * 32];
  const bool two_rows = n > 16;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const auto row_bytes = static_cast<long>(kp * 4);
  for (dim_t t = 0; t < kp; t += 16) {
    _tile_loadd(4, b + t, row_bytes);
    _tile_loadd(6, a + t * 32, 128);
    _tile_loadd(7, a + t * 32 + 16, 128);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (two_rows) {
      _tile_loadd(5, b + 16 * kp + t, row_bytes);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, tile, 128);
  _tile_stored(1, tile + 16, 128);
  if (two_rows) {
    _tile_stored(2, tile + 16 * 32, 128);
    _tile_stored(3, tile + 16 * 32 + 16, 128);
  }
  const auto mu = static_cast<unsigned>(m < 32 ? m : 32);
  const __mmask16 lo = mu >= 16 ? 0xffff : static_cast<__mmask16>((1u << mu) - 1u);
  const __mmask16 hi = mu <= 16 ? 0 : mu >= 32 ? 0xffff : static_cast<__mmask16>((1u << (mu - 16)) - 1u);
  for (dim_t v = 0; v < n && v < 32; ++v) {
    float* cv = c + v * cs_c;
    const float* in = tile + v * 32;
    __m512 x0 = _mm512_load_ps(in);
    __m512 x1 = _mm512_load_ps(in + 16);
    if (beta != 0.0f) {
      x0 = _mm512_add_ps(_mm512_maskz_loadu_ps(lo, cv), x0);
      x1 = _mm512_add_ps(_mm512_maskz_loadu_ps(hi, cv + 16), x1);
    }
    _mm512_mask_storeu_ps(cv, lo, x0);
    _mm512_mask_storeu_ps(cv + 16, hi, x1);
  }
}

}  // namespace dtnn::kernels::cpu
