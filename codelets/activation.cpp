// SPDX-License-Identifier: Apache-2.0
#include "codelets/activation.hpp"

#include <array>

#include <fmt/format.h>

#include "codelets/cpu/nn_kernels.hpp"
#include "runtime/failure.hpp"
#ifdef DTNN_HAVE_CUDA
#include "codelets/cuda/activations.hpp"
#include "runtime/cuda.hpp"
#endif

namespace dtnn::codelets {
namespace {

namespace k = kernels::cpu;

struct ActivationArgs {
  std::size_t count;
  ActivationKind kind;
  float param;
};

void activation_fwd_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ActivationArgs>(cl_arg);
  const float* x = runtime::vector_ptr(buffers[0]);
  float* y = runtime::vector_ptr(buffers[1]);
  switch (a.kind) {
    case ActivationKind::kSigmoid: k::sigmoid_fwd(a.count, x, y); break;
    case ActivationKind::kTanh: k::tanh_fwd(a.count, x, y); break;
    case ActivationKind::kLeakyRelu: k::leaky_relu_fwd(a.count, a.param, x, y); break;
    case ActivationKind::kElu: k::elu_fwd(a.count, a.param, x, y); break;
    case ActivationKind::kGelu: k::gelu_fwd(a.count, x, y); break;
    case ActivationKind::kGeluTanh: k::gelu_tanh_fwd(a.count, x, y); break;
  }
}

// buffers: x or y (see derivative_from_output), dy, dx
void activation_bwd_data_cpu(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ActivationArgs>(cl_arg);
  const float* in = runtime::vector_ptr(buffers[0]);
  const float* dy = runtime::vector_ptr(buffers[1]);
  float* dx = runtime::vector_ptr(buffers[2]);
  switch (a.kind) {
    case ActivationKind::kSigmoid: k::sigmoid_bwd_data(a.count, in, dy, dx); break;
    case ActivationKind::kTanh: k::tanh_bwd_data(a.count, in, dy, dx); break;
    case ActivationKind::kLeakyRelu: k::leaky_relu_bwd_data(a.count, a.param, in, dy, dx); break;
    case ActivationKind::kElu: k::elu_bwd_data(a.count, a.param, in, dy, dx); break;
    case ActivationKind::kGelu: k::gelu_bwd_data(a.count, in, dy, dx); break;
    case ActivationKind::kGeluTanh: k::gelu_tanh_bwd_data(a.count, in, dy, dx); break;
  }
}

#ifdef DTNN_HAVE_CUDA
namespace kc = kernels::cuda;

void activation_fwd_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ActivationArgs>(cl_arg);
  const float* x = runtime::vector_ptr(buffers[0]);
  float* y = runtime::vector_ptr(buffers[1]);
  cudaStream_t s = runtime::cuda::stream();
  switch (a.kind) {
    case ActivationKind::kSigmoid: kc::sigmoid_fwd(a.count, x, y, s); break;
    case ActivationKind::kTanh: kc::tanh_fwd(a.count, x, y, s); break;
    case ActivationKind::kLeakyRelu: kc::leaky_relu_fwd(a.count, a.param, x, y, s); break;
    case ActivationKind::kElu: kc::elu_fwd(a.count, a.param, x, y, s); break;
    case ActivationKind::kGelu: kc::gelu_fwd(a.count, x, y, s); break;
    case ActivationKind::kGeluTanh: kc::gelu_tanh_fwd(a.count, x, y, s); break;
  }
  DTNN_CUDA_CHECK(cudaGetLastError(), "activation_fwd");
}

void activation_bwd_data_cuda(void** buffers, void* cl_arg) {
  const auto& a = runtime::task_args<ActivationArgs>(cl_arg);
  const float* in = runtime::vector_ptr(buffers[0]);
  const float* dy = runtime::vector_ptr(buffers[1]);
  float* dx = runtime::vector_ptr(buffers[2]);
  cudaStream_t s = runtime::cuda::stream();
  switch (a.kind) {
    case ActivationKind::kSigmoid: kc::sigmoid_bwd_data(a.count, in, dy, dx, s); break;
    case ActivationKind::kTanh: kc::tanh_bwd_data(a.count, in, dy, dx, s); break;
    case ActivationKind::kLeakyRelu: kc::leaky_relu_bwd_data(a.count, a.param, in, dy, dx, s); break;
    case ActivationKind::kElu: kc::elu_bwd_data(a.count, a.param, in, dy, dx, s); break;
    case ActivationKind::kGelu: kc::gelu_bwd_data(a.count, in, dy, dx, s); break;
    case ActivationKind::kGeluTanh: kc::gelu_tanh_bwd_data(a.count, in, dy, dx, s); break;
  }
  DTNN_CUDA_CHECK(cudaGetLastError(), "activation_bwd_data");
}
#endif

constexpr std::size_t kKinds = 6;

// Indexed by ActivationKind. Footprints from the data sizes: the cost does not depend on the parameter.
std::array<runtime::Codelet, kKinds> cl_fwd{{
    {"sigmoid_fwd", runtime::guarded<activation_fwd_cpu>, DTNN_CUDA_FUNC(runtime::guarded<activation_fwd_cuda>),
     {STARPU_R, STARPU_W}, runtime::Footprint::kData},
    {"tanh_fwd", runtime::guarded<activation_fwd_cpu>, DTNN_CUDA_FUNC(runtime::guarded<activation_fwd_cuda>),
     {STARPU_R, STARPU_W}, runtime::Footprint::kData},
    {"leaky_relu_fwd", runtime::guarded<activation_fwd_cpu>, DTNN_CUDA_FUNC(runtime::guarded<activation_fwd_cuda>),
     {STARPU_R, STARPU_W}, runtime::Footprint::kData},
    {"elu_fwd", runtime::guarded<activation_fwd_cpu>, DTNN_CUDA_FUNC(runtime::guarded<activation_fwd_cuda>),
     {STARPU_R, STARPU_W}, runtime::Footprint::kData},
    {"gelu_fwd", runtime::guarded<activation_fwd_cpu>, DTNN_CUDA_FUNC(runtime::guarded<activation_fwd_cuda>),
     {STARPU_R, STARPU_W}, runtime::Footprint::kData},
    {"gelu_tanh_fwd", runtime::guarded<activation_fwd_cpu>, DTNN_CUDA_FUNC(runtime::guarded<activation_fwd_cuda>),
     {STARPU_R, STARPU_W}, runtime::Footprint::kData},
}};
std::array<runtime::Codelet, kKinds> cl_bwd_data{{
    {"sigmoid_bwd_data", runtime::guarded<activation_bwd_data_cpu>,
     DTNN_CUDA_FUNC(runtime::guarded<activation_bwd_data_cuda>), {STARPU_R, STARPU_R, STARPU_W},
     runtime::Footprint::kData},
    {"tanh_bwd_data", runtime::guarded<activation_bwd_data_cpu>,
     DTNN_CUDA_FUNC(runtime::guarded<activation_bwd_data_cuda>), {STARPU_R, STARPU_R, STARPU_W},
     runtime::Footprint::kData},
    {"leaky_relu_bwd_data", runtime::guarded<activation_bwd_data_cpu>,
     DTNN_CUDA_FUNC(runtime::guarded<activation_bwd_data_cuda>), {STARPU_R, STARPU_R, STARPU_W},
     runtime::Footprint::kData},
    {"elu_bwd_data", runtime::guarded<activation_bwd_data_cpu>,
     DTNN_CUDA_FUNC(runtime::guarded<activation_bwd_data_cuda>), {STARPU_R, STARPU_R, STARPU_W},
     runtime::Footprint::kData},
    {"gelu_bwd_data", runtime::guarded<activation_bwd_data_cpu>,
     DTNN_CUDA_FUNC(runtime::guarded<activation_bwd_data_cuda>), {STARPU_R, STARPU_R, STARPU_W},
     runtime::Footprint::kData},
    {"gelu_tanh_bwd_data", runtime::guarded<activation_bwd_data_cpu>,
     DTNN_CUDA_FUNC(runtime::guarded<activation_bwd_data_cuda>), {STARPU_R, STARPU_R, STARPU_W},
     runtime::Footprint::kData},
}};

std::size_t index_of(const TaskTag& tag, ActivationKind kind) {
  const auto i = static_cast<std::size_t>(kind);
  if (i >= kKinds) {
    throw InvalidArgument(fmt::format("{}: activation kind {}, expected 0..{}", tag.layer, i, kKinds - 1));
  }
  return i;
}

ActivationArgs args_for(const ActivationSpec& spec, const Tensor& t, int tile) {
  return ActivationArgs{static_cast<std::size_t>(t.tile_range(tile).count * t.row_elements()), spec.kind,
                        spec.param};
}

}  // namespace

bool derivative_from_output(ActivationKind kind) {
  return kind == ActivationKind::kSigmoid || kind == ActivationKind::kTanh;
}

void submit_activation_fwd(const TaskTag& tag, const ActivationSpec& spec, const Tensor& x, Tensor& y, int tile) {
  check_same_tiling(tag, x, y);
  const std::size_t i = index_of(tag, spec.kind);
  const ActivationArgs a = args_for(spec, x, tile);
  std::string name;
  runtime::submit_task(cl_fwd[i], task_info(tag, "fwd", tile, static_cast<double>(a.count), name),
                       {rd(x.tile(tile)), wr(y.tile(tile))}, a);
}

void submit_activation_bwd_data(const TaskTag& tag, const ActivationSpec& spec, const Tensor& x, const Tensor& y,
                                const Tensor& dy, Tensor& dx, int tile) {
  check_same_tiling(tag, x, dx);
  check_same_tiling(tag, y, dy);
  const std::size_t i = index_of(tag, spec.kind);
  const ActivationArgs a = args_for(spec, dx, tile);
  const Tensor& in = derivative_from_output(spec.kind) ? y : x;
  std::string name;
  runtime::submit_task(cl_bwd_data[i], task_info(tag, "bwd_data", tile, static_cast<double>(a.count), name),
                       {rd(in.tile(tile)), rd(dy.tile(tile)), wr(dx.tile(tile))}, a);
}

}  // namespace dtnn::codelets
