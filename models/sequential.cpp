// SPDX-License-Identifier: Apache-2.0
#include "models/sequential.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "models/fusion.hpp"

namespace dtnn {

Sequential& Sequential::add(std::unique_ptr<Layer> layer) {
  return add(std::to_string(layers_.size()), std::move(layer));
}

Sequential& Sequential::add(std::string name, std::unique_ptr<Layer> layer) {
  if (built_) {
    throw InvalidArgument("Sequential: add() after build(), expected every layer to be added before build()");
  }
  for (const auto& l : layers_) {
    if (l->name() == name) {
      throw InvalidArgument(fmt::format("Sequential: two layers named '{}', expected unique names", name));
    }
  }
  layer->set_name(std::move(name));
  layers_.push_back(std::move(layer));
  return *this;
}

Sequential& Sequential::fusion(bool enabled) {
  if (built_) {
    throw InvalidArgument("Sequential: fusion() after build(), expected the choice before build()");
  }
  fusion_ = enabled;
  return *this;
}

Sequential& Sequential::initializer(Initializer init) {
  if (built_) {
    throw InvalidArgument("Sequential: initializer() after build(), expected it before build()");
  }
  initializer_ = std::move(init);
  return *this;
}

void Sequential::build(const Shape& sample_input, std::uint64_t seed) {
  if (built_) {
    throw InvalidArgument("Sequential: build() called twice");
  }
  if (layers_.empty()) {
    throw InvalidArgument("Sequential: build() of an empty model, expected at least one layer");
  }
  input_shape_ = sample_input;
  Shape shape = sample_input;
  Rng rng(seed);
  for (std::size_t i = 1; i < layers_.size(); ++i) {
    if (layers_[i]->input_dtype() != DType::kFloat32) {
      throw InvalidArgument(fmt::format("Sequential: layer {} ({}) takes {} input, expected it first (only the "
                                        "model's input holds token ids)",
                                        layers_[i]->name(), layers_[i]->type(), to_string(layers_[i]->input_dtype())));
    }
  }
  for (auto& layer : layers_) {
    shape = layer->build(shape);
    if (initializer_) {
      initializer_(*layer, rng);
    } else {
      layer->reset_parameters(rng);
    }
  }
  built_ = true;
  if (fusion_) {
    fuse_passes(*this);
  }
}

std::size_t Sequential::group_end(std::size_t i) const {
  std::size_t j = i + 1;
  while (j < layers_.size() && layers_[j]->absorbed()) ++j;
  return j;
}

const Shape& Sequential::output_shape() const {
  if (!built_) {
    throw InvalidArgument("Sequential: output_shape() before build()");
  }
  return layers_.back()->output_shape();
}

std::vector<NamedParameter> Sequential::named_parameters() {
  std::vector<NamedParameter> out;
  for (auto& layer : layers_) {
    auto sub = dtnn::named_parameters(*layer);
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::vector<NamedBuffer> Sequential::named_buffers() {
  std::vector<NamedBuffer> out;
  for (auto& layer : layers_) {
    auto sub = dtnn::named_buffers(*layer);
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::int64_t Sequential::parameter_count() const {
  std::int64_t n = 0;
  for (const auto& layer : layers_) {
    n += layer->parameter_count();
  }
  return n;
}

std::uint64_t Sequential::weights_checksum() {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const NamedParameter& np : named_parameters()) {
    auto values = np.parameter->value.read();
    const auto* bytes = reinterpret_cast<const unsigned char*>(values.data().data());
    for (std::size_t i = 0; i < values.data().size_bytes(); ++i) {
      h = (h ^ bytes[i]) * 0x100000001b3ull;
    }
  }
  return h;
}

namespace {

std::string thousands(std::int64_t v) {
  const std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out = v < 0 ? "-" : "";
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) {
      out += ',';
    }
    out += digits[i];
  }
  return out;
}

}  // namespace

namespace {

void summary_rows(Layer& layer, int depth, std::string& s) {
  const std::string name = std::string(static_cast<std::size_t>(2 * depth), ' ') + layer.name();
  s += fmt::format("{:<24} {:<16} {:<40} {:<18} {:>12}\n", name, layer.type(), layer.describe(),
                   to_string(layer.output_shape()), thousands(layer.parameter_count()));
  for (Layer* child : layer.children()) {
    summary_rows(*child, depth + 1, s);
  }
}

}  // namespace

std::string Sequential::summary() const {
  constexpr int kWidth = 114;
  std::string s = fmt::format("{:<24} {:<16} {:<40} {:<18} {:>12}\n", "Layer", "Type", "Options", "Output shape",
                              "Parameters");
  s += std::string(kWidth, '=') + "\n";
  s += fmt::format("{:<24} {:<16} {:<40} {:<18} {:>12}\n", "", "Input", "", to_string(input_shape_), 0);
  for (const auto& layer : layers_) {
    summary_rows(*layer, 0, s);
  }
  s += std::string(kWidth, '=') + "\n";
  s += fmt::format("Total parameters: {}\n", thousands(parameter_count()));
  return s;
}

void Sequential::allocate(std::int64_t batch, int tiles, std::vector<Tensor>& acts, std::vector<Tensor>* grads,
                          Storage storage) {
  if (!built_) {
    throw InvalidArgument("Sequential: allocate() before build()");
  }
  auto batch_shape = [batch](Shape s) {
    s.insert(s.begin(), batch);
    return s;
  };
  // Layer i's output is acts[i + 1]; none when the next layer was fused into layer i.
  auto materialised = [this](std::size_t i) { return i + 1 == layers_.size() || !layers_[i + 1]->absorbed(); };
  auto storage_of = [&](std::size_t i) { return i + 1 == layers_.size() ? Storage::kOwned : storage; };
  acts.clear();
  acts.emplace_back(batch_shape(input_shape_), TensorOptions().tiles(tiles).dtype(layers_.front()->input_dtype()));
  // Between two layers in bf16 where the first writes and the second reads it (Layer::writes_bf16), with its gradient.
  // Layer i's output is computed by the layer that fused it, if any (the first before it that was not absorbed).
  auto options_of = [&](std::size_t i) {
    std::size_t producer = i;
    while (producer > 0 && layers_[producer]->absorbed()) --producer;
    const Layer* next = i + 1 < layers_.size() ? layers_[i + 1].get() : nullptr;
    return TensorOptions().tiles(tiles).storage(storage_of(i)).dtype(activation_dtype(*layers_[producer], next));
  };
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    if (materialised(i)) {
      acts.emplace_back(batch_shape(layers_[i]->output_shape()), options_of(i));
    } else {
      acts.emplace_back();
    }
  }
  if (grads != nullptr) {
    grads->clear();
    grads->emplace_back();  // the input's gradient is never needed
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      if (materialised(i)) {
        grads->emplace_back(batch_shape(layers_[i]->output_shape()), options_of(i));
      } else {
        grads->emplace_back();
      }
    }
    for (auto& layer : layers_) {
      layer->prepare_tiles(tiles);
    }
  }
}

void Sequential::forward(std::vector<Tensor>& acts, const PassContext& ctx) {
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i]->absorbed()) continue;
    layers_[i]->forward(acts[i], acts[group_end(i)], ctx);
    if (!ctx.training && i > 0) acts[i].discard();
  }
}

void Sequential::backward(std::vector<Tensor>& acts, std::vector<Tensor>& grads, const PassContext& ctx,
                          const std::function<void(Layer&)>& on_layer_done) {
  for (std::size_t i = layers_.size(); i-- > 0;) {
    PassContext layer_ctx = ctx;
    layer_ctx.priority += ctx.layer_priority_stride * static_cast<int>(i);
    // An absorbed layer's backward pass is the one of the layer that fused it, which comes next.
    if (!layers_[i]->absorbed()) {
      const std::size_t end = group_end(i);
      layers_[i]->backward(acts[i], acts[end], grads[end], i > 0 ? &grads[i] : nullptr, layer_ctx);
      // Layer `end` (whose backward came before) and this one were the last to read them.
      acts[end].discard();
      grads[end].discard();
    }
    if (on_layer_done) {
      on_layer_done(*layers_[i]);
    }
  }
}

}  // namespace dtnn
