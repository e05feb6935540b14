// SPDX-License-Identifier: Apache-2.0
// Sequential: layers applied in order. It names its layers by position ("0", "1", ...), so parameters have
// PyTorch's dotted names ("0.weight"), which are also the checkpoint schema.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/layer.hpp"

namespace dtnn {

class Sequential {
 public:
  Sequential() = default;
  Sequential(Sequential&&) = default;
  Sequential& operator=(Sequential&&) = default;

  // The layer is named by its position ("0", "1", ...) unless a name is given (e.g. "conv1", "layer1").
  Sequential& add(std::unique_ptr<Layer> layer);
  Sequential& add(std::string name, std::unique_ptr<Layer> layer);
  template <class L, class... Args>
  Sequential& add(Args&&... args) {
    return add(std::make_unique<L>(std::forward<Args>(args)...));
  }
  template <class L, class... Args>
  Sequential& add_as(std::string name, Args&&... args) {
    return add(std::move(name), std::make_unique<L>(std::forward<Args>(args)...));
  }

  // Infers every shape from the per-sample input shape, creates the parameters and initialises them from seed.
  void build(const Shape& sample_input, std::uint64_t seed);
  [[nodiscard]] bool built() const { return built_; }
  [[nodiscard]] const Shape& input_shape() const { return input_shape_; }
  [[nodiscard]] const Shape& output_shape() const;

  [[nodiscard]] std::size_t size() const { return layers_.size(); }
  [[nodiscard]] Layer& layer(std::size_t i) { return *layers_.at(i); }
  [[nodiscard]] std::vector<NamedParameter> named_parameters();
  [[nodiscard]] std::vector<NamedBuffer> named_buffers();
  [[nodiscard]] std::int64_t parameter_count() const;
  // FNV-1a over the bytes of every parameter in order: equal checksums mean bitwise equal weights.
  [[nodiscard]] std::uint64_t weights_checksum();
  // Keras-style table: layer, type, options, output shape, parameters; totals.
  [[nodiscard]] std::string summary() const;

  // acts[0] is the input batch, acts[i + 1] the output of layer i; grads[i] the gradient of acts[i].
  void forward(std::vector<Tensor>& acts, const PassContext& ctx);
  // on_layer_done(i) runs after layer i's backward tasks are submitted (the optimizer submits its updates there).
  void backward(std::vector<Tensor>& acts, std::vector<Tensor>& grads, const PassContext& ctx,
                const std::function<void(Layer&)>& on_layer_done);
  // Allocates one batch's activations and gradients, tiled along the batch.
  void allocate(std::int64_t batch, int tiles, std::vector<Tensor>& acts, std::vector<Tensor>* grads);

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  Shape input_shape_;
  int built_ = 0;
};

}  // namespace dtnn
