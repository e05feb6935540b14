// SPDX-License-Identifier: Apache-2.0
#include "layers/activations.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "codelets/activation.hpp"
#include "codelets/softmax.hpp"
#include "core/errors.hpp"

namespace dtnn {

Shape ElementwiseActivation::build(const Shape& in) {
  if (in.empty() || numel(in) < 1) {
    throw InvalidArgument(fmt::format("{} {}: input {}, expected at least one value per sample", type(), name(),
                                      to_string(in)));
  }
  return record_shapes(in, in);
}

void ElementwiseActivation::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_activation_fwd({name(), ctx.priority}, spec_, x, y, t);
  }
}

void ElementwiseActivation::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx,
                                     const PassContext& ctx) {
  if (dx == nullptr) {
    return;
  }
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_activation_bwd_data({name(), ctx.priority + 1}, spec_, x, y, dy, *dx, t);
  }
}

LeakyReLU::LeakyReLU(LeakyReLUOptions o)
    : ElementwiseActivation({codelets::ActivationKind::kLeakyRelu, o.negative_slope_}), options_(o) {
  if (!std::isfinite(o.negative_slope_)) {
    throw InvalidArgument(fmt::format("LeakyReLU: negative_slope={}, expected a finite value", o.negative_slope_));
  }
}

std::string LeakyReLU::describe() const { return fmt::format("negative slope {:g}", options_.negative_slope_); }

ELU::ELU(ELUOptions o) : ElementwiseActivation({codelets::ActivationKind::kElu, o.alpha_}), options_(o) {
  if (!std::isfinite(o.alpha_) || o.alpha_ < 0.0f) {
    throw InvalidArgument(fmt::format("ELU: alpha={}, expected a finite value >= 0", o.alpha_));
  }
}

std::string ELU::describe() const { return fmt::format("alpha {:g}", options_.alpha_); }

namespace {

codelets::ActivationKind gelu_kind(const GELUOptions& o) {
  if (o.approximate_ == "none") return codelets::ActivationKind::kGelu;
  if (o.approximate_ == "tanh") return codelets::ActivationKind::kGeluTanh;
  throw InvalidArgument(fmt::format("GELU: approximate='{}', expected 'none' or 'tanh'", o.approximate_));
}

}  // namespace

GELU::GELU(GELUOptions o) : ElementwiseActivation({gelu_kind(o), 0.0f}), options_(std::move(o)) {}

// The exact one keeps the words the model summaries (and the data-parallel ranks' hash of them) always had.
std::string GELU::describe() const { return options_.approximate_ == "tanh" ? "tanh approximation" : "exact (erf)"; }

std::string Softmax::describe() const { return fmt::format("dim {}", options_.dim_); }

Shape Softmax::build(const Shape& in) {
  const auto rank = static_cast<int>(in.size());
  // Batch dimensions: 0 is the batch, 1..rank the sample's; -1 the last.
  const int dim = options_.dim_ < 0 ? rank + 1 + options_.dim_ : options_.dim_;
  if (in.empty() || numel(in) < 1 || dim < 1 || dim > rank ||
      in[static_cast<std::size_t>(dim - 1)] > std::numeric_limits<int>::max()) {
    throw InvalidArgument(fmt::format("Softmax {}: input {}, expected (F) or (C, ...) with at least one value and "
                                      "dim={} a dimension of the sample: 1..{} or -{}..-1",
                                      name(), to_string(in), options_.dim_, rank, rank));
  }
  outer_ = 1;
  for (int d = 0; d < dim - 1; ++d) outer_ *= in[static_cast<std::size_t>(d)];
  channels_ = static_cast<int>(in[static_cast<std::size_t>(dim - 1)]);
  return record_shapes(in, in);
}

void Softmax::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_softmax_fwd({name(), ctx.priority}, codelets::SoftmaxAxis{outer_, channels_}, x, y, t);
  }
}

void Softmax::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) {
  if (dx == nullptr) {
    return;
  }
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_softmax_bwd_data({name(), ctx.priority + 1}, codelets::SoftmaxAxis{outer_, channels_}, y, dy,
                                        *dx, t);
  }
}

}  // namespace dtnn
