// SPDX-License-Identifier: Apache-2.0
// Dropout (inverted, as PyTorch's): in training each element is zeroed with probability `rate` and the kept ones
// are scaled by 1 / (1 - rate); in evaluation the layer is the identity.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "layers/layer.hpp"

namespace dtnn {

struct DropoutOptions {
  explicit DropoutOptions(double rate) : rate_(rate) {}
  // Without a seed, the layer derives one from its name (FNV-1a), so a model's masks are reproducible.
  DropoutOptions& seed(std::uint64_t s) { seed_ = s; return *this; }

  double rate_;
  std::optional<std::uint64_t> seed_;
};

// The mask of element e of batch row i at step s (PassContext::step) is a pure function of (seed, s, i, e): the
// tile count, the scheduler and the number of workers never change it.
class Dropout : public Layer {
 public:
  explicit Dropout(DropoutOptions options);
  [[nodiscard]] std::string type() const override { return "Dropout"; }
  [[nodiscard]] std::string describe() const override;
  Shape build(const Shape& sample_input) override;
  void forward(const Tensor& x, Tensor& y, const PassContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) override;
  [[nodiscard]] const DropoutOptions& options() const { return options_; }
  // The seed in use: the option's, or FNV-1a of the layer's current name.
  [[nodiscard]] std::uint64_t seed() const;
  // The mask of the last training forward pass on x (kept ? 1 / (1 - rate) : 0), [n, *input_shape].
  [[nodiscard]] Tensor& mask(const Tensor& x);

 private:
  DropoutOptions options_;
};

// FNV-1a (64-bit) of a string: a portable hash (std::hash is implementation-defined).
[[nodiscard]] std::uint64_t fnv1a(std::string_view text);

}  // namespace dtnn
