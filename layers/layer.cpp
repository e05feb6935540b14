// SPDX-License-Identifier: Apache-2.0
#include "layers/layer.hpp"

#include "codelets/relu.hpp"
#include "codelets/tile_sum.hpp"

namespace dtnn {

std::vector<Parameter*> Layer::parameters() {
  std::vector<Parameter*> out;
  out.reserve(params_.size());
  for (auto& p : params_) {
    out.push_back(p.get());
  }
  return out;
}

std::vector<Buffer*> Layer::buffers() {
  std::vector<Buffer*> out;
  out.reserve(buffers_.size());
  for (auto& b : buffers_) {
    out.push_back(b.get());
  }
  return out;
}

Buffer& Layer::add_buffer(std::string name, Shape shape) {
  auto b = std::make_unique<Buffer>();
  b->name = std::move(name);
  b->value = Tensor(std::move(shape));
  buffers_.push_back(std::move(b));
  return *buffers_.back();
}

Tensor& Layer::scratch(const Tensor& input, int id, const Shape& shape, int tiles, Storage storage, DType dtype) {
  auto [it, inserted] = scratch_.try_emplace({&input, id});
  if (inserted || it->second.shape() != shape || it->second.tiles() != std::min<std::int64_t>(tiles, shape[0]) ||
      it->second.storage() != storage || it->second.dtype() != dtype) {
    it->second = Tensor(shape, TensorOptions().tiles(tiles).storage(storage).dtype(dtype));
  }
  return it->second;
}

DType activation_dtype(const Layer& producer, const Layer* consumer) {
  const bool bf16 = consumer != nullptr && !consumer->absorbed() && producer.writes_bf16() && consumer->reads_bf16();
  return bf16 ? DType::kBFloat16 : DType::kFloat32;
}

std::int64_t Layer::parameter_count() const {
  std::int64_t n = 0;
  for (const auto& p : params_) {
    n += p->value.numel();
  }
  return n;
}

std::vector<NamedParameter> named_parameters(Layer& root) {
  std::vector<NamedParameter> out;
  for (Parameter* p : root.parameters()) {
    out.push_back({root.name() + "." + p->name, p});
  }
  for (Layer* child : root.children()) {
    auto sub = named_parameters(*child);
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::vector<NamedBuffer> named_buffers(Layer& root) {
  std::vector<NamedBuffer> out;
  for (Buffer* b : root.buffers()) {
    out.push_back({root.name() + "." + b->name, b});
  }
  for (Layer* child : root.children()) {
    auto sub = named_buffers(*child);
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

void Layer::prepare_tiles(int tiles) {
  for (auto& p : params_) {
    if (!p->tile_grads.defined() || p->tile_grads.tiles() < tiles) {
      Shape s = p->value.shape();
      s.insert(s.begin(), tiles);
      // Transient: the partials live from the bwd_weights tasks to the tile sum (submit_gradient_sums).
      p->tile_grads = Tensor(s, tiles, Storage::kTransient);
    }
  }
}

Parameter& Layer::add_parameter(std::string name, Shape shape) {
  auto p = std::make_unique<Parameter>();
  p->name = std::move(name);
  p->value = Tensor(shape);
  // Transient: the training step releases the gradient once its update has read it (TrainStep).
  p->grad = Tensor(shape, 1, Storage::kTransient);
  params_.push_back(std::move(p));
  return *params_.back();
}

const Tensor& Layer::before_fused_relu(bool relu_fused, const Tensor& x, const Tensor& y, const Tensor& dy,
                                       int priority) {
  if (!relu_fused) return dy;
  Tensor& masked = scratch(x, 0, dy.shape(), dy.tiles(), dy.storage());
  for (int t = 0; t < dy.tiles(); ++t) codelets::submit_relu_bwd_data({name(), priority}, y, dy, masked, t);
  return masked;
}

void Layer::submit_gradient_sums(int used_tiles, const PassContext& ctx) {
  for (auto& p : params_) {
    const std::string tag_name = name_ + "." + p->name;
    codelets::submit_tile_sum({tag_name, ctx.priority}, p->tile_grads, used_tiles, p->grad, ctx.gradients_continue);
    p->tile_grads.discard();
  }
}

Shape Layer::record_shapes(const Shape& in, Shape out) {
  input_shape_ = in;
  output_shape_ = std::move(out);
  return output_shape_;
}

}  // namespace dtnn
