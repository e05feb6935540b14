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

  // true (default): build() fuses the passes that models/fusion.hpp fuses (a ReLU into the layer before it, a
  // residual block's BatchNorm, Add and ReLU into one pass); false: every layer runs its own tasks (the unfused
  // reference). Fusion changes no result bit and no name.
  Sequential& fusion(bool enabled);
  // How build() initialises each top-level layer's parameters (children included) instead of the layers' own
  // defaults (Layer::reset_parameters): a model-wide scheme such as GPT-2's, which depends on a parameter's role in
  // the model (its full name) rather than on its layer's type. Called once per layer, in order, with the build's Rng.
  using Initializer = std::function<void(Layer&, Rng&)>;
  Sequential& initializer(Initializer init);
  [[nodiscard]] bool fusion() const { return fusion_; }
  // Infers every shape from the per-sample input shape, creates the parameters, initialises them from seed, then
  // fuses passes (fusion()).
  void build(const Shape& sample_input, std::uint64_t seed);
  [[nodiscard]] bool built() const { return built_; }
  [[nodiscard]] const Shape& input_shape() const { return input_shape_; }
  // The element type of the model's input: its first layer's (int32 token ids for an Embedding).
  [[nodiscard]] DType input_dtype() const { return layers_.empty() ? DType::kFloat32 : layers_.front()->input_dtype(); }
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

  // acts[0] is the input batch, acts[i + 1] the output of layer i; grads[i] the gradient of acts[i]. The output of
  // a layer whose ReLU is fused into it (the next layer is absorbed()) and its gradient are not allocated: the
  // layer writes the ReLU's output (and reads the ReLU's output gradient) directly.
  // In evaluation (ctx.training == 0) each transient activation is discarded after its last reader (the next layer):
  // only the inputs and outputs of the layers running at a time hold memory.
  void forward(std::vector<Tensor>& acts, const PassContext& ctx);
  // on_layer_done(i) runs after layer i's backward tasks are submitted (the optimizer submits its updates there).
  // Each transient activation and gradient is discarded after its last reader in the step: a layer's output and its
  // gradient once that layer's backward pass is submitted.
  void backward(std::vector<Tensor>& acts, std::vector<Tensor>& grads, const PassContext& ctx,
                const std::function<void(Layer&)>& on_layer_done);
  // Allocates one batch's activations and gradients, tiled along the batch. With Storage::kTransient the tensors
  // between layers (and their gradients) are transient: they hold memory from their first write to their last read
  // in a pass (Tensor::discard); the input acts[0], the output acts.back() and its gradient stay owned (the loading
  // and loss tasks and the host read them).
  void allocate(std::int64_t batch, int tiles, std::vector<Tensor>& acts, std::vector<Tensor>* grads,
                Storage storage = Storage::kOwned);

 private:
  // acts[group_end(i)] is the output of layer i with the layers it absorbed.
  [[nodiscard]] std::size_t group_end(std::size_t i) const;

  std::vector<std::unique_ptr<Layer>> layers_;
  Shape input_shape_;
  bool built_ = false;
  bool fusion_ = true;
  Initializer initializer_;
};

}  // namespace dtnn
