// SPDX-License-Identifier: Apache-2.0
#include "layers/block.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "codelets/merge.hpp"
#include "codelets/relu.hpp"
#include "core/errors.hpp"
#include "layers/batch_norm.hpp"

namespace dtnn {
namespace {

// Scratch ids: activations, their gradients, the slices of the block's gradient, each path's input gradient.
constexpr int kActivation = 0;
constexpr int kGradient = 1 << 20;
constexpr int kSlice = 2 << 20;
constexpr int kPathInputGradient = 3 << 20;
constexpr int kMaskedGradient = 4 << 20;  // the sum's gradient through the fused ReLU, when formed

int slot_id(int kind, std::size_t p, std::size_t i) { return kind + static_cast<int>(p) * 4096 + static_cast<int>(i); }

}  // namespace

Block& Block::add_path(Path&& path) {
  if (merge_ == Merge::kConcat && static_cast<int>(paths_.size()) == codelets::kMaxMergeParts) {
    throw InvalidArgument(fmt::format("Concat {}: more than {} paths, expected at most {} (StarPU's buffer limit)",
                                      name(), codelets::kMaxMergeParts, codelets::kMaxMergeParts));
  }
  paths_.push_back(std::move(path));
  set_name(name());
  return *this;
}

std::string Block::describe() const {
  std::string s;
  for (const Path& p : paths_) {
    s += s.empty() ? "" : " | ";
    s += p.layers_.empty() ? std::string("identity") : fmt::format("{} layers", p.layers_.size());
  }
  if (fused_path_ >= 0) {
    s += relu_ ? ", fused BN+Add+ReLU" : ", fused BN+Add";
  } else if (relu_) {
    s += ", fused Add+ReLU";
  }
  return s;
}

void Block::set_name(std::string name) {
  Layer::set_name(name);
  for (std::size_t p = 0; p < paths_.size(); ++p) {
    const std::string prefix = paths_[p].prefix_.value_or(std::to_string(p));
    for (auto& [local, layer] : paths_[p].layers_) {
      std::string full = name;
      for (const std::string& part : {prefix, local}) {
        if (!part.empty()) full += (full.empty() ? "" : ".") + part;
      }
      layer->set_name(full);
    }
  }
}

std::vector<Layer*> Block::children() {
  std::vector<Layer*> out;
  for (Path& p : paths_) {
    for (auto& entry : p.layers_) out.push_back(entry.second.get());
  }
  return out;
}

std::vector<std::vector<Layer*>> Block::paths() {
  std::vector<std::vector<Layer*>> out;
  for (Path& p : paths_) {
    out.emplace_back();
    for (auto& entry : p.layers_) out.back().push_back(entry.second.get());
  }
  return out;
}

std::int64_t Block::parameter_count() const {
  std::int64_t n = Layer::parameter_count();
  for (const Path& p : paths_) {
    for (const auto& entry : p.layers_) n += entry.second->parameter_count();
  }
  return n;
}

void Block::prepare_tiles(int tiles) {
  for (Layer* child : children()) child->prepare_tiles(tiles);
}

Shape Block::build(const Shape& in) {
  if (paths_.empty()) {
    throw InvalidArgument(fmt::format("{} {}: no paths, expected at least one", type(), name()));
  }
  std::vector<Shape> outs;
  for (Path& p : paths_) {
    Shape s = in;
    for (auto& entry : p.layers_) s = entry.second->build(s);
    outs.push_back(s);
  }
  Shape out = outs[0];
  for (std::size_t p = 1; p < outs.size(); ++p) {
    if (merge_ == Merge::kAdd && outs[p] != out) {
      throw InvalidArgument(fmt::format("Add {}: path {} outputs {}, expected {} like path 0", name(), p,
                                        to_string(outs[p]), to_string(out)));
    }
    if (merge_ == Merge::kConcat) {
      if (outs[p].size() != out.size() || !std::equal(outs[p].begin() + 1, outs[p].end(), out.begin() + 1)) {
        throw InvalidArgument(fmt::format("Concat {}: path {} outputs {}, expected the same spatial size as path 0's {}",
                                          name(), p, to_string(outs[p]), to_string(outs[0])));
      }
      out[0] += outs[p][0];
    }
  }
  return record_shapes(in, out);
}

void Block::reset_parameters(Rng& rng) {
  for (Layer* child : children()) child->reset_parameters(rng);
}

Shape Block::batched(std::int64_t n, const Shape& sample) {
  Shape s = sample;
  s.insert(s.begin(), n);
  return s;
}

DType Block::activation_dtype_of(std::size_t p, std::size_t i) const {
  const auto& layers = paths_[p].layers_;
  std::size_t producer = i;  // the layer that computes it: layer i, or the one that fused it
  while (producer > 0 && layers[producer].second->absorbed()) --producer;
  return activation_dtype(*layers[producer].second, i + 1 < layers.size() ? layers[i + 1].second.get() : nullptr);
}

Tensor& Block::activation(const Tensor& x, std::size_t p, std::size_t i) {
  const Layer& layer = *paths_[p].layers_[i].second;
  return scratch(x, slot_id(kActivation, p, i), batched(x.shape()[0], layer.output_shape()), x.tiles(), x.storage(),
                 activation_dtype_of(p, i));
}

std::size_t Block::group_end(std::size_t p, std::size_t i) const {
  const auto& layers = paths_[p].layers_;
  std::size_t j = i + 1;
  while (j < layers.size() && layers[j].second->absorbed()) ++j;
  return j;
}

int Block::fuse_relu() {
  // The sum and its ReLU in one add task needs every path in it (StarPU's buffer limit), unless a BatchNorm of the
  // block writes the output.
  if (merge_ != Merge::kAdd || relu_ ||
      (fused_path_ < 0 && static_cast<int>(paths_.size()) > codelets::kMaxMergeParts)) {
    return 0;
  }
  relu_ = 1;
  return 1;
}

int Block::fuse_merge() {
  if (merge_ != Merge::kAdd || fused_path_ >= 0 || paths_.size() != 2) return 0;
  for (std::size_t p = 0; p < paths_.size(); ++p) {
    const auto& layers = paths_[p].layers_;
    if (layers.empty()) continue;
    auto* bn = dynamic_cast<BatchNorm2d*>(layers.back().second.get());
    if (bn == nullptr || bn->folded() || bn->relu_fused() || bn->absorbed()) continue;
    fused_path_ = static_cast<int>(p);
    return 1;
  }
  return 0;
}

void Block::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  std::vector<const Tensor*> outs;
  for (std::size_t p = 0; p < paths_.size(); ++p) {
    const auto& layers = paths_[p].layers_;
    // The fused BatchNorm (the path's last layer) runs after the other path, since it adds that path's output.
    const std::size_t count = layers.size() - (static_cast<int>(p) == fused_path_ ? 1 : 0);
    const Tensor* a = &x;
    for (std::size_t i = 0; i < count; ++i) {
      if (layers[i].second->absorbed()) continue;
      Tensor& out = activation(x, p, group_end(p, i) - 1);
      layers[i].second->forward(*a, out, ctx);
      // In evaluation an activation's last reader is the next layer (transient ones give their memory back).
      if (!ctx.training && a != &x) a->discard();
      a = &out;
    }
    outs.push_back(a);
  }
  // In evaluation the paths' outputs die with the merge.
  auto discard_outputs = [&] {
    if (ctx.training) return;
    for (const Tensor* out : outs) {
      if (out != &x) out->discard();
    }
  };
  if (fused_path_ >= 0) {
    const auto p = static_cast<std::size_t>(fused_path_);
    auto& bn = static_cast<BatchNorm2d&>(*paths_[p].layers_.back().second);
    bn.forward_into_sum(*outs[p], *outs[1 - p], relu_, y, ctx);
    discard_outputs();
    return;
  }
  const codelets::TaskTag tag{name(), ctx.priority};
  for (int t = 0; t < x.tiles(); ++t) {
    if (merge_ == Merge::kConcat) {
      codelets::submit_concat_fwd(tag, outs, y, t);
    } else if (relu_) {
      codelets::submit_add_relu(tag, outs, y, t);
    } else {
      codelets::submit_add(tag, "add", outs, y, t);
    }
  }
  discard_outputs();
}

const Tensor* Block::backward_path(std::size_t p, const Tensor& x, const Tensor& y, const Tensor* g, bool need_dx,
                                   bool masked_in_tasks, const PassContext& ctx) {
  auto& layers = paths_[p].layers_;
  const Tensor* path_dy = g;
  for (std::size_t i = layers.size(); i-- > 0;) {
    if (layers[i].second->absorbed()) continue;
    const Tensor& in = i > 0 ? activation(x, p, i - 1) : x;
    Tensor* g_in = nullptr;
    if (i > 0) {
      g_in = &scratch(x, slot_id(kGradient, p, i - 1), in.shape(), x.tiles(), x.storage(), in.dtype());
    } else if (need_dx) {
      g_in = &scratch(x, slot_id(kPathInputGradient, p, 0), x.shape(), x.tiles(), x.storage());
    }
    const std::size_t end = group_end(p, i);
    if (static_cast<int>(p) == fused_path_ && end == layers.size()) {
      // The fused BatchNorm: its output is the block's.
      auto& bn = static_cast<BatchNorm2d&>(*layers[i].second);
      if (masked_in_tasks) {
        bn.backward_masked(in, y, *g, g_in, ctx);
      } else {
        bn.backward(in, y, *g, g_in, ctx);
      }
    } else {
      Tensor& out = activation(x, p, end - 1);
      layers[i].second->backward(in, out, *g, g_in, ctx);
      // This layer and the one after it (whose backward came before) were the output's last readers.
      out.discard();
    }
    // The gradient between two layers of the path dies with the backward pass that reads it.
    if (g != path_dy) g->discard();
    g = g_in;
  }
  return g;
}

void Block::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) {
  const std::int64_t n = x.shape()[0];
  const codelets::TaskTag tag{name(), ctx.priority + 1};
  // The gradient reaching each path's output: dy itself for a sum, dy's channel slice for a concatenation.
  std::vector<const Tensor*> path_dy(paths_.size(), &dy);
  if (merge_ == Merge::kConcat) {
    std::vector<Tensor*> slices;
    for (std::size_t p = 0; p < paths_.size(); ++p) {
      const Shape& out = paths_[p].layers_.empty() ? input_shape() : paths_[p].layers_.back().second->output_shape();
      slices.push_back(&scratch(x, slot_id(kSlice, p, 0), batched(n, out), x.tiles(), x.storage()));
      path_dy[p] = slices.back();
    }
    for (int t = 0; t < dy.tiles(); ++t) codelets::submit_concat_bwd_data(tag, dy, slices, t);
  }
  // The fused ReLU after the sum: with a fused BatchNorm and an identity other path, the BatchNorm masks dy in its
  // own tasks and the identity's masked share joins dx in the task that adds the paths (no masked tensor); otherwise
  // the masked gradient is formed once and every path reads it.
  const bool masked_in_tasks =
      relu_ && fused_path_ >= 0 && paths_[static_cast<std::size_t>(1 - fused_path_)].layers_.empty();
  if (relu_ && !masked_in_tasks) {
    Tensor& masked = scratch(x, slot_id(kMaskedGradient, 0, 0), dy.shape(), dy.tiles(), x.storage());
    for (int t = 0; t < dy.tiles(); ++t) codelets::submit_relu_bwd_data(tag, y, dy, masked, t);
    std::fill(path_dy.begin(), path_dy.end(), &masked);
  }
  std::vector<const Tensor*> contributions;
  for (std::size_t p = 0; p < paths_.size(); ++p) {
    const Tensor* g = backward_path(p, x, y, path_dy[p], dx != nullptr, masked_in_tasks, ctx);
    if (dx != nullptr) contributions.push_back(g);
  }
  // The gradients that the paths read (dy's slices, or dy through the fused ReLU) and the paths' input gradients
  // die with the last task that reads them: the paths' backward passes, then the sum into dx.
  auto discard_gradients = [&] {
    std::vector<const Tensor*> dead(path_dy.begin(), path_dy.end());
    dead.insert(dead.end(), contributions.begin(), contributions.end());
    std::sort(dead.begin(), dead.end());
    dead.erase(std::unique(dead.begin(), dead.end()), dead.end());
    for (const Tensor* g : dead) {
      if (g != &dy) g->discard();
    }
  };
  if (dx == nullptr) {
    discard_gradients();
    return;
  }
  for (int t = 0; t < dy.tiles(); ++t) {
    if (masked_in_tasks) {
      // dx = the BatchNorm path's input gradient + the identity's masked dy.
      codelets::submit_relu_bwd_data_add(tag, "bwd_data", y, dy, *contributions[static_cast<std::size_t>(fused_path_)],
                                         *dx, t);
    } else {
      codelets::submit_add(tag, "bwd_data", contributions, *dx, t);
    }
  }
  discard_gradients();
}

}  // namespace dtnn
