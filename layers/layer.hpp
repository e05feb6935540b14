// SPDX-License-Identifier: Apache-2.0
// Layer: shapes and parameters, and forward/backward methods that only submit tasks (one per batch tile).
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <memory>
#include <string>
#include <vector>

#include "layers/random.hpp"
#include "runtime/collectives.hpp"
#include "runtime/tensor.hpp"

namespace dtnn {

// A trainable tensor with its gradient. tile_grads holds one partial gradient per batch tile; they are
// summed in tile order into grad.
struct Parameter {
  std::string name;  // local name ("weight", "bias"); containers prefix it ("0.weight")
  Tensor value;
  Tensor grad;
  Tensor tile_grads;  // [tiles, *value.shape()]
  // 1 when the layer already computes the gradient over every rank (synchronised BatchNorm): the data-parallel
  // gradient reduction must leave it alone.
  int reduced_over_ranks = 0;
  // 0 when one task of the layer's backward writes the gradient whole (BatchNorm's reduction), so that it cannot
  // continue another rank's partial sum (PassContext::gradients_continue): ordered sums over the ranks refuse it
  // unless it is reduced_over_ranks.
  int continues_partial_sums = 1;
};

// BatchNorm statistics over every rank's rows of the batch (synchronised BatchNorm in data-parallel training):
// the per-sample partial sums are gathered from all ranks through the communicator's thread.
struct BatchSync {
  runtime::Collectives* reducer = nullptr;
  std::vector<std::int64_t> rows_per_rank;  // this step's rows on each rank, in rank order
};

struct PassContext {
  int training = 1;        // 0 in evaluation: inference behaviour of layers (running statistics, no dropout)
  int priority = 0;        // base priority of the pass's tasks
  std::int64_t step = 0;   // global training step, for per-step randomness (dropout masks)
  const BatchSync* sync = nullptr;  // set in data-parallel training with synchronised BatchNorm
  // Backward only: the i-th top-level layer's tasks get priority + i * layer_priority_stride. With a stride of 2
  // (the data gradient of a layer takes its base + 1), a layer's weight gradients and tile sums outrank the data
  // gradient of the layer below it: gradients become final layer by layer, from the last, so that their
  // reductions across ranks start while the backward pass goes on. 0: every layer at the same priority (the data
  // gradients, the critical path, first).
  int layer_priority_stride = 0;
  // Backward only, 1 in an ordered sum over the ranks on every rank but the first: each parameter gradient already
  // holds the previous ranks' partial sum when the backward starts, and the layer's first task on it adds to it
  // instead of writing it, so that the chain runs on through this rank's samples in batch order.
  int gradients_continue = 0;
};

// A tensor that is state but not trained (BatchNorm's running statistics), saved in checkpoints.
struct Buffer {
  std::string name;
  Tensor value;
};

class Layer {
 public:
  virtual ~Layer() = default;

  // Name given by the container (dotted path, e.g. "3" or "features.3"), used in task names and errors.
  [[nodiscard]] const std::string& name() const { return name_; }
  // Containers override it to rename their children ("<name>.<child>").
  virtual void set_name(std::string name) { name_ = std::move(name); }
  // Layers inside a container (paths of a Block); empty for plain layers.
  [[nodiscard]] virtual std::vector<Layer*> children() { return {}; }
  // Parameters of another layer whose gradient this layer's backward adds to (a tied head: its Embedding's
  // table), children not included. An ordered sum over the ranks relays such a gradient round the ranks once more
  // after this layer (Collectives::relay_chain).
  [[nodiscard]] virtual std::vector<Parameter*> shared_gradients() { return {}; }
  [[nodiscard]] virtual std::string type() const = 0;
  // Options in one line for the model summary, e.g. "3x3, stride 1, padding 1".
  [[nodiscard]] virtual std::string describe() const { return {}; }

  // Checks the per-sample input shape (no batch dimension), creates the parameters and returns the per-sample
  // output shape. Throws InvalidArgument naming the layer when the input does not fit.
  virtual Shape build(const Shape& sample_input) = 0;
  // The element type of the layer's input: float32 values, or int32 token ids (Embedding), which only the first
  // layer of a model may take (Sequential::build checks).
  [[nodiscard]] virtual DType input_dtype() const { return DType::kFloat32; }
  // bf16 activations (core/dtype.hpp's kBFloat16, under a bf16 precision): whether the layer's tasks can store its
  // output, and read that output's gradient, in bf16 (writes_bf16); whether they can read its input, and store the
  // input's gradient, in bf16 (reads_bf16). A container stores the tensors between two of its layers in bf16 where
  // the first writes and the second reads them (activation_dtype); values and gradients are rounded to nearest even
  // as they are stored, and every sum stays fp32.
  [[nodiscard]] virtual bool writes_bf16() const { return false; }
  [[nodiscard]] virtual bool reads_bf16() const { return false; }
  [[nodiscard]] const Shape& input_shape() const { return input_shape_; }
  [[nodiscard]] const Shape& output_shape() const { return output_shape_; }

  // PyTorch's default initialisation for the layer, drawn from rng.
  virtual void reset_parameters(Rng& rng) {}

  // x: [n, *input_shape], y: [n, *output_shape], tiled alike.
  virtual void forward(const Tensor& x, Tensor& y, const PassContext& ctx) = 0;
  // Gradients of the parameters go to their tile_grads and are summed into grad; dx is null for the first layer.
  virtual void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) = 0;

  [[nodiscard]] std::vector<Parameter*> parameters();
  [[nodiscard]] std::vector<Buffer*> buffers();
  // Parameters of this layer and of its children.
  [[nodiscard]] virtual std::int64_t parameter_count() const;
  // (Re)allocates the per-tile partial gradients for up to `tiles` tiles (children included).
  virtual void prepare_tiles(int tiles);

  // Fused passes (models/fusion.hpp, decided once the model is built). fuse_relu(): the layer applies the ReLU that
  // follows it in its container inside its own tasks from now on (returns 1), or declines (0). The container then
  // marks that ReLU absorbed: it hands the fusing layer the ReLU's output and output gradient, skips the ReLU's
  // passes, and never allocates the tensors between the two (the fusing layer's own output and its gradient).
  virtual int fuse_relu() { return 0; }
  // 1 once the layer before this one in its container fused it (see fuse_relu): its passes are that layer's.
  [[nodiscard]] int absorbed() const { return absorbed_; }
  void mark_absorbed() { absorbed_ = 1; }

 protected:
  Parameter& add_parameter(std::string name, Shape shape);
  Buffer& add_buffer(std::string name, Shape shape);
  // Scratch tensors that a pass keeps between forward and backward (BatchNorm statistics, dropout masks),
  // one set per input tensor: each step in flight has its own activation tensors, hence its own scratch.
  // Created on first use (zero-filled when owned); `id` tells apart several scratch tensors of one layer.
  Tensor& scratch(const Tensor& input, int id, const Shape& shape, int tiles, Storage storage = Storage::kOwned,
                  DType dtype = DType::kFloat32);
  // Sums the tile partials of every parameter into its gradient (after the bwd_weights tasks).
  void submit_gradient_sums(int used_tiles, const PassContext& ctx);
  // The gradient of what a layer computes before the ReLU fused into it (fuse_relu): dy where y > 0, in x's
  // scratch tensor 0, submitted at `priority`; dy itself when relu_fused is false. A layer discards the masked one
  // after its last reader.
  const Tensor& before_fused_relu(bool relu_fused, const Tensor& x, const Tensor& y, const Tensor& dy, int priority);
  // Builds and records the shapes; subclasses call it at the end of build().
  Shape record_shapes(const Shape& in, Shape out);

 private:
  std::string name_;
  int absorbed_ = 0;
  Shape input_shape_;
  Shape output_shape_;
  std::vector<std::unique_ptr<Parameter>> params_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::map<std::pair<const Tensor*, int>, Tensor> scratch_;
};

// The element type of the tensor that `producer` computes (with the layers it fused, which follow it) for the next
// layer of its container (`consumer`, null where the output leaves the container), and of its gradient: bf16 where
// the producer writes and the consumer reads bf16 (a consumer fused into the producer never reads it), fp32
// otherwise.
DType activation_dtype(const Layer& producer, const Layer* consumer);

struct NamedParameter {
  std::string name;  // full dotted name, e.g. "layer1.0.conv1.weight"
  Parameter* parameter;
};

struct NamedBuffer {
  std::string name;  // e.g. "layer1.0.bn1.running_mean"
  Buffer* buffer;
};

// Every parameter (buffer) of a layer and its children, depth first, with full dotted names.
std::vector<NamedParameter> named_parameters(Layer& root);
std::vector<NamedBuffer> named_buffers(Layer& root);

}  // namespace dtnn
