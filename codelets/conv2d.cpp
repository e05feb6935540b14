// SPDX-License-Identifier: Apache-2.0
#include "codelets/conv2d.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "codelets/cpu/bf16_arrays.hpp"
#include "codelets/cpu/convgemm.hpp"
#include "codelets/cpu/onednn_conv.hpp"
#include "codelets/cpu/winograd.hpp"
#include "runtime/failure.hpp"
#include "runtime/machine.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/conv2d_cudnn.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

struct ConvArgs {
  Conv2dShape shape;
  int relu;
};

// Each pass with a bias has a codelet with the bias and one without (Bias), each with its fixed buffer list; the
// bias buffer comes last, so the other buffers keep their indices in both.
enum class Bias { kWithout, kWith };

// bf16 batch tensors (core/dtype.hpp's kBFloat16: x and dx, y and dy, where the container stores them in bf16) for
// the kernels that take fp32, told apart by the buffers' element sizes: an input widened (exactly) into one of the
// worker's staging buffers (x: 2, y or dy: 0); an output computed in buffer 1 and rounded as stored (store_output).
// oneDNN reads and writes bf16 itself. Such tasks come under codelets of their own names (with_bf16, common.hpp).
constexpr int kStageY = 0, kStageOut = 1, kStageX = 2;

const float* fp32_input(void* buffer, int slot) {
  if (!runtime::vector_is_bf16(buffer)) return runtime::vector_ptr(buffer);
  const std::size_t count = runtime::vector_size(buffer);
  float* staged = kernels::cpu::bf16_staging(slot, count);
  kernels::cpu::bf16_to_floats(runtime::vector_ptr_as<const std::uint16_t>(buffer), count, staged);
  return staged;
}

float* fp32_output(void* buffer) {
  return runtime::vector_is_bf16(buffer) ? kernels::cpu::bf16_staging(kStageOut, runtime::vector_size(buffer))
                             : runtime::vector_ptr(buffer);
}

void store_output(void* buffer, const float* computed) {
  if (runtime::vector_is_bf16(buffer)) {
    kernels::cpu::floats_to_bf16(computed, runtime::vector_size(buffer), runtime::vector_ptr_as<std::uint16_t>(buffer));
  }
}

// Buffers: x, w, y, then b with the bias.
template <ConvAlgorithm A, Bias B>
void conv2d_fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConvArgs>(cl_arg);
  const float* x = fp32_input(buffers[0], kStageX);
  const float* w = runtime::vector_ptr(buffers[1]);
  float* y = fp32_output(buffers[2]);
  const float* b = B == Bias::kWith ? runtime::vector_ptr(buffers[3]) : nullptr;
  if constexpr (A == ConvAlgorithm::kConvgemm) {
    kernels::cpu::conv2d_fwd_convgemm(a.shape, x, w, b, a.relu, y);
  } else if constexpr (A == ConvAlgorithm::kWinograd) {
    kernels::cpu::conv2d_fwd_winograd(a.shape, x, w, b, a.relu, y);
  } else {
    kernels::cpu::conv2d_fwd_im2col(a.shape, x, w, b, y);
    if (a.relu) {
      const std::size_t count = static_cast<std::size_t>(a.shape.n) * a.shape.k * a.shape.out_h() * a.shape.out_w();
      kernels::cpu::relu_fwd(count, y, y);
    }
  }
  store_output(buffers[2], y);
}

// Buffers: dy, w, dx.
template <ConvAlgorithm A>
void conv2d_bwd_data_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConvArgs>(cl_arg);
  const float* dy = fp32_input(buffers[0], kStageY);
  const float* w = runtime::vector_ptr(buffers[1]);
  float* dx = fp32_output(buffers[2]);
  if constexpr (A == ConvAlgorithm::kConvgemm) {
    kernels::cpu::conv2d_bwd_data_convgemm(a.shape, dy, w, dx);
  } else if constexpr (A == ConvAlgorithm::kWinograd) {
    kernels::cpu::conv2d_bwd_data_winograd(a.shape, dy, w, dx);
  } else {
    kernels::cpu::conv2d_bwd_data_im2col(a.shape, dy, w, dx);
  }
  store_output(buffers[2], dx);
}

// Buffers: x, w, y, then b with the bias.
template <kernels::cpu::Bf16Math M, Bias B>
void conv2d_fwd_bf16_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConvArgs>(cl_arg);
  const float* x = fp32_input(buffers[0], kStageX);
  const float* w = runtime::vector_ptr(buffers[1]);
  float* y = fp32_output(buffers[2]);
  const float* b = B == Bias::kWith ? runtime::vector_ptr(buffers[3]) : nullptr;
  kernels::cpu::conv2d_fwd_convgemm_bf16(a.shape, x, w, b, a.relu, y, M);
  store_output(buffers[2], y);
}

// Buffers: dy, w, dx.
template <kernels::cpu::Bf16Math M>
void conv2d_bwd_data_bf16_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConvArgs>(cl_arg);
  const float* dy = fp32_input(buffers[0], kStageY);
  const float* w = runtime::vector_ptr(buffers[1]);
  float* dx = fp32_output(buffers[2]);
  kernels::cpu::conv2d_bwd_data_convgemm_bf16(a.shape, dy, w, dx, M);
  store_output(buffers[2], dx);
}

// Buffers: x, dy, dw, then db with the bias.
template <kernels::cpu::Bf16Math M, Bias B>
void conv2d_bwd_weights_bf16_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConvArgs>(cl_arg);
  const float* x = fp32_input(buffers[0], kStageX);
  const float* dy = fp32_input(buffers[1], kStageY);
  float* dw = runtime::vector_ptr(buffers[2]);
  float* db = B == Bias::kWith ? runtime::vector_ptr(buffers[3]) : nullptr;
  kernels::cpu::conv2d_bwd_weights_convgemm_bf16(a.shape, x, dy, dw, db, M);
}

// Buffers: x, dy, dw, then db with the bias.
template <ConvAlgorithm A, Bias B>
void conv2d_bwd_weights_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConvArgs>(cl_arg);
  const float* x = fp32_input(buffers[0], kStageX);
  const float* dy = fp32_input(buffers[1], kStageY);
  float* dw = runtime::vector_ptr(buffers[2]);
  float* db = B == Bias::kWith ? runtime::vector_ptr(buffers[3]) : nullptr;
  if constexpr (A == ConvAlgorithm::kConvgemm) {
    kernels::cpu::conv2d_bwd_weights_convgemm(a.shape, x, dy, dw, db);
  } else {
    kernels::cpu::conv2d_bwd_weights_im2col(a.shape, x, dy, dw, db);
  }
}

// oneDNN's bf16 passes, buffers as above.
template <Bias B>
void conv2d_fwd_onednn_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConvArgs>(cl_arg);
  const float* b = B == Bias::kWith ? runtime::vector_ptr(buffers[3]) : nullptr;
  kernels::cpu::conv2d_fwd_onednn_bf16(a.shape, runtime::vector_ptr_as<const void>(buffers[0]),
                                       runtime::vector_ptr(buffers[1]), b, a.relu,
                                       runtime::vector_ptr_as<void>(buffers[2]), runtime::vector_is_bf16(buffers[0]),
                                       runtime::vector_is_bf16(buffers[2]));
}

void conv2d_bwd_data_onednn_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConvArgs>(cl_arg);
  kernels::cpu::conv2d_bwd_data_onednn_bf16(a.shape, runtime::vector_ptr_as<const void>(buffers[0]),
                                            runtime::vector_ptr(buffers[1]), runtime::vector_ptr_as<void>(buffers[2]),
                                            runtime::vector_is_bf16(buffers[2]), runtime::vector_is_bf16(buffers[0]));
}

template <Bias B>
void conv2d_bwd_weights_onednn_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConvArgs>(cl_arg);
  float* db = B == Bias::kWith ? runtime::vector_ptr(buffers[3]) : nullptr;
  kernels::cpu::conv2d_bwd_weights_onednn_bf16(a.shape, runtime::vector_ptr_as<const void>(buffers[0]),
                                               runtime::vector_ptr_as<const void>(buffers[1]),
                                               runtime::vector_ptr(buffers[2]), db, runtime::vector_is_bf16(buffers[0]),
                                               runtime::vector_is_bf16(buffers[1]));
}

#ifdef DTNN_HAVE_CUDA
// One CUDA body per pass serves both algorithms' codelets: the CPU algorithm choice means nothing on a GPU, where
// cuDNN picks its own (codelets/cuda/conv2d_cudnn.hpp).
// Tf32: cuDNN's TF32 math (--precision tf32), in codelets of their own.
kernels::cuda::CudnnContext cudnn_context(bool tf32) {
  return {runtime::cuda::cudnn(), runtime::cuda::stream(), runtime::cuda::device(), tf32};
}

template <Bias B, bool Tf32 = false>
void conv2d_fwd_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConvArgs>(cl_arg);
  const float* x = runtime::vector_ptr(buffers[0]);
  const float* w = runtime::vector_ptr(buffers[1]);
  float* y = runtime::vector_ptr(buffers[2]);
  const float* b = B == Bias::kWith ? runtime::vector_ptr(buffers[3]) : nullptr;
  const kernels::cuda::CudnnContext ctx = cudnn_context(Tf32);
  const std::size_t bytes = kernels::cuda::conv2d_workspace_bytes(a.shape, kernels::cuda::ConvPass::kFwd, ctx);
  kernels::cuda::conv2d_fwd(a.shape, x, w, b, a.relu, y, runtime::cuda::workspace(bytes), bytes, ctx);
  DTNN_CUDA_CHECK(cudaGetLastError(), "conv2d_fwd");
}

template <bool Tf32 = false>
void conv2d_bwd_data_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConvArgs>(cl_arg);
  const float* dy = runtime::vector_ptr(buffers[0]);
  const float* w = runtime::vector_ptr(buffers[1]);
  float* dx = runtime::vector_ptr(buffers[2]);
  const kernels::cuda::CudnnContext ctx = cudnn_context(Tf32);
  const std::size_t bytes = kernels::cuda::conv2d_workspace_bytes(a.shape, kernels::cuda::ConvPass::kBwdData, ctx);
  kernels::cuda::conv2d_bwd_data(a.shape, dy, w, dx, runtime::cuda::workspace(bytes), bytes, ctx);
  DTNN_CUDA_CHECK(cudaGetLastError(), "conv2d_bwd_data");
}

template <Bias B, bool Tf32 = false>
void conv2d_bwd_weights_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ConvArgs>(cl_arg);
  const float* x = runtime::vector_ptr(buffers[0]);
  const float* dy = runtime::vector_ptr(buffers[1]);
  float* dw = runtime::vector_ptr(buffers[2]);
  float* db = B == Bias::kWith ? runtime::vector_ptr(buffers[3]) : nullptr;
  const kernels::cuda::CudnnContext ctx = cudnn_context(Tf32);
  const std::size_t bytes =
      kernels::cuda::conv2d_workspace_bytes(a.shape, kernels::cuda::ConvPass::kBwdWeights, ctx);
  kernels::cuda::conv2d_bwd_weights(a.shape, x, dy, dw, db, runtime::cuda::workspace(bytes), bytes, ctx);
  DTNN_CUDA_CHECK(cudaGetLastError(), "conv2d_bwd_weights");
}
#endif

constexpr auto kConvgemm = ConvAlgorithm::kConvgemm;
constexpr auto kIm2col = ConvAlgorithm::kIm2col;
constexpr auto kWinograd = ConvAlgorithm::kWinograd;

// The codelets of one pass: [algorithm][bias]. The with-bias codelets keep the names that traces showed before the
// variants had codelets of their own; the others add "_nobias".
using CodeletTable = std::array<std::array<runtime::Codelet*, 2>, 3>;

runtime::Codelet cl_fwd_convgemm("conv2d_fwd_convgemm", runtime::guarded<conv2d_fwd_cpu<kConvgemm, Bias::kWith>>,
                                 DTNN_CUDA_FUNC(runtime::guarded<conv2d_fwd_cuda<Bias::kWith>>),
                                 {STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_fwd_convgemm_nobias("conv2d_fwd_convgemm_nobias",
                                        runtime::guarded<conv2d_fwd_cpu<kConvgemm, Bias::kWithout>>,
                                        DTNN_CUDA_FUNC(runtime::guarded<conv2d_fwd_cuda<Bias::kWithout>>),
                                        {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_fwd_im2col("conv2d_fwd_im2col", runtime::guarded<conv2d_fwd_cpu<kIm2col, Bias::kWith>>,
                               DTNN_CUDA_FUNC(runtime::guarded<conv2d_fwd_cuda<Bias::kWith>>),
                               {STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_fwd_im2col_nobias("conv2d_fwd_im2col_nobias",
                                      runtime::guarded<conv2d_fwd_cpu<kIm2col, Bias::kWithout>>,
                                      DTNN_CUDA_FUNC(runtime::guarded<conv2d_fwd_cuda<Bias::kWithout>>),
                                      {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_fwd_winograd("conv2d_fwd_winograd", runtime::guarded<conv2d_fwd_cpu<kWinograd, Bias::kWith>>,
                                 DTNN_CUDA_FUNC(runtime::guarded<conv2d_fwd_cuda<Bias::kWith>>),
                                 {STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_fwd_winograd_nobias("conv2d_fwd_winograd_nobias",
                                        runtime::guarded<conv2d_fwd_cpu<kWinograd, Bias::kWithout>>,
                                        DTNN_CUDA_FUNC(runtime::guarded<conv2d_fwd_cuda<Bias::kWithout>>),
                                        {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_data_winograd("conv2d_bwd_data_winograd", runtime::guarded<conv2d_bwd_data_cpu<kWinograd>>,
                                      DTNN_CUDA_FUNC(runtime::guarded<conv2d_bwd_data_cuda<>>),
                                      {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_data_convgemm("conv2d_bwd_data_convgemm", runtime::guarded<conv2d_bwd_data_cpu<kConvgemm>>,
                                      DTNN_CUDA_FUNC(runtime::guarded<conv2d_bwd_data_cuda<>>),
                                      {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_data_im2col("conv2d_bwd_data_im2col", runtime::guarded<conv2d_bwd_data_cpu<kIm2col>>,
                                    DTNN_CUDA_FUNC(runtime::guarded<conv2d_bwd_data_cuda<>>),
                                    {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_weights_convgemm("conv2d_bwd_weights_convgemm",
                                         runtime::guarded<conv2d_bwd_weights_cpu<kConvgemm, Bias::kWith>>,
                                         DTNN_CUDA_FUNC(runtime::guarded<conv2d_bwd_weights_cuda<Bias::kWith>>),
                                         {STARPU_R, STARPU_R, STARPU_W, STARPU_W});
runtime::Codelet cl_bwd_weights_convgemm_nobias(
    "conv2d_bwd_weights_convgemm_nobias", runtime::guarded<conv2d_bwd_weights_cpu<kConvgemm, Bias::kWithout>>,
    DTNN_CUDA_FUNC(runtime::guarded<conv2d_bwd_weights_cuda<Bias::kWithout>>), {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_weights_im2col("conv2d_bwd_weights_im2col",
                                       runtime::guarded<conv2d_bwd_weights_cpu<kIm2col, Bias::kWith>>,
                                       DTNN_CUDA_FUNC(runtime::guarded<conv2d_bwd_weights_cuda<Bias::kWith>>),
                                       {STARPU_R, STARPU_R, STARPU_W, STARPU_W});
runtime::Codelet cl_bwd_weights_im2col_nobias(
    "conv2d_bwd_weights_im2col_nobias", runtime::guarded<conv2d_bwd_weights_cpu<kIm2col, Bias::kWithout>>,
    DTNN_CUDA_FUNC(runtime::guarded<conv2d_bwd_weights_cuda<Bias::kWithout>>), {STARPU_R, STARPU_R, STARPU_W});

// --precision tf32: the fp32 CPU bodies (CPUs have no TF32) and cuDNN's TF32 math on GPUs, names of their own.
runtime::Codelet cl_fwd_convgemm_tf32("conv2d_fwd_convgemm_tf32",
                                      runtime::guarded<conv2d_fwd_cpu<kConvgemm, Bias::kWith>>,
                                      DTNN_CUDA_FUNC((runtime::guarded<conv2d_fwd_cuda<Bias::kWith, true>>)),
                                      {STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_fwd_convgemm_tf32_nobias("conv2d_fwd_convgemm_tf32_nobias",
                                             runtime::guarded<conv2d_fwd_cpu<kConvgemm, Bias::kWithout>>,
                                             DTNN_CUDA_FUNC((runtime::guarded<conv2d_fwd_cuda<Bias::kWithout, true>>)),
                                             {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_fwd_im2col_tf32("conv2d_fwd_im2col_tf32", runtime::guarded<conv2d_fwd_cpu<kIm2col, Bias::kWith>>,
                                    DTNN_CUDA_FUNC((runtime::guarded<conv2d_fwd_cuda<Bias::kWith, true>>)),
                                    {STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_fwd_im2col_tf32_nobias("conv2d_fwd_im2col_tf32_nobias",
                                           runtime::guarded<conv2d_fwd_cpu<kIm2col, Bias::kWithout>>,
                                           DTNN_CUDA_FUNC((runtime::guarded<conv2d_fwd_cuda<Bias::kWithout, true>>)),
                                           {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_fwd_winograd_tf32("conv2d_fwd_winograd_tf32",
                                      runtime::guarded<conv2d_fwd_cpu<kWinograd, Bias::kWith>>,
                                      DTNN_CUDA_FUNC((runtime::guarded<conv2d_fwd_cuda<Bias::kWith, true>>)),
                                      {STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_fwd_winograd_tf32_nobias("conv2d_fwd_winograd_tf32_nobias",
                                             runtime::guarded<conv2d_fwd_cpu<kWinograd, Bias::kWithout>>,
                                             DTNN_CUDA_FUNC((runtime::guarded<conv2d_fwd_cuda<Bias::kWithout, true>>)),
                                             {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_data_convgemm_tf32("conv2d_bwd_data_convgemm_tf32",
                                           runtime::guarded<conv2d_bwd_data_cpu<kConvgemm>>,
                                           DTNN_CUDA_FUNC(runtime::guarded<conv2d_bwd_data_cuda<true>>),
                                           {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_data_im2col_tf32("conv2d_bwd_data_im2col_tf32", runtime::guarded<conv2d_bwd_data_cpu<kIm2col>>,
                                         DTNN_CUDA_FUNC(runtime::guarded<conv2d_bwd_data_cuda<true>>),
                                         {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_data_winograd_tf32("conv2d_bwd_data_winograd_tf32",
                                           runtime::guarded<conv2d_bwd_data_cpu<kWinograd>>,
                                           DTNN_CUDA_FUNC(runtime::guarded<conv2d_bwd_data_cuda<true>>),
                                           {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_weights_convgemm_tf32(
    "conv2d_bwd_weights_convgemm_tf32", runtime::guarded<conv2d_bwd_weights_cpu<kConvgemm, Bias::kWith>>,
    DTNN_CUDA_FUNC((runtime::guarded<conv2d_bwd_weights_cuda<Bias::kWith, true>>)),
    {STARPU_R, STARPU_R, STARPU_W, STARPU_W});
runtime::Codelet cl_bwd_weights_convgemm_tf32_nobias(
    "conv2d_bwd_weights_convgemm_tf32_nobias", runtime::guarded<conv2d_bwd_weights_cpu<kConvgemm, Bias::kWithout>>,
    DTNN_CUDA_FUNC((runtime::guarded<conv2d_bwd_weights_cuda<Bias::kWithout, true>>)), {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_weights_im2col_tf32(
    "conv2d_bwd_weights_im2col_tf32", runtime::guarded<conv2d_bwd_weights_cpu<kIm2col, Bias::kWith>>,
    DTNN_CUDA_FUNC((runtime::guarded<conv2d_bwd_weights_cuda<Bias::kWith, true>>)),
    {STARPU_R, STARPU_R, STARPU_W, STARPU_W});
runtime::Codelet cl_bwd_weights_im2col_tf32_nobias(
    "conv2d_bwd_weights_im2col_tf32_nobias", runtime::guarded<conv2d_bwd_weights_cpu<kIm2col, Bias::kWithout>>,
    DTNN_CUDA_FUNC((runtime::guarded<conv2d_bwd_weights_cuda<Bias::kWithout, true>>)), {STARPU_R, STARPU_R, STARPU_W});

// bf16: CPU bodies only (a GPU would compute in fp32 under the same name), one set of codelets per kind of bf16
// math, named with its suffix (conv2d_fwd_convgemm_bf16, ..._bf16emu, ..._bf16amx), each with and without the bias.
runtime::Codelet cl_fwd_bf16("conv2d_fwd_convgemm_bf16",
                             runtime::guarded<conv2d_fwd_bf16_cpu<kernels::cpu::Bf16Math::kAvx512Bf16, Bias::kWith>>,
                             {STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_fwd_bf16_nobias(
    "conv2d_fwd_convgemm_bf16_nobias",
    runtime::guarded<conv2d_fwd_bf16_cpu<kernels::cpu::Bf16Math::kAvx512Bf16, Bias::kWithout>>,
    {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_data_bf16("conv2d_bwd_data_convgemm_bf16",
                                  runtime::guarded<conv2d_bwd_data_bf16_cpu<kernels::cpu::Bf16Math::kAvx512Bf16>>,
                                  {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_weights_bf16(
    "conv2d_bwd_weights_convgemm_bf16",
    runtime::guarded<conv2d_bwd_weights_bf16_cpu<kernels::cpu::Bf16Math::kAvx512Bf16, Bias::kWith>>,
    {STARPU_R, STARPU_R, STARPU_W, STARPU_W});
runtime::Codelet cl_bwd_weights_bf16_nobias(
    "conv2d_bwd_weights_convgemm_bf16_nobias",
    runtime::guarded<conv2d_bwd_weights_bf16_cpu<kernels::cpu::Bf16Math::kAvx512Bf16, Bias::kWithout>>,
    {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_fwd_bf16emu("conv2d_fwd_convgemm_bf16emu",
                                runtime::guarded<conv2d_fwd_bf16_cpu<kernels::cpu::Bf16Math::kEmulated, Bias::kWith>>,
                                {STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_fwd_bf16emu_nobias(
    "conv2d_fwd_convgemm_bf16emu_nobias",
    runtime::guarded<conv2d_fwd_bf16_cpu<kernels::cpu::Bf16Math::kEmulated, Bias::kWithout>>,
    {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_data_bf16emu("conv2d_bwd_data_convgemm_bf16emu",
                                     runtime::guarded<conv2d_bwd_data_bf16_cpu<kernels::cpu::Bf16Math::kEmulated>>,
                                     {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_weights_bf16emu(
    "conv2d_bwd_weights_convgemm_bf16emu",
    runtime::guarded<conv2d_bwd_weights_bf16_cpu<kernels::cpu::Bf16Math::kEmulated, Bias::kWith>>,
    {STARPU_R, STARPU_R, STARPU_W, STARPU_W});
runtime::Codelet cl_bwd_weights_bf16emu_nobias(
    "conv2d_bwd_weights_convgemm_bf16emu_nobias",
    runtime::guarded<conv2d_bwd_weights_bf16_cpu<kernels::cpu::Bf16Math::kEmulated, Bias::kWithout>>,
    {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_fwd_bf16amx("conv2d_fwd_convgemm_bf16amx",
                                runtime::guarded<conv2d_fwd_bf16_cpu<kernels::cpu::Bf16Math::kAmx, Bias::kWith>>,
                                {STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_fwd_bf16amx_nobias(
    "conv2d_fwd_convgemm_bf16amx_nobias",
    runtime::guarded<conv2d_fwd_bf16_cpu<kernels::cpu::Bf16Math::kAmx, Bias::kWithout>>,
    {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_data_bf16amx("conv2d_bwd_data_convgemm_bf16amx",
                                     runtime::guarded<conv2d_bwd_data_bf16_cpu<kernels::cpu::Bf16Math::kAmx>>,
                                     {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_weights_bf16amx(
    "conv2d_bwd_weights_convgemm_bf16amx",
    runtime::guarded<conv2d_bwd_weights_bf16_cpu<kernels::cpu::Bf16Math::kAmx, Bias::kWith>>,
    {STARPU_R, STARPU_R, STARPU_W, STARPU_W});
runtime::Codelet cl_bwd_weights_bf16amx_nobias(
    "conv2d_bwd_weights_convgemm_bf16amx_nobias",
    runtime::guarded<conv2d_bwd_weights_bf16_cpu<kernels::cpu::Bf16Math::kAmx, Bias::kWithout>>,
    {STARPU_R, STARPU_R, STARPU_W});

struct Bf16Codelets {
  runtime::Codelet *fwd, *fwd_nobias, *bwd_data, *bwd_weights, *bwd_weights_nobias;
};

// oneDNN: CPU bodies only, one set whatever the bf16 precision (oneDNN picks its kernels for the CPU).
runtime::Codelet cl_fwd_onednn("conv2d_fwd_onednn_bf16", runtime::guarded<conv2d_fwd_onednn_cpu<Bias::kWith>>,
                               {STARPU_R, STARPU_R, STARPU_W, STARPU_R});
runtime::Codelet cl_fwd_onednn_nobias("conv2d_fwd_onednn_bf16_nobias",
                                      runtime::guarded<conv2d_fwd_onednn_cpu<Bias::kWithout>>,
                                      {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_data_onednn("conv2d_bwd_data_onednn_bf16", runtime::guarded<conv2d_bwd_data_onednn_cpu>,
                                    {STARPU_R, STARPU_R, STARPU_W});
runtime::Codelet cl_bwd_weights_onednn("conv2d_bwd_weights_onednn_bf16",
                                       runtime::guarded<conv2d_bwd_weights_onednn_cpu<Bias::kWith>>,
                                       {STARPU_R, STARPU_R, STARPU_W, STARPU_W});
runtime::Codelet cl_bwd_weights_onednn_nobias("conv2d_bwd_weights_onednn_bf16_nobias",
                                              runtime::guarded<conv2d_bwd_weights_onednn_cpu<Bias::kWithout>>,
                                              {STARPU_R, STARPU_R, STARPU_W});

// The codelets of a bf16 precision (not fp32).
Bf16Codelets bf16_codelets(Precision p) {
  if (p == Precision::kBf16) {
    return {&cl_fwd_bf16, &cl_fwd_bf16_nobias, &cl_bwd_data_bf16, &cl_bwd_weights_bf16, &cl_bwd_weights_bf16_nobias};
  }
  if (p == Precision::kBf16Amx) {
    return {&cl_fwd_bf16amx, &cl_fwd_bf16amx_nobias, &cl_bwd_data_bf16amx, &cl_bwd_weights_bf16amx,
            &cl_bwd_weights_bf16amx_nobias};
  }
  return {&cl_fwd_bf16emu, &cl_fwd_bf16emu_nobias, &cl_bwd_data_bf16emu, &cl_bwd_weights_bf16emu,
          &cl_bwd_weights_bf16emu_nobias};
}

// Winograd has no backward-weights of its own (its layers' weight gradients are convgemm's).
const CodeletTable kFwd{{{&cl_fwd_convgemm_nobias, &cl_fwd_convgemm},
                         {&cl_fwd_im2col_nobias, &cl_fwd_im2col},
                         {&cl_fwd_winograd_nobias, &cl_fwd_winograd}}};
const CodeletTable kBwdWeights{{{&cl_bwd_weights_convgemm_nobias, &cl_bwd_weights_convgemm},
                                {&cl_bwd_weights_im2col_nobias, &cl_bwd_weights_im2col},
                                {&cl_bwd_weights_convgemm_nobias, &cl_bwd_weights_convgemm}}};
const CodeletTable kFwdTf32{{{&cl_fwd_convgemm_tf32_nobias, &cl_fwd_convgemm_tf32},
                             {&cl_fwd_im2col_tf32_nobias, &cl_fwd_im2col_tf32},
                             {&cl_fwd_winograd_tf32_nobias, &cl_fwd_winograd_tf32}}};
const CodeletTable kBwdWeightsTf32{{{&cl_bwd_weights_convgemm_tf32_nobias, &cl_bwd_weights_convgemm_tf32},
                                    {&cl_bwd_weights_im2col_tf32_nobias, &cl_bwd_weights_im2col_tf32},
                                    {&cl_bwd_weights_convgemm_tf32_nobias, &cl_bwd_weights_convgemm_tf32}}};

runtime::Codelet& pick(const CodeletTable& table, ConvAlgorithm a, const Tensor* bias) {
  return *table[static_cast<std::size_t>(a)][bias != nullptr ? 1 : 0];
}

// Winograd's codelets assume a shape it serves: a layer asks conv_algorithm_fits before choosing it.
void check_fits(const TaskTag& tag, ConvAlgorithm a, const Conv2dShape& shape) {
  if (!conv_algorithm_fits(a, shape)) {
    throw std::logic_error(std::string(tag.layer) + ": " + to_string(a) + " does not compute this convolution's shape");
  }
}

// oneDNN's codelets compute in bf16 only: a layer checks its precision before choosing them.
void check_onednn(const TaskTag& tag, ConvAlgorithm a, Precision p) {
  if (a == ConvAlgorithm::kOneDnn && p != Precision::kBf16 && p != Precision::kBf16Amx) {
    throw std::logic_error(std::string(tag.layer) + ": onednn in precision " + to_string(p));
  }
}

// common.hpp's bf16_tensor, only in a bf16 precision (whose codelets serve bf16 tensors).
bool bf16_tensor(const TaskTag& tag, const Tensor& t, const char* what, Precision p) {
  if (!codelets::bf16_tensor(tag, t, what)) return false;
  if (!is_bf16(p)) {
    throw InvalidArgument(std::string(tag.layer) + ": " + what + " in bfloat16 with precision " + to_string(p) +
                          ", expected a bf16 precision or a float32 " + what);
  }
  return true;
}

ConvArgs tile_args(const Conv2dShape& shape, const Tensor& batch, int tile, int relu) {
  ConvArgs a{shape, relu};
  a.shape.n = static_cast<int>(batch.tile_range(tile).count);
  return a;
}

}  // namespace

const char* to_string(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kBf16: return "bf16";
    case Precision::kBf16Emulated: return "bf16-emulated";
    case Precision::kBf16Amx: return "bf16-amx";
    case Precision::kTf32: return "tf32";
  }
  return "?";
}

const char* to_string(ConvAlgorithm a) {
  switch (a) {
    case ConvAlgorithm::kConvgemm: return "convgemm";
    case ConvAlgorithm::kIm2col: return "im2col";
    case ConvAlgorithm::kWinograd: return "winograd";
    case ConvAlgorithm::kOneDnn: return "onednn";
  }
  return "?";
}

bool conv_algorithm_fits(ConvAlgorithm a, const Conv2dShape& shape) {
  // A simulation runs no codelet (its tasks take calibrated times): oneDNN need not be there.
  if (a == ConvAlgorithm::kOneDnn) return runtime::simulated() || kernels::cpu::onednn_bf16_fits(shape);
  return a != ConvAlgorithm::kWinograd || kernels::cpu::winograd_fits(shape);
}

bool bf16_pass(Precision p, ConvAlgorithm a) { return is_bf16(p) && a != ConvAlgorithm::kWinograd; }

void submit_conv2d_fwd(const TaskTag& tag, ConvAlgorithm algorithm, const Conv2dShape& shape, const Tensor& x,
                       const Tensor& w, const Tensor* b, int relu, Tensor& y, int tile, Precision precision) {
  check_same_tiling(tag, x, y);
  check_fits(tag, algorithm, shape);
  check_onednn(tag, algorithm, precision);
  const ConvArgs a = tile_args(shape, x, tile, relu);
  std::vector<runtime::Access> data{rd(x.tile(tile)), rd(w.handle()), wr(y.tile(tile))};
  if (b != nullptr) data.push_back(rd(b->handle()));
  std::string name;
  const bool in = bf16_tensor(tag, x, "input", precision), out = bf16_tensor(tag, y, "output", precision);
  const CodeletTable& table = precision == Precision::kTf32 ? kFwdTf32 : kFwd;
  runtime::Codelet& cl = algorithm == ConvAlgorithm::kOneDnn ? (b != nullptr ? cl_fwd_onednn : cl_fwd_onednn_nobias)
                         : !bf16_pass(precision, algorithm) ? pick(table, algorithm, b)
                         : b != nullptr                      ? *bf16_codelets(precision).fwd
                                                             : *bf16_codelets(precision).fwd_nobias;
  runtime::submit_task(with_bf16(cl, in, out), task_info(tag, "fwd", tile, a.shape.flops(), name), data, a);
}

void submit_conv2d_bwd_data(const TaskTag& tag, ConvAlgorithm algorithm, const Conv2dShape& shape, const Tensor& dy,
                            const Tensor& w, Tensor& dx, int tile, Precision precision) {
  check_same_tiling(tag, dy, dx);
  check_fits(tag, algorithm, shape);
  check_onednn(tag, algorithm, precision);
  const ConvArgs a = tile_args(shape, dx, tile, 0);
  std::string name;
  // [algorithm][tf32]
  static const std::array<std::array<runtime::Codelet*, 2>, 3> kBwdData{
      {{&cl_bwd_data_convgemm, &cl_bwd_data_convgemm_tf32},
       {&cl_bwd_data_im2col, &cl_bwd_data_im2col_tf32},
       {&cl_bwd_data_winograd, &cl_bwd_data_winograd_tf32}}};
  const std::size_t tf32 = precision == Precision::kTf32 ? 1 : 0;
  const bool in = bf16_tensor(tag, dx, "input gradient", precision);
  const bool out = bf16_tensor(tag, dy, "output gradient", precision);
  runtime::Codelet& cl = algorithm == ConvAlgorithm::kOneDnn ? cl_bwd_data_onednn
                         : bf16_pass(precision, algorithm)   ? *bf16_codelets(precision).bwd_data
                                                             : *kBwdData[static_cast<std::size_t>(algorithm)][tf32];
  runtime::submit_task(with_bf16(cl, in, out),
                       task_info(tag, "bwd_data", tile, a.shape.flops(), name),
                       {rd(dy.tile(tile)), rd(w.handle()), wr(dx.tile(tile))}, a);
}

void submit_conv2d_bwd_weights(const TaskTag& tag, ConvAlgorithm algorithm, const Conv2dShape& shape, const Tensor& x,
                               const Tensor& dy, Tensor& dw_tiles, Tensor* db_tiles, int tile, Precision precision) {
  check_same_tiling(tag, x, dy);
  check_onednn(tag, algorithm, precision);
  const ConvArgs a = tile_args(shape, x, tile, 0);
  std::vector<runtime::Access> data{rd(x.tile(tile)), rd(dy.tile(tile)), wr(dw_tiles.tile(tile))};
  if (db_tiles != nullptr) data.push_back(wr(db_tiles->tile(tile)));
  std::string name;
  const bool in = bf16_tensor(tag, x, "input", precision), out = bf16_tensor(tag, dy, "output gradient", precision);
  runtime::Codelet& cl = algorithm == ConvAlgorithm::kOneDnn
                             ? (db_tiles != nullptr ? cl_bwd_weights_onednn : cl_bwd_weights_onednn_nobias)
                         : precision == Precision::kFp32 ? pick(kBwdWeights, algorithm, db_tiles)
                         : precision == Precision::kTf32 ? pick(kBwdWeightsTf32, algorithm, db_tiles)
                         : db_tiles != nullptr          ? *bf16_codelets(precision).bwd_weights
                                                        : *bf16_codelets(precision).bwd_weights_nobias;
  runtime::submit_task(with_bf16(cl, in, out), task_info(tag, "bwd_weights", tile, a.shape.flops(), name), data, a);
}

namespace {

using kernels::cpu::ConvPass;

// Random-looking inputs of a geometry, and room for every output, for timing its passes; x16, y16: x (dx) and y
// (dy) in bf16, for a layer whose input or output side the container stores in bf16 (ConvIo).
struct TimingData {
  std::vector<float> x, w, y, dx, dw;
  std::vector<std::uint16_t> x16, y16;
  explicit TimingData(const Conv2dShape& s)
      : x(static_cast<std::size_t>(s.n) * s.c * s.h * s.w),
        w(static_cast<std::size_t>(s.k) * (s.c / s.groups) * s.r * s.s),
        y(static_cast<std::size_t>(s.n) * s.k * s.out_h() * s.out_w()),
        dx(x.size()),
        dw(w.size()) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 40503u) % 1000) * 1e-3f - 0.5f;
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>((i * 69069u) % 1000) * 1e-3f - 0.5f;
    x16.resize(x.size());
    y16.resize(y.size());
    kernels::cpu::floats_to_bf16(x.data(), x.size(), x16.data());
    kernels::cpu::floats_to_bf16(y.data(), y.size(), y16.data());
  }
};

// One pass of a geometry as a layer of the algorithm and precision runs it (codelets/conv2d.hpp): y as the output
// of the forward pass and the gradient of the backward ones. With bf16 tensors (io), x16 and y16 in their places as
// the codelets take them: oneDNN directly, the others through fp32 copies widened before and rounded after.
void run_fp32_io(ConvAlgorithm a, ConvPass pass, Precision precision, const Conv2dShape& s, TimingData& d);

void run_pass(ConvAlgorithm a, ConvPass pass, Precision precision, const Conv2dShape& s, TimingData& d, ConvIo io) {
  namespace k = kernels::cpu;
  if (a == ConvAlgorithm::kOneDnn) {
    const void* x = io.bf16_in ? static_cast<const void*>(d.x16.data()) : d.x.data();
    void* dx = io.bf16_in ? static_cast<void*>(d.x16.data()) : d.dx.data();
    void* y = io.bf16_out ? static_cast<void*>(d.y16.data()) : d.y.data();
    switch (pass) {
      case ConvPass::kFwd: return k::conv2d_fwd_onednn_bf16(s, x, d.w.data(), nullptr, 0, y, io.bf16_in, io.bf16_out);
      case ConvPass::kBwdData:
        return k::conv2d_bwd_data_onednn_bf16(s, y, d.w.data(), dx, io.bf16_in, io.bf16_out);
      case ConvPass::kBwdWeights:
        return k::conv2d_bwd_weights_onednn_bf16(s, x, y, d.dw.data(), nullptr, io.bf16_in, io.bf16_out);
    }
  }
  const bool in_read = pass != ConvPass::kBwdData, out_read = pass != ConvPass::kFwd;
  if (io.bf16_in && in_read) k::bf16_to_floats(d.x16.data(), d.x16.size(), d.x.data());
  if (io.bf16_out && out_read) k::bf16_to_floats(d.y16.data(), d.y16.size(), d.y.data());
  run_fp32_io(a, pass, precision, s, d);
  if (io.bf16_in && !in_read) k::floats_to_bf16(d.dx.data(), d.dx.size(), d.x16.data());
  if (io.bf16_out && !out_read) k::floats_to_bf16(d.y.data(), d.y.size(), d.y16.data());
}

void run_fp32_io(ConvAlgorithm a, ConvPass pass, Precision precision, const Conv2dShape& s, TimingData& d) {
  using kernels::cpu::Bf16Math;
  namespace k = kernels::cpu;
  const Bf16Math math = precision == Precision::kBf16      ? Bf16Math::kAvx512Bf16
                        : precision == Precision::kBf16Amx ? Bf16Math::kAmx
                                                           : Bf16Math::kEmulated;
  const bool bf16 = is_bf16(precision);
  switch (pass) {
    case ConvPass::kFwd:
      if (a == ConvAlgorithm::kOneDnn) {
        return k::conv2d_fwd_onednn_bf16(s, d.x.data(), d.w.data(), nullptr, 0, d.y.data());
      }
      if (a == ConvAlgorithm::kWinograd) {
        return k::conv2d_fwd_winograd(s, d.x.data(), d.w.data(), nullptr, 0, d.y.data());
      }
      if (bf16) return k::conv2d_fwd_convgemm_bf16(s, d.x.data(), d.w.data(), nullptr, 0, d.y.data(), math);
      if (a == ConvAlgorithm::kIm2col) return k::conv2d_fwd_im2col(s, d.x.data(), d.w.data(), nullptr, d.y.data());
      return k::conv2d_fwd_convgemm(s, d.x.data(), d.w.data(), nullptr, 0, d.y.data());
    case ConvPass::kBwdData:
      if (a == ConvAlgorithm::kOneDnn) return k::conv2d_bwd_data_onednn_bf16(s, d.y.data(), d.w.data(), d.dx.data());
      if (a == ConvAlgorithm::kWinograd) return k::conv2d_bwd_data_winograd(s, d.y.data(), d.w.data(), d.dx.data());
      if (bf16) return k::conv2d_bwd_data_convgemm_bf16(s, d.y.data(), d.w.data(), d.dx.data(), math);
      if (a == ConvAlgorithm::kIm2col) return k::conv2d_bwd_data_im2col(s, d.y.data(), d.w.data(), d.dx.data());
      return k::conv2d_bwd_data_convgemm(s, d.y.data(), d.w.data(), d.dx.data());
    case ConvPass::kBwdWeights:
      if (a == ConvAlgorithm::kOneDnn) {
        return k::conv2d_bwd_weights_onednn_bf16(s, d.x.data(), d.y.data(), d.dw.data(), nullptr);
      }
      if (bf16) return k::conv2d_bwd_weights_convgemm_bf16(s, d.x.data(), d.y.data(), d.dw.data(), nullptr, math);
      if (a == ConvAlgorithm::kIm2col) {
        return k::conv2d_bwd_weights_im2col(s, d.x.data(), d.y.data(), d.dw.data(), nullptr);
      }
      return k::conv2d_bwd_weights_convgemm(s, d.x.data(), d.y.data(), d.dw.data(), nullptr);
  }
}

// The best of two timed runs after one that warms caches, packing buffers and oneDNN's primitives.
double time_pass(ConvAlgorithm a, ConvPass pass, Precision precision, const Conv2dShape& s, TimingData& d,
                 ConvIo io) {
  using Clock = std::chrono::steady_clock;
  double best = 1e300;
  for (int round = 0; round < 3; ++round) {
    const auto start = Clock::now();
    run_pass(a, pass, precision, s, d, io);
    const double t = std::chrono::duration<double>(Clock::now() - start).count();
    if (round > 0) best = std::min(best, t);
  }
  return best;
}

// The algorithms that may run a pass of the geometry in the precision: each computes something different there
// (Winograd has no weight gradients of its own, im2col's bf16 passes would be convgemm's, oneDNN only in bf16 and
// bf16-amx: not in fp32, where it is slower than convgemm and Winograd, docs/design.md, nor in bf16-emulated, whose
// bits it does not give).
std::vector<ConvAlgorithm> candidates(ConvPass pass, Precision precision, const Conv2dShape& s) {
  std::vector<ConvAlgorithm> out{ConvAlgorithm::kConvgemm};
  if (!is_bf16(precision)) out.push_back(ConvAlgorithm::kIm2col);
  if (pass != ConvPass::kBwdWeights && kernels::cpu::winograd_fits(s)) out.push_back(ConvAlgorithm::kWinograd);
  if ((precision == Precision::kBf16 || precision == Precision::kBf16Amx) && kernels::cpu::onednn_bf16_fits(s)) {
    out.push_back(ConvAlgorithm::kOneDnn);
  }
  return out;
}

}  // namespace

ConvPlan fastest_conv_plan(const Conv2dShape& s, Precision precision, ConvIo io) {
  static std::mutex mutex;
  static std::map<std::vector<int>, ConvPlan> cache;
  // The geometry and the precision: a layer is timed in the arithmetic it runs.
  const std::vector<int> key{s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride_h, s.stride_w, s.pad_top, s.pad_bottom,
                             s.pad_left, s.pad_right, s.dil_h, s.dil_w, s.groups, static_cast<int>(precision),
                             io.bf16_in ? 1 : 0, io.bf16_out ? 1 : 0};
  std::lock_guard lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) {
    return it->second;
  }
  TimingData data(s);
  ConvPlan plan;
  for (ConvPass pass : {ConvPass::kFwd, ConvPass::kBwdData, ConvPass::kBwdWeights}) {
    ConvAlgorithm best = ConvAlgorithm::kConvgemm;
    double best_time = 1e300;
    for (ConvAlgorithm a : candidates(pass, precision, s)) {
      const double t = time_pass(a, pass, precision, s, data, io);
      if (t < best_time) {
        best = a;
        best_time = t;
      }
    }
    (pass == ConvPass::kFwd ? plan.fwd : pass == ConvPass::kBwdData ? plan.bwd_data : plan.bwd_weights) = best;
  }
  // The driver thread runs no convolution afterwards: oneDNN's working memory of the timing goes back.
  kernels::cpu::onednn_release_thread_memory();
  cache.emplace(key, plan);
  return plan;
}

}  // namespace dtnn::codelets
