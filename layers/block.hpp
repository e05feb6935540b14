// SPDX-License-Identifier: Apache-2.0
// Block: the graph container. Several paths of layers read the same input and their outputs are merged,
// by element-wise sum (residual Add: ResNet) or by channel concatenation (Concat: DenseNet, Inception).
// An empty path is the identity. Blocks nest (a path may hold a Block).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "layers/layer.hpp"

namespace dtnn {

enum class Merge { kAdd, kConcat };

// Layers applied in order. Their names, under the block, are "<prefix>.<name>": the prefix defaults to the
// path's index in the block, the name to the layer's index in the path. Path("") puts the layers directly
// under the block, so that PyTorch's names ("layer1.0.conv1", "layer1.0.downsample.0") can be reproduced.
class Path {
 public:
  Path() = default;
  explicit Path(std::string prefix) : prefix_(std::move(prefix)) {}

  // Fluent on lvalues and on temporaries, so that block.add_path(Path().add<Conv2d>(...)) moves the path.
  Path& add(std::unique_ptr<Layer> layer) & { return add(std::to_string(layers_.size()), std::move(layer)); }
  Path& add(std::string name, std::unique_ptr<Layer> layer) & {
    layers_.emplace_back(std::move(name), std::move(layer));
    return *this;
  }
  Path&& add(std::unique_ptr<Layer> layer) && { return std::move(add(std::move(layer))); }
  Path&& add(std::string name, std::unique_ptr<Layer> layer) && {
    return std::move(add(std::move(name), std::move(layer)));
  }
  template <class L, class... Args>
  Path& add(Args&&... args) & {
    return add(std::make_unique<L>(std::forward<Args>(args)...));
  }
  template <class L, class... Args>
  Path&& add(Args&&... args) && {
    return std::move(add(std::make_unique<L>(std::forward<Args>(args)...)));
  }
  template <class L, class... Args>
  Path& add_as(std::string name, Args&&... args) & {
    return add(std::move(name), std::make_unique<L>(std::forward<Args>(args)...));
  }
  template <class L, class... Args>
  Path&& add_as(std::string name, Args&&... args) && {
    return std::move(add(std::move(name), std::make_unique<L>(std::forward<Args>(args)...)));
  }

 private:
  friend class Block;
  std::optional<std::string> prefix_;
  std::vector<std::pair<std::string, std::unique_ptr<Layer>>> layers_;
};

class Block : public Layer {
 public:
  explicit Block(Merge merge) : merge_(merge) {}
  Block& add_path(Path&& path);

  [[nodiscard]] std::string type() const override { return merge_ == Merge::kAdd ? "Add" : "Concat"; }
  [[nodiscard]] std::string describe() const override;
  void set_name(std::string name) override;
  [[nodiscard]] std::vector<Layer*> children() override;
  // The layers of each path, in order (for passes over consecutive layers, such as BatchNorm folding).
  [[nodiscard]] std::vector<std::vector<Layer*>> paths();
  [[nodiscard]] std::int64_t parameter_count() const override;
  void prepare_tiles(int tiles) override;
  Shape build(const Shape& sample_input) override;
  void reset_parameters(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;

  // Fused passes (models/fusion.hpp). fuse_relu(): an Add block applies the ReLU after the sum itself (in the add
  // task, or in its fused BatchNorm's task). fuse_merge(): an Add block of two paths, one of them ending in a
  // BatchNorm2d, lets that BatchNorm write the block's output, y = bn(x) + other path (+ ReLU): the BatchNorm's
  // output and the separate Add pass are gone. Backward, with the ReLU and an identity other path, the BatchNorm
  // masks the gradient itself and the block's input gradient takes the masked identity share in the task that adds
  // the paths; with a projection the masked gradient is formed once (both paths read it). Both return 1 when the
  // block fuses. Results are bitwise those of the separate passes.
  int fuse_relu() override;
  int fuse_merge();
  // The path whose last BatchNorm2d writes the block's output (fuse_merge), or -1.
  [[nodiscard]] int fused_path() const { return fused_path_; }

 private:
  // The output of layer i of path p for this input (the path's own scratch tensors), and the type of it and its
  // gradient: bf16 where the layer that computes it writes and the next layer reads bf16 (Layer::writes_bf16).
  [[nodiscard]] DType activation_dtype_of(std::size_t p, std::size_t i) const;
  Tensor& activation(const Tensor& x, std::size_t p, std::size_t i);
  // Past the layers that layer i of path p absorbed (Layer::fuse_relu): its group's output is activation(end - 1).
  [[nodiscard]] std::size_t group_end(std::size_t p, std::size_t i) const;
  // Submits the backward passes of path p's layers, last first, from the gradient g of its output; returns the
  // gradient of its input (null when the block's input needs none). masked_in_tasks: the fused BatchNorm masks g
  // by the block's ReLU in its own tasks (backward_masked).
  const Tensor* backward_path(std::size_t p, const Tensor& x, const Tensor& y, const Tensor* g, bool need_dx,
                              bool masked_in_tasks, const PassContext& ctx);
  static Shape batched(std::int64_t n, const Shape& sample);

  Merge merge_;
  std::vector<Path> paths_;
  int relu_ = 0;         // the ReLU after the sum is applied here
  int fused_path_ = -1;  // fuse_merge: the path whose last BatchNorm2d writes y
};

}  // namespace dtnn
