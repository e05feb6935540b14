// SPDX-License-Identifier: Apache-2.0
// DTNN_MAX_CPU_ISA: its parsing and the level it leaves the kernels (pure functions, every CPU and cap simulated),
// the BLIS configuration each level leads to, and that this process's kernels follow the level: ctest's
// kernels_isa_avx2 runs this binary under DTNN_MAX_CPU_ISA=avx2, so that an AVX-512 machine checks its AVX2 paths.
#include <blis.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "codelets/cpu/convgemm.hpp"
#include "codelets/cpu/winograd.hpp"
#include "core/blis_arch.hpp"
#include "core/cpu_features.hpp"
#include "core/errors.hpp"
#include "kernel_test_util.hpp"
#include "support/throws_with.hpp"

namespace dtnn::kernels::cpu {
namespace {

using test::conv_shape;
using test_support::throws_with;

constexpr CpuIsa kLevels[] = {CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512};

TEST(CpuIsaTest, CapIsALevelNameInAnyCaseAndUnsetIsNoCap) {
  EXPECT_EQ(parse_cpu_isa_cap("avx512"), CpuIsa::kAvx512);
  EXPECT_EQ(parse_cpu_isa_cap("AVX512"), CpuIsa::kAvx512);
  EXPECT_EQ(parse_cpu_isa_cap("Avx2"), CpuIsa::kAvx2);
  EXPECT_EQ(parse_cpu_isa_cap("generic"), CpuIsa::kGeneric);
  EXPECT_EQ(parse_cpu_isa_cap("GENERIC"), CpuIsa::kGeneric);
  EXPECT_EQ(parse_cpu_isa_cap(nullptr), std::nullopt);
  EXPECT_EQ(parse_cpu_isa_cap(""), std::nullopt);
}

TEST(CpuIsaTest, BadCapNamesTheVariableTheValueAndTheLevels) {
  for (const char* bad : {"avx3", "avx", " avx2", "AVX512F", "sse4.2", "none"}) {
    EXPECT_TRUE(throws_with<InvalidArgument>([&] { parse_cpu_isa_cap(bad); },
                                             {"DTNN_MAX_CPU_ISA", std::string("'") + bad + "'",
                                              "expected avx512, avx2 or generic"}))
        << bad;
    EXPECT_THROW(cpu_isa_setting(CpuIsa::kAvx512, bad), InvalidArgument) << bad;
  }
}

TEST(CpuIsaTest, KernelsGetTheLowerOfTheCpuAndTheCap) {
  for (const CpuIsa cpu : kLevels) {
    const CpuIsaSetting none = cpu_isa_setting(cpu, nullptr);
    EXPECT_EQ(none.effective, cpu);
    EXPECT_FALSE(none.capped());
    for (const CpuIsa cap : kLevels) {
      const CpuIsaSetting s = cpu_isa_setting(cpu, cpu_isa_name(cap));
      const char* what = cpu_isa_name(cpu);
      EXPECT_EQ(s.detected, cpu) << what;
      EXPECT_EQ(s.cap, cap) << what;
      EXPECT_EQ(s.effective, std::min(cpu, cap)) << what << " capped at " << cpu_isa_name(cap);
      EXPECT_EQ(s.capped(), cap < cpu) << what << " capped at " << cpu_isa_name(cap);
    }
  }
}

struct BlisCase {
  CpuIsa cpu;
  const char* cap;  // DTNN_MAX_CPU_ISA, null: unset
  bool amd;
  const char* user;  // BLIS_ARCH_TYPE, null: unset
  std::optional<arch_t> forced;
  std::vector<std::string> reason_parts;
  const char* not_in_reason = nullptr;
};

TEST(BlisArchTest, ConfigurationFollowsTheLevelAndTheUserWins) {
  const BlisCase cases[] = {
      {CpuIsa::kAvx512, nullptr, true, nullptr, BLIS_ARCH_SKX, {"AVX-512", "skx"}, "capped"},
      {CpuIsa::kAvx512, "avx512", false, nullptr, BLIS_ARCH_SKX, {"skx"}, "capped"},
      {CpuIsa::kAvx512, "avx2", true, nullptr, BLIS_ARCH_ZEN3, {"capped by DTNN_MAX_CPU_ISA=avx2, CPU avx512", "zen3"}},
      {CpuIsa::kAvx512, "AVX2", false, nullptr, BLIS_ARCH_HASWELL, {"capped by DTNN_MAX_CPU_ISA=avx2", "haswell"}},
      {CpuIsa::kAvx512, "generic", true, nullptr, BLIS_ARCH_GENERIC, {"DTNN_MAX_CPU_ISA=generic", "generic"}},
      {CpuIsa::kAvx2, "generic", false, nullptr, BLIS_ARCH_GENERIC, {"DTNN_MAX_CPU_ISA=generic"}},
      {CpuIsa::kGeneric, "generic", false, nullptr, BLIS_ARCH_GENERIC, {"DTNN_MAX_CPU_ISA=generic"}},
      // A cap at or above the CPU changes nothing.
      {CpuIsa::kAvx2, "avx2", true, nullptr, std::nullopt, {"BLIS's own CPU detection"}, "capped"},
      {CpuIsa::kAvx2, "avx512", false, nullptr, std::nullopt, {"BLIS's own CPU detection"}, "capped"},
      {CpuIsa::kAvx2, nullptr, true, nullptr, std::nullopt, {"BLIS's own CPU detection"}, "capped"},
      {CpuIsa::kGeneric, nullptr, false, nullptr, std::nullopt, {"BLIS's own CPU detection"}, "capped"},
      // The user's BLIS_ARCH_TYPE wins; the line still says that dtnn's own kernels are capped.
      {CpuIsa::kAvx512, nullptr, false, "3", std::nullopt, {"BLIS_ARCH_TYPE=3 set by the user"}, "capped"},
      {CpuIsa::kAvx512, "avx2", true, "0", std::nullopt,
       {"BLIS_ARCH_TYPE=0 set by the user", "own kernels capped by DTNN_MAX_CPU_ISA=avx2"}},
      {CpuIsa::kAvx512, nullptr, true, "", BLIS_ARCH_SKX, {"skx"}},
  };
  for (const BlisCase& c : cases) {
    const BlisArch a = choose_blis_arch(cpu_isa_setting(c.cpu, c.cap), c.amd, c.user);
    const std::string what = std::string(cpu_isa_name(c.cpu)) + " cap " + (c.cap ? c.cap : "unset") +
                             (c.amd ? " amd" : " intel") + " BLIS_ARCH_TYPE " + (c.user ? c.user : "unset");
    EXPECT_EQ(a.forced, c.forced) << what << ": " << a.reason;
    for (const std::string& part : c.reason_parts) {
      EXPECT_NE(a.reason.find(part), std::string::npos) << what << ": " << a.reason << " lacks " << part;
    }
    if (c.not_in_reason != nullptr) {
      EXPECT_EQ(a.reason.find(c.not_in_reason), std::string::npos) << what << ": " << a.reason;
    }
  }
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// This process: every kernel with code for an instruction set chooses by the effective level. Under
// DTNN_MAX_CPU_ISA=avx2 on an AVX-512 CPU (ctest kernels_isa_avx2): no AVX-512 micro-kernel, Winograd's AVX2
// variant, BLIS's haswell or zen3, and convgemm's AVX2 micro-kernel where its selection takes it.
TEST(CpuIsaTest, KernelsFollowTheEffectiveLevel) {
  const CpuIsaSetting& isa = cpu_isa_setting();
  const BlisArch& blis = configure_blis_arch();
  bli_init();  // bli_arch_query_id checks BLIS_ARCH_TYPE against an initialised BLIS
  const arch_t arch = bli_arch_query_id();
  const std::string arch_name = bli_arch_string(arch);
  const std::string line = std::string("CPU ") + cpu_isa_name(isa.detected) + ", kernels " +
                           cpu_isa_name(isa.effective) + ", BLIS " + arch_name + " (" + blis.reason + ")";
  if (blis.forced) {
    EXPECT_EQ(arch, *blis.forced) << line;
  }

  const auto own = convgemm_ukernels();
  EXPECT_EQ(own.front(), "blis") << line;
  EXPECT_EQ(contains(own, "avx512_32x8"), isa.effective >= CpuIsa::kAvx512) << line;
  EXPECT_EQ(contains(own, "avx512_48x8"), isa.effective >= CpuIsa::kAvx512) << line;
  EXPECT_EQ(contains(own, "avx2_24x4"), isa.effective >= CpuIsa::kAvx2) << line;
  EXPECT_THROW(convgemm_force_ukernel(isa.effective >= CpuIsa::kAvx512 ? "avx1024_64x64" : "avx512_32x8"),
               InvalidArgument);

  const auto winograd = winograd_ukernels();
  const Conv2dShape wino = conv_shape(2, 16, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  switch (isa.effective) {
    case CpuIsa::kAvx512:
      ASSERT_FALSE(winograd.empty()) << line;
      EXPECT_EQ(winograd.front(), "avx512_32x8") << line;
      break;
    case CpuIsa::kAvx2:
      EXPECT_EQ(winograd, std::vector<std::string>{"avx2_24x4"}) << line;
      break;
    case CpuIsa::kGeneric:
      EXPECT_TRUE(winograd.empty()) << line;
      break;
  }
  EXPECT_EQ(winograd_fits(wino), isa.effective >= CpuIsa::kAvx2) << line;

  // 64 -> 64 channels, 3x3 on 16x16: forward with 256-pixel planes, backward-weights with 576 im2col rows, which the
  // selections of docs/design.md (Convolution) give to our own micro-kernels on skx and on an AVX2 BLIS.
  const Conv2dShape layer = conv_shape(2, 64, 16, 16, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  if (isa.capped() && isa.effective == CpuIsa::kAvx2 && blis.forced) {
    EXPECT_TRUE(arch == BLIS_ARCH_HASWELL || arch == BLIS_ARCH_ZEN3) << line;
  }
  if (isa.capped() && isa.effective == CpuIsa::kGeneric && blis.forced) {
    EXPECT_EQ(arch, BLIS_ARCH_GENERIC) << line;
  }
  if (isa.effective == CpuIsa::kAvx512 && arch == BLIS_ARCH_SKX) {
    EXPECT_EQ(convgemm_ukernel(layer, ConvPass::kFwd), "avx512_48x8") << line;
    EXPECT_EQ(convgemm_ukernel(layer, ConvPass::kBwdWeights), "avx512_48x8") << line;
  } else if (isa.effective == CpuIsa::kAvx2 && (arch == BLIS_ARCH_HASWELL || arch == BLIS_ARCH_ZEN3)) {
    EXPECT_EQ(convgemm_ukernel(layer, ConvPass::kFwd), "avx2_24x4") << line;
    EXPECT_EQ(convgemm_ukernel(layer, ConvPass::kBwdWeights), "avx2_24x4") << line;
  } else if (isa.effective == CpuIsa::kGeneric) {
    EXPECT_EQ(convgemm_ukernel(layer, ConvPass::kFwd), "blis") << line;
    EXPECT_EQ(convgemm_ukernel(layer, ConvPass::kBwdWeights), "blis") << line;
  }
}

}  // namespace
}  // namespace dtnn::kernels::cpu
