// SPDX-License-Identifier: Apache-2.0
#include "models/generate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "layers/attention.hpp"

namespace dtnn {
namespace {

// Every attention of the model masks the future: the logits at position t then depend on tokens 0..t only, so a
// window shorter than the context may be followed by anything.
void check_causal(Layer& layer, int& attentions) {
  if (const auto* a = dynamic_cast<const MultiHeadAttention*>(&layer)) {
    ++attentions;
    if (!a->options().causal_) {
      throw InvalidArgument(fmt::format("generate: attention '{}' is not causal, expected a causal language model "
                                        "(a model whose attention masks the future)",
                                        layer.name()));
    }
  }
  for (Layer* child : layer.children()) check_causal(*child, attentions);
}

void check_options(const SamplingOptions& o) {
  if (!(o.temperature_ >= 0.0) || !std::isfinite(o.temperature_)) {
    throw InvalidArgument(fmt::format("generate: temperature {}, expected a finite value >= 0", o.temperature_));
  }
  if (o.top_k_ < 0) throw InvalidArgument(fmt::format("generate: top_k {}, expected >= 0", o.top_k_));
}

}  // namespace

std::int32_t sample_token(std::span<const float> logits, const SamplingOptions& options, std::uint64_t random_bits) {
  const auto vocab = logits.size();
  if (options.temperature_ == 0.0) {
    return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  // Kept: the k largest logits (and any tie with the k-th).
  float floor = -INFINITY;
  if (options.top_k_ > 0 && static_cast<std::size_t>(options.top_k_) < vocab) {
    std::vector<float> sorted(logits.begin(), logits.end());
    std::nth_element(sorted.begin(), sorted.begin() + (options.top_k_ - 1), sorted.end(), std::greater<>());
    floor = sorted[static_cast<std::size_t>(options.top_k_ - 1)];
  }
  const double top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> weight(vocab, 0.0);
  for (std::size_t j = 0; j < vocab; ++j) {
    if (logits[j] >= floor) weight[j] = std::exp((logits[j] - top) / options.temperature_);
  }
  const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
  // A uniform double in [0, 1) from the top 53 bits.
  const double u = static_cast<double>(random_bits >> 11) * 0x1.0p-53 * total;
  double sum = 0.0;
  std::size_t last = 0;
  for (std::size_t j = 0; j < vocab; ++j) {
    if (weight[j] == 0.0) continue;
    sum += weight[j];
    last = j;
    if (u < sum) return static_cast<std::int32_t>(j);
  }
  return static_cast<std::int32_t>(last);
}

std::vector<std::int32_t> generate(Sequential& model, std::span<const std::int32_t> prompt, std::int64_t tokens,
                                   const SamplingOptions& options) {
  check_options(options);
  if (!model.built()) throw InvalidArgument("generate: the model is not built, expected build() first");
  const Shape& in = model.input_shape();
  const Shape& out = model.output_shape();
  if (in.size() != 1 || out.size() != 2 || out[0] != in[0] || model.layer(0).input_dtype() != DType::kInt32) {
    throw InvalidArgument(fmt::format("generate: a model of input {} and output {}, expected token ids [context] in "
                                      "and logits [context, vocabulary] out",
                                      to_string(in), to_string(out)));
  }
  int attentions = 0;
  for (std::size_t i = 0; i < model.size(); ++i) check_causal(model.layer(i), attentions);
  if (attentions == 0) {
    throw InvalidArgument("generate: the model has no attention, expected a causal language model");
  }
  const std::int64_t context = in[0];
  const std::int64_t vocab = out[1];
  if (prompt.empty()) throw InvalidArgument("generate: an empty prompt, expected at least one token");
  if (tokens < 0) throw InvalidArgument(fmt::format("generate: {} tokens, expected >= 0", tokens));
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= vocab) {
      throw InvalidArgument(fmt::format("generate: prompt token {} at position {}, expected 0 <= id < {}", prompt[i],
                                        i, vocab));
    }
  }
  std::vector<std::int32_t> text(prompt.begin(), prompt.end());
  std::vector<Tensor> acts;
  model.allocate(1, 1, acts, nullptr, Storage::kTransient);
  std::mt19937_64 rng(options.seed_);
  std::vector<std::int32_t> window(static_cast<std::size_t>(context), 0);
  std::vector<std::int32_t> generated;
  const PassContext ctx{0, 0, 0};
  for (std::int64_t n = 0; n < tokens; ++n) {
    const auto used = std::min<std::size_t>(text.size(), static_cast<std::size_t>(context));
    std::fill(window.begin(), window.end(), 0);
    std::copy(text.end() - static_cast<std::ptrdiff_t>(used), text.end(), window.begin());
    acts.front().copy_from_values<std::int32_t>(window);
    model.forward(acts, ctx);
    auto logits = acts.back().read();
    const std::span<const float> last = logits.data().subspan((used - 1) * static_cast<std::size_t>(vocab),
                                                              static_cast<std::size_t>(vocab));
    const std::int32_t next = sample_token(last, options, rng());
    text.push_back(next);
    generated.push_back(next);
  }
  return generated;
}

}  // namespace dtnn
