// SPDX-License-Identifier: Apache-2.0
// The task variants that the public API names (Conv2dOptions, the activation layers, FitOptions' loss), without
// StarPU: the layers' and the training loop's headers include this one, not the codelets' headers, so that a
// program that builds and trains models compiles without StarPU's headers.
#pragma once

namespace dtnn::codelets {

enum class ConvAlgorithm {
  kConvgemm,  // implicit im2col inside a BLIS-style GEMM (no workspace)
  kIm2col,    // explicit im2col + bli_sgemm (the baseline)
  kWinograd,  // Winograd F(2x2, 3x3) forward and backward-data (3x3 stride-1 shapes only:
              // kernels::cpu::winograd_fits); backward-weights by convgemm
  kOneDnn,    // oneDNN's bf16 convolutions, all three passes (bf16 and bf16-amx only; codelets/cpu/onednn_conv.hpp)
};

const char* to_string(ConvAlgorithm a);

// The algorithm of each pass of a convolution layer: one for all three under an explicit --conv, each measured
// under auto. Winograd's weight gradients are convgemm's; any algorithm's passes in a bf16 precision are those
// codelets/conv2d.hpp lists.
// Which of a layer's batch tensors its container stores in bf16 (Layer::reads_bf16, writes_bf16): the input side (x
// and dx) and the output side (y and dy).
struct ConvIo {
  bool bf16_in = false;
  bool bf16_out = false;
};

struct ConvPlan {
  ConvAlgorithm fwd = ConvAlgorithm::kConvgemm;
  ConvAlgorithm bwd_data = ConvAlgorithm::kConvgemm;
  ConvAlgorithm bwd_weights = ConvAlgorithm::kConvgemm;
  static ConvPlan all(ConvAlgorithm a) { return {a, a, a}; }
  [[nodiscard]] bool uniform() const { return fwd == bwd_data && bwd_data == bwd_weights; }
};

// The arithmetic of a convolution (issue 37; which passes each algorithm runs in it: codelets/conv2d.hpp; dense
// layers stay fp32 until they have bf16 kernels): fp32; bf16 (inputs rounded to bf16, products summed in fp32 by
// AVX512-BF16's vdpbf16ps: CPU workers only); bf16-emulated, the same results bit for bit on any x86-64 CPU,
// slowly; or bf16-amx, the same rounded inputs summed in fp32 by AMX's TDPBF16PS (Intel Sapphire Rapids and later),
// with bits of its own (no emulation). The codelets of each have names of their own, so that performance models
// and calibrations never mix them. tf32: on GPUs, cuDNN's convolutions and cuBLAS's dense GEMMs in TF32 tensor-core
// math (inputs rounded to a 10-bit significand, sums in fp32; PyTorch's allow_tf32); CPU workers compute in fp32
// (CPUs have no TF32), in codelets of tf32 names all the same.
enum class Precision { kFp32, kBf16, kBf16Emulated, kBf16Amx, kTf32 };

const char* to_string(Precision p);
// Whether the precision rounds the convolutions' inputs to bf16 (bf16, bf16-emulated, bf16-amx).
constexpr bool is_bf16(Precision p) {
  return p == Precision::kBf16 || p == Precision::kBf16Emulated || p == Precision::kBf16Amx;
}

enum class ActivationKind : int { kSigmoid = 0, kTanh, kLeakyRelu, kElu, kGelu, kGeluTanh };

struct ActivationSpec {
  ActivationKind kind = ActivationKind::kSigmoid;
  float param = 0.0f;  // LeakyReLU: negative slope; ELU: alpha; unused otherwise
};

enum class LossKind {
  kCategoricalCrossEntropy,  // softmax + cross-entropy (single-label classification)
  kBinaryCrossEntropy,       // sigmoid + binary cross-entropy per class (multi-label)
};

const char* to_string(LossKind k);

// What the BatchNorm forward task does after normalising (codelets/batch_norm.hpp).
struct BatchNormEpilogue;

}  // namespace dtnn::codelets
