// SPDX-License-Identifier: Apache-2.0
// Text from a causal language model: the next token sampled from the logits at the last position of the context,
// appended, again (no key-value cache: each token is one forward pass of batch 1 over the last `context` tokens,
// as tasks like any evaluation).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models/sequential.hpp"

namespace dtnn {

struct SamplingOptions {
  // Logits divided by it before the softmax; 0: greedy (the argmax, the first on ties).
  SamplingOptions& temperature(double t) { temperature_ = t; return *this; }
  // Sample among the k most likely tokens only (ties at the k-th kept); 0: all.
  SamplingOptions& top_k(int k) { top_k_ = k; return *this; }
  // The draws: std::mt19937_64's raw outputs, which the standard fixes, so a seed gives the same text everywhere.
  SamplingOptions& seed(std::uint64_t s) { seed_ = s; return *this; }

  double temperature_ = 1.0;
  int top_k_ = 0;
  std::uint64_t seed_ = 0;
};

// The `tokens` tokens that follow `prompt` (model: built, int32 ids [context] in, logits [context, vocab] out, every
// attention causal). A prompt longer than the context keeps its last `context` tokens. InvalidArgument for an empty
// prompt, an id outside the vocabulary, a model that is not a causal language model, or bad sampling options.
std::vector<std::int32_t> generate(Sequential& model, std::span<const std::int32_t> prompt, std::int64_t tokens,
                                   const SamplingOptions& options = {});

// The index drawn from logits [vocab] (exposed for its tests).
std::int32_t sample_token(std::span<const float> logits, const SamplingOptions& options, std::uint64_t random_bits);

}  // namespace dtnn
