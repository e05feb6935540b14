// SPDX-License-Identifier: Apache-2.0
#include "layers/chain.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dtnn {
namespace {

constexpr int kActivation = 0;
constexpr int kGradient = 1 << 20;

Shape batched(std::int64_t n, const Shape& sample) {
  Shape s = sample;
  s.insert(s.begin(), n);
  return s;
}

}  // namespace

Chain& Chain::add(std::string name, std::unique_ptr<Layer> layer) {
  layers_.emplace_back(std::move(name), std::move(layer));
  set_name(this->name());
  return *this;
}

void Chain::set_name(std::string name) {
  Layer::set_name(name);
  for (auto& [local, layer] : layers_) {
    std::string full = name;
    if (!local.empty()) full += (full.empty() ? "" : ".") + local;
    layer->set_name(full);
  }
}

std::vector<Layer*> Chain::children() {
  std::vector<Layer*> out;
  for (auto& entry : layers_) out.push_back(entry.second.get());
  return out;
}

std::int64_t Chain::parameter_count() const {
  std::int64_t n = Layer::parameter_count();
  for (const auto& entry : layers_) n += entry.second->parameter_count();
  return n;
}

void Chain::prepare_tiles(int tiles) {
  for (auto& entry : layers_) entry.second->prepare_tiles(tiles);
}

Shape Chain::build(const Shape& in) {
  if (layers_.empty()) {
    throw InvalidArgument(fmt::format("{} {}: no layers, expected at least one", type_, name()));
  }
  Shape s = in;
  for (auto& entry : layers_) s = entry.second->build(s);
  return record_shapes(in, s);
}

void Chain::reset_parameters(Rng& rng) {
  for (auto& entry : layers_) entry.second->reset_parameters(rng);
}

DType Chain::activation_dtype_of(std::size_t i) const {
  return activation_dtype(*layers_[i].second, i + 1 < layers_.size() ? layers_[i + 1].second.get() : nullptr);
}

Tensor& Chain::activation(const Tensor& x, std::size_t i) {
  return scratch(x, kActivation + static_cast<int>(i), batched(x.shape()[0], layers_[i].second->output_shape()),
                 x.tiles(), x.storage(), activation_dtype_of(i));
}

Tensor& Chain::gradient(const Tensor& x, std::size_t i) {
  return scratch(x, kGradient + static_cast<int>(i), batched(x.shape()[0], layers_[i].second->output_shape()),
                 x.tiles(), x.storage(), activation_dtype_of(i));
}

void Chain::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  const Tensor* a = &x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    Tensor& out = i + 1 == layers_.size() ? y : activation(x, i);
    layers_[i].second->forward(*a, out, ctx);
    // In evaluation an activation's last reader is the next layer.
    if (!ctx.training && a != &x) a->discard();
    a = &out;
  }
}

void Chain::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) {
  const Tensor* g = &dy;
  for (std::size_t i = layers_.size(); i-- > 0;) {
    const Tensor& in = i > 0 ? activation(x, i - 1) : x;
    const bool last = i + 1 == layers_.size();
    const Tensor& out = last ? y : activation(x, i);
    Tensor* g_in = i > 0 ? &gradient(x, i - 1) : dx;
    layers_[i].second->backward(in, out, *g, g_in, ctx);
    // This layer and the one after it (whose backward came before) were the output's last readers; the gradient of
    // it dies with the backward pass that read it.
    if (!last) {
      out.discard();
      g->discard();
    }
    g = g_in;
  }
}

}  // namespace dtnn
