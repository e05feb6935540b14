// SPDX-License-Identifier: Apache-2.0
#include "layers/batch_norm.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "codelets/batch_norm.hpp"
#include "codelets/copy.hpp"
#include "codelets/merge.hpp"
#include "codelets/relu.hpp"
#include "codelets/cpu/nn_kernels.hpp"
#include "core/errors.hpp"

namespace dtnn {

BatchNorm2d::BatchNorm2d(BatchNorm2dOptions o) : options_(o) {
  if (o.features_ < 1 || o.features_ > std::numeric_limits<int>::max() / 4) {
    throw InvalidArgument(fmt::format("BatchNorm2d: num_features={}, expected 1 to {}", o.features_,
                                      std::numeric_limits<int>::max() / 4));
  }
  if (!(o.eps_ > 0.0) || !std::isfinite(o.eps_)) {
    throw InvalidArgument(fmt::format("BatchNorm2d: eps={}, expected a finite value > 0", o.eps_));
  }
  if (!(o.momentum_ >= 0.0 && o.momentum_ <= 1.0)) {
    throw InvalidArgument(fmt::format("BatchNorm2d: momentum={}, expected 0 <= momentum <= 1", o.momentum_));
  }
}

std::string BatchNorm2d::describe() const {
  std::string s = fmt::format("{} features, eps {:g}, momentum {:g}", options_.features_, options_.eps_,
                              options_.momentum_);
  if (!options_.affine_) s += ", no affine";
  if (relu_) s += ", +ReLU";
  return s;
}

int BatchNorm2d::fuse_relu() {
  if (folded_ || relu_) return 0;
  relu_ = 1;
  return 1;
}

Shape BatchNorm2d::build(const Shape& in) {
  const std::int64_t c = options_.features_;
  const bool feature_map = in.size() == 3 && in[0] == c && in[1] >= 1 && in[2] >= 1;
  const bool features = in.size() == 1 && in[0] == c;
  if (!feature_map && !features) {
    throw InvalidArgument(fmt::format("BatchNorm2d {}: input {}, expected (C={}, H, W) or (C={})", name(),
                                      to_string(in), c, c));
  }
  channels_ = static_cast<int>(c);
  if (options_.affine_) {
    weight_ = &add_parameter("weight", {c});
    bias_ = &add_parameter("bias", {c});
    // One reduction task writes both: ordered sums over the ranks need --sync-bn here (which equals one rank's
    // statistics, the point of an ordered sum).
    weight_->continues_partial_sums = 0;
    bias_->continues_partial_sums = 0;
  }
  running_mean_ = &add_buffer("running_mean", {c});
  running_var_ = &add_buffer("running_var", {c});
  batches_ = &add_buffer("num_batches_tracked", {1});
  running_var_->value.fill(1.0f);
  return record_shapes(in, in);
}

void BatchNorm2d::reset_parameters(Rng&) {
  if (weight_ != nullptr) {
    weight_->value.fill(1.0f);
    bias_->value.fill(0.0f);
  }
  running_mean_->value.fill(0.0f);
  running_var_->value.fill(1.0f);
  batches_->value.fill(0.0f);
}

int BatchNorm2d::plane_size() const {
  const Shape& in = input_shape();
  return in.size() == 3 ? static_cast<int>(in[1] * in[2]) : 1;
}

void BatchNorm2d::forward(const Tensor& x, Tensor& y, const PassContext& ctx) {
  forward_with(x, codelets::BatchNormEpilogue{nullptr, relu_}, y, ctx);
}

void BatchNorm2d::forward_into_sum(const Tensor& x, const Tensor& residual, int relu, Tensor& y,
                                   const PassContext& ctx) {
  forward_with(x, codelets::BatchNormEpilogue{&residual, relu}, y, ctx);
}

void BatchNorm2d::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const PassContext& ctx) {
  backward_with(x, relu_ ? &y : nullptr, dy, dx, ctx);
}

void BatchNorm2d::backward_masked(const Tensor& x, const Tensor& relu_y, const Tensor& dy, Tensor* dx,
                                  const PassContext& ctx) {
  backward_with(x, &relu_y, dy, dx, ctx);
}

void BatchNorm2d::forward_with(const Tensor& x, const codelets::BatchNormEpilogue& epilogue, Tensor& y,
                               const PassContext& ctx) {
  const codelets::TaskTag tag{name(), ctx.priority};
  const Tensor* gamma = weight_ != nullptr ? &weight_->value : nullptr;
  const Tensor* beta = bias_ != nullptr ? &bias_->value : nullptr;
  const int c = channels_;
  if (folded_) {
    if (ctx.training) {
      throw InvalidArgument(fmt::format("BatchNorm2d {}: folded into its convolution for inference, expected no "
                                        "training afterwards",
                                        name()));
    }
    // The convolution computes the normalised values: what is left is the epilogue.
    for (int t = 0; t < x.tiles(); ++t) {
      if (epilogue.residual != nullptr) {
        const std::vector<const Tensor*> terms{&x, epilogue.residual};
        if (epilogue.relu) {
          codelets::submit_add_relu(tag, terms, y, t);
        } else {
          codelets::submit_add(tag, "add", terms, y, t);
        }
      } else if (epilogue.relu) {
        codelets::submit_relu_fwd(tag, x, y, t);
      } else {
        codelets::submit_copy(tag, "fwd", x, y, t);
      }
    }
    return;
  }
  if (!ctx.training) {
    for (int t = 0; t < x.tiles(); ++t) {
      codelets::submit_batch_norm_infer_fwd(tag, c, options_.eps_, x, running_mean_->value, running_var_->value,
                                            gamma, beta, y, t, epilogue);
    }
    return;
  }
  const std::int64_t n = x.shape()[0];
  const std::int64_t batch = batch_rows(n, ctx);
  const double count = static_cast<double>(batch) * plane_size();
  // As PyTorch: the unbiased variance that updates running_var divides by count - 1.
  if (count <= 1.0) {
    throw InvalidArgument(fmt::format("BatchNorm2d {}: training with {} value per channel (batch {} of {}), expected "
                                      "more than 1",
                                      name(), count, n, to_string(input_shape())));
  }
  Tensor& partials = scratch(x, kPartials, {n, c}, x.tiles());
  Tensor& stats = scratch(x, kStats, {2, c}, 1);
  Tensor& acc = scratch(x, kAccumulator, {4 * static_cast<std::int64_t>(c)}, 1);
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_batch_norm_sums(tag, c, x, partials, t);
  }
  // Synchronised: the reductions read every rank's rows, gathered rank after rank, so each rank computes the
  // statistics of the whole global batch in sample order (the same bits on every rank).
  Tensor* reduced = &partials;
  if (ctx.sync != nullptr) {
    reduced = &scratch(x, kGlobalPartials, {batch, c}, 1);
    ctx.sync->reducer->all_gather(partials, *reduced, ctx.sync->rows_per_rank, name() + ".sums");
  }
  codelets::submit_batch_norm_mean(tag, count, *reduced, acc, stats);
  // The squared deviations reuse the partials: their reduction above is what they wait for anyway.
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_batch_norm_sqdev_sums(tag, c, x, stats, partials, t);
  }
  if (ctx.sync != nullptr) {
    ctx.sync->reducer->all_gather(partials, *reduced, ctx.sync->rows_per_rank, name() + ".sqdev");
  }
  codelets::submit_batch_norm_var(tag, BatchNormUpdate{count, options_.eps_, options_.momentum_},
                                  *reduced, acc, stats, running_mean_->value, running_var_->value, batches_->value);
  for (int t = 0; t < x.tiles(); ++t) {
    codelets::submit_batch_norm_fwd(tag, c, x, stats, gamma, beta, y, t, epilogue);
  }
}

void BatchNorm2d::backward_with(const Tensor& x, const Tensor* relu_y, const Tensor& dy, Tensor* dx,
                                const PassContext& ctx) {
  if (dx == nullptr && weight_ == nullptr) {
    return;
  }
  // The whole chain leads to dx, so it gets the data gradient's priority.
  const codelets::TaskTag tag{name(), ctx.priority + 1};
  const int c = channels_;
  const std::int64_t n = dy.shape()[0];
  const std::int64_t batch = ctx.training ? batch_rows(n, ctx) : n;
  const double count = static_cast<double>(batch) * plane_size();
  Tensor& stats = scratch(x, kStats, {2, c}, 1);
  if (!ctx.training) {
    codelets::submit_batch_norm_frozen_stats(tag, options_.eps_, running_mean_->value, running_var_->value, stats);
  }
  const Tensor* gamma = weight_ != nullptr ? &weight_->value : nullptr;
  Tensor& partials = scratch(x, kGradPartials, {n, 2 * static_cast<std::int64_t>(c)}, x.tiles());
  Tensor& grad_stats = scratch(x, kGradStats, {2, c}, 1);
  Tensor& acc = scratch(x, kAccumulator, {4 * static_cast<std::int64_t>(c)}, 1);
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_batch_norm_bwd_sums(tag, c, x, dy, stats, partials, t, relu_y);
  }
  Tensor* reduced = &partials;
  const int synchronised = ctx.training && ctx.sync != nullptr;
  if (synchronised) {
    reduced = &scratch(x, kGlobalGradPartials, {batch, 2 * static_cast<std::int64_t>(c)}, 1);
    ctx.sync->reducer->all_gather(partials, *reduced, ctx.sync->rows_per_rank, name() + ".grad_sums");
  }
  // Synchronised, dgamma and dbeta come out summed over every rank: the gradient reduction must skip them.
  if (weight_ != nullptr) weight_->reduced_over_ranks = synchronised;
  if (bias_ != nullptr) bias_->reduced_over_ranks = synchronised;
  codelets::submit_batch_norm_bwd_reduce(tag, count, *reduced, acc, grad_stats,
                                         weight_ != nullptr ? &weight_->grad : nullptr,
                                         bias_ != nullptr ? &bias_->grad : nullptr);
  if (dx == nullptr) {
    return;
  }
  for (int t = 0; t < dy.tiles(); ++t) {
    codelets::submit_batch_norm_bwd_data(tag, c, x, dy, stats, ctx.training ? &grad_stats : nullptr, gamma, *dx, t,
                                         relu_y);
  }
}

std::int64_t BatchNorm2d::batch_rows(std::int64_t local_rows, const PassContext& ctx) const {
  if (ctx.sync == nullptr) return local_rows;
  std::int64_t rows = 0;
  for (std::int64_t r : ctx.sync->rows_per_rank) rows += r;
  return rows;
}

void BatchNorm2d::folded_scale_shift(std::vector<float>& scale, std::vector<float>& shift) const {
  const auto c = static_cast<std::size_t>(channels_);
  scale.assign(c, 0.0f);
  shift.assign(c, 0.0f);
  if (running_mean_ == nullptr) {
    throw InvalidArgument(fmt::format("BatchNorm2d {}: folded_scale_shift() before build()", name()));
  }
  auto mean = running_mean_->value.read();
  auto var = running_var_->value.read();
  if (weight_ != nullptr) {
    auto gamma = weight_->value.read();
    auto beta = bias_->value.read();
    kernels::cpu::batch_norm_scale_shift(channels_, options_.eps_, mean.data().data(), var.data().data(),
                                         gamma.data().data(), beta.data().data(), scale.data(), shift.data());
  } else {
    kernels::cpu::batch_norm_scale_shift(channels_, options_.eps_, mean.data().data(), var.data().data(), nullptr,
                                         nullptr, scale.data(), shift.data());
  }
}

}  // namespace dtnn
