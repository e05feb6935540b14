// SPDX-License-Identifier: Apache-2.0
// Sampling the next token (greedy, temperature, top-k, seeds) and generating from a small causal model: greedy
// generation equals the argmax of the logits the whole text gives, position by position, since the model is causal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "layers/attention.hpp"
#include "layers/dense.hpp"
#include "layers/embedding.hpp"
#include "layers/positional.hpp"
#include "models/generate.hpp"
#include "support/throws_with.hpp"

namespace dtnn {
namespace {

constexpr std::int64_t kContext = 6;
constexpr std::int64_t kVocab = 11;

Sequential tiny_lm(bool causal) {
  Sequential m;
  m.add<Embedding>(EmbeddingOptions(kVocab, 8))
      .add<PositionalEncoding>(PositionalEncodingOptions(kContext, 8).learned(true))
      .add<MultiHeadAttention>(MultiHeadAttentionOptions(8, 2).causal(causal))
      .add<Dense>(DenseOptions(8, kVocab));
  m.build({kContext}, 17);
  return m;
}

// The logits of every position of one window of ids, padded after them with another id than generate() pads with:
// in a causal model no padding changes the logits of the positions before it.
std::vector<float> logits_of(Sequential& model, const std::vector<std::int32_t>& ids) {
  std::vector<Tensor> acts;
  model.allocate(1, 1, acts, nullptr);
  std::vector<std::int32_t> window(static_cast<std::size_t>(kContext), 9);
  std::copy(ids.begin(), ids.end(), window.begin());
  acts.front().copy_from_values<std::int32_t>(window);
  model.forward(acts, PassContext{0, 0, 0});
  return acts.back().to_vector();
}

TEST(SampleTokenTest, GreedyTakesTheFirstLargestLogit) {
  const std::vector<float> z{0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(sample_token(z, SamplingOptions().temperature(0.0), 12345), 1);
}

TEST(SampleTokenTest, FrequenciesFollowTheSoftmaxAtTheTemperatureAndTopKKeepsTheLargest) {
  const std::vector<float> z{1.0f, 0.0f, 2.0f, -1.0f};
  for (const double t : {1.0, 0.5}) {
    std::mt19937_64 rng(3);
    std::vector<int> counts(z.size(), 0);
    const int draws = 40000;
    for (int i = 0; i < draws; ++i) {
      ++counts[static_cast<std::size_t>(sample_token(z, SamplingOptions().temperature(t), rng()))];
    }
    double total = 0.0;
    for (float v : z) total += std::exp(v / t);
    for (std::size_t j = 0; j < z.size(); ++j) {
      EXPECT_NEAR(counts[j] / static_cast<double>(draws), std::exp(z[j] / t) / total, 0.01) << "t " << t << " j " << j;
    }
  }
  std::mt19937_64 rng(4);
  for (int i = 0; i < 2000; ++i) {
    const std::int32_t k = sample_token(z, SamplingOptions().top_k(2), rng());
    ASSERT_TRUE(k == 0 || k == 2) << k;
  }
}

TEST(GenerateTest, GreedyTextIsTheArgmaxOfTheCausalModelsLogitsAtEachPosition) {
  Sequential model = tiny_lm(true);
  const std::vector<std::int32_t> prompt{3, 7};
  // Beyond the context: the window slides.
  const auto text = generate(model, prompt, 8, SamplingOptions().temperature(0.0));
  ASSERT_EQ(text.size(), 8u);
  std::vector<std::int32_t> all = prompt;
  all.insert(all.end(), text.begin(), text.end());
  for (std::size_t n = 0; n < text.size(); ++n) {
    const std::size_t end = prompt.size() + n;  // tokens before the n-th generated one
    const std::size_t used = std::min<std::size_t>(end, kContext);
    const std::vector<std::int32_t> window(all.begin() + static_cast<std::ptrdiff_t>(end - used),
                                           all.begin() + static_cast<std::ptrdiff_t>(end));
    const auto z = logits_of(model, window);
    const auto row = z.begin() + static_cast<std::ptrdiff_t>((used - 1) * kVocab);
    EXPECT_EQ(text[n], std::max_element(row, row + kVocab) - row) << "token " << n;
  }
}

TEST(GenerateTest, TheSameSeedGivesTheSameTextAndAnotherSeedAnother) {
  Sequential model = tiny_lm(true);
  const std::vector<std::int32_t> prompt{1};
  const auto a = generate(model, prompt, 12, SamplingOptions().seed(5));
  EXPECT_EQ(generate(model, prompt, 12, SamplingOptions().seed(5)), a);
  EXPECT_NE(generate(model, prompt, 12, SamplingOptions().seed(6)), a);
}

TEST(GenerateTest, RefusesANonCausalModelAnIdOutsideTheVocabularyAndAnEmptyPrompt) {
  Sequential encoder = tiny_lm(false);
  const std::vector<std::int32_t> ok{1};
  EXPECT_TRUE(test_support::throws_with<InvalidArgument>([&] { (void)generate(encoder, ok, 1); },
                                                         {"attention '2' is not causal"}));
  Sequential model = tiny_lm(true);
  const std::vector<std::int32_t> bad{1, 11};
  EXPECT_TRUE(test_support::throws_with<InvalidArgument>([&] { (void)generate(model, bad, 1); },
                                                         {"prompt token 11 at position 1, expected 0 <= id < 11"}));
  EXPECT_TRUE(test_support::throws_with<InvalidArgument>(
      [&] { (void)generate(model, std::vector<std::int32_t>{}, 1); }, {"an empty prompt"}));
  EXPECT_TRUE(test_support::throws_with<InvalidArgument>(
      [&] { (void)generate(model, ok, 1, SamplingOptions().temperature(-1)); }, {"temperature -1"}));
}

}  // namespace
}  // namespace dtnn
