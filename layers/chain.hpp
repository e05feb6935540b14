// SPDX-License-Identifier: Apache-2.0
// Chain: layers applied one after another as one layer of a model (a transformer block: two residual Blocks and,
// post-LN, their LayerNorms). Unlike a Block of one path, it merges nothing: its last layer writes the chain's output
// and its first layer the chain's input gradient, so it adds no task and no tensor of its own.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/layer.hpp"

namespace dtnn {

class Chain : public Layer {
 public:
  // type: what the model summary calls it ("Chain" unless given, e.g. "PreLNBlock").
  explicit Chain(std::string type = "Chain") : type_(std::move(type)) {}

  // A layer's name under the chain is "<chain>.<name>"; an empty name puts its children directly under the chain
  // (a residual Block whose paths hold "ln_1" and "attn" gives "<chain>.ln_1", "<chain>.attn"), so that a chain can
  // reproduce a PyTorch module's names.
  Chain& add(std::string name, std::unique_ptr<Layer> layer);
  template <class L, class... Args>
  Chain& add_as(std::string name, Args&&... args) {
    return add(std::move(name), std::make_unique<L>(std::forward<Args>(args)...));
  }
  // The summary's options column.
  Chain& description(std::string text) { description_ = std::move(text); return *this; }

  [[nodiscard]] std::string type() const override { return type_; }
  [[nodiscard]] std::string describe() const override { return description_; }
  void set_name(std::string name) override;
  [[nodiscard]] std::vector<Layer*> children() override;
  [[nodiscard]] std::int64_t parameter_count() const override;
  void prepare_tiles(int tiles) override;
  Shape build(const Shape& sample_input) override;
  void reset_parameters(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;

 private:
  // The output of layer i (i < size - 1) for this input, and the gradient of it, both of activation_dtype_of(i)'s
  // type (a chain fuses no layers: layer i computes it).
  [[nodiscard]] DType activation_dtype_of(std::size_t i) const;
  Tensor& activation(const Tensor& x, std::size_t i);
  Tensor& gradient(const Tensor& x, std::size_t i);

  std::string type_;
  std::string description_;
  std::vector<std::pair<std::string, std::unique_ptr<Layer>>> layers_;
};

}  // namespace dtnn
