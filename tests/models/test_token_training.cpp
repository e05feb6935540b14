// SPDX-License-Identifier: Apache-2.0
// A model of token ids trained on a byte-level text corpus through fit(): windows in, the token cross-entropy's mean
// over target tokens, its metrics, the same bits for any tile count.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "io/h5tokens.hpp"
#include "io/text.hpp"
#include "layers/dense.hpp"
#include "layers/embedding.hpp"
#include "layers/layer_norm.hpp"
#include "models/optimizers.hpp"
#include "models/recipe.hpp"
#include "models/training.hpp"
#include "models/zoo.hpp"
#include "support/throws_with.hpp"

namespace dtnn {
namespace {

using test_support::throws_with;

constexpr int kSequence = 8;

// A bigram model: each position's logits from its own token (Embedding, then Dense on the last axis).
Sequential bigram_model(std::uint64_t seed) {
  Sequential model;
  model.add(std::make_unique<Embedding>(EmbeddingOptions(io::kByteVocabulary, 12)));
  model.add(std::make_unique<Dense>(DenseOptions(12, io::kByteVocabulary)));
  model.build({kSequence}, seed);
  return model;
}

// Logits straight from a table (an Embedding of dimension 256) through a LayerNorm: both accumulate their weight
// gradients tile after tile in batch order, so that the weights are the same bits for any tile count. (Dense sums
// per-tile GEMM partials: the same bits for a given tile count only, docs/design.md.)
Sequential table_model(std::uint64_t seed) {
  Sequential model;
  model.add(std::make_unique<Embedding>(EmbeddingOptions(io::kByteVocabulary, io::kByteVocabulary)));
  model.add(std::make_unique<LayerNorm>(LayerNormOptions(io::kByteVocabulary)));
  model.build({kSequence}, seed);
  return model;
}

// A folder of 60 short fortunes with a strong bigram structure, read as the corpus of `dtnn train --dataset text`.
class Corpus {
 public:
  Corpus() : dir_(std::filesystem::temp_directory_path() / fmt::format("dtnn-tokens-{}", ::getpid())) {
    std::filesystem::create_directories(dir_);
    std::ofstream out(dir_ / "fortunes", std::ios::binary);
    const char* animals[] = {"cat", "dog", "cow", "owl"};
    for (int k = 0; k < 60; ++k) {
      out << fmt::format("the {} sat on the mat {} times\n%\n", animals[k % 4], k % 7);
    }
  }
  ~Corpus() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

TEST(TokenTrainingTest, LossFallsAndWeightsAreTheSameForAnyTileCount) {
  const Corpus corpus;
  const io::TrainTest data = io::load_text_dataset(corpus.dir(), kSequence);
  auto run = [&](int tiles) {
    Sequential model = table_model(5);
    Adam adam(AdamOptions(0.02f));
    History h = fit(model, adam, data.train,
                    FitOptions().epochs(3).batch_size(16).tiles(tiles).seed(4).verbose(false), &data.test);
    return std::make_pair(model.weights_checksum(), h);
  };
  const auto [one, history] = run(1);
  const auto [three, history3] = run(3);
  EXPECT_EQ(one, three);
  ASSERT_EQ(history.epochs.size(), 3u);
  const EpochRecord& first = history.epochs.front();
  const EpochRecord& last = history.epochs.back();
  EXPECT_EQ(first.images, data.train.size());
  EXPECT_EQ(first.tokens, data.train.size() * kSequence);
  EXPECT_TRUE(history.tokens());
  // From about ln(256) = 5.55 nats down towards the corpus's bigram entropy.
  EXPECT_LT(last.loss, 0.6 * first.loss);
  EXPECT_LT(last.val_loss, 2.5);
  EXPECT_GT(last.val_accuracy, 0.4);
  EXPECT_DOUBLE_EQ(last.perplexity(), std::exp(last.loss));
  EXPECT_DOUBLE_EQ(last.val_bits_per_char(), last.val_loss / std::log(2.0));
  EXPECT_NEAR(history3.epochs.back().val_loss, last.val_loss, 1e-6);  // float sums per tile: not the same bits
}

// evaluate's loss and accuracy against the logits of predict(): the targets are each input token's successor, the
// loss their mean over every target token.
TEST(TokenTrainingTest, EvaluationIsTheMeanOverTargetTokensOfTheNextByte) {
  const Corpus corpus;
  const io::TrainTest data = io::load_text_dataset(corpus.dir(), kSequence);
  Sequential model = bigram_model(7);
  const std::vector<float> logits = predict(model, data.test, EvalOptions().batch_size(3).tiles(2).logits(true));
  ASSERT_EQ(logits.size(), static_cast<std::size_t>(data.test.size() * kSequence * io::kByteVocabulary));
  double loss = 0.0;
  double correct = 0.0;
  for (std::int64_t i = 0; i < data.test.size(); ++i) {
    for (int j = 0; j < kSequence; ++j) {
      const float* z = logits.data() + (i * kSequence + j) * io::kByteVocabulary;
      const std::int64_t at = data.test.windows[static_cast<std::size_t>(i)] + j + 1;
      const int target = (*data.test.tokens)[static_cast<std::size_t>(at)];
      double max = z[0], sum = 0.0;
      int arg = 0;
      for (int c = 0; c < io::kByteVocabulary; ++c) {
        if (z[c] > max) max = z[c], arg = c;
      }
      for (int c = 0; c < io::kByteVocabulary; ++c) sum += std::exp(z[c] - max);
      loss += std::log(sum) + max - z[target];
      correct += arg == target ? 1.0 : 0.0;
    }
  }
  const double tokens = static_cast<double>(data.test.size() * kSequence);
  for (int tiles : {1, 3}) {
    const EvalResult r = evaluate(model, data.test, EvalOptions().batch_size(4).tiles(tiles));
    EXPECT_EQ(r.samples, data.test.size());
    EXPECT_EQ(r.tokens, data.test.size() * kSequence);
    EXPECT_NEAR(r.loss, loss / tokens, 1e-5);
    EXPECT_NEAR(r.accuracy, correct / tokens, 1e-12);
    EXPECT_NEAR(r.loss, std::log(256.0), 0.3);  // PyTorch's initialisation: logits near 0 before training
  }
}

// One SGD step on one global batch of every window: the output bias moves by lr x the mean over target tokens of
// (softmax - smoothed one-hot), PyTorch's CrossEntropyLoss(label_smoothing=s) with reduction='mean'.
TEST(TokenTrainingTest, OneStepFollowsTheMeanGradientOverTokensWithLabelSmoothing) {
  const Corpus corpus;
  const io::Dataset data = io::load_text_dataset(corpus.dir(), kSequence).test;
  Sequential model = bigram_model(3);
  const std::vector<float> p = predict(model, data, EvalOptions().batch_size(64).tiles(1));
  const float lr = 0.5f, smoothing = 0.1f;
  std::vector<double> expected(io::kByteVocabulary, 0.0);
  const double tokens = static_cast<double>(data.size() * kSequence);
  for (std::int64_t i = 0; i < data.size(); ++i) {
    for (int j = 0; j < kSequence; ++j) {
      const int target = (*data.tokens)[static_cast<std::size_t>(data.windows[static_cast<std::size_t>(i)] + j + 1)];
      const float* probabilities = p.data() + (i * kSequence + j) * io::kByteVocabulary;
      for (int c = 0; c < io::kByteVocabulary; ++c) {
        const double t = (c == target ? 1.0 - smoothing : 0.0) + smoothing / io::kByteVocabulary;
        expected[static_cast<std::size_t>(c)] += (probabilities[c] - t) / tokens;
      }
    }
  }
  Parameter* bias = nullptr;
  for (const NamedParameter& np : model.named_parameters()) {
    if (np.name == "1.bias") bias = np.parameter;
  }
  ASSERT_NE(bias, nullptr);
  const std::vector<float> before = bias->value.to_vector();
  Sgd sgd{SgdOptions(lr)};
  fit(model, sgd, data,
      FitOptions().batch_size(data.size()).tiles(3).shuffle(false).label_smoothing(smoothing).verbose(false));
  const std::vector<float> after = bias->value.to_vector();
  for (std::size_t c = 0; c < expected.size(); ++c) {
    ASSERT_NEAR(after[c], before[c] - lr * expected[c], 1e-6) << "class " << c;
  }
}

// dtnn convert's token file, streamed window by window by the load tasks: the same training as from memory.
TEST(TokenTrainingTest, StreamingFromHdf5EqualsTrainingInMemory) {
  const Corpus corpus;
  const io::TextSplits s = io::read_text_corpus(corpus.dir());
  const std::vector<std::int32_t> train = io::byte_tokens(s.train), test = io::byte_tokens(s.test);
  const auto file = corpus.dir() / "tokens.h5";
  io::write_h5_tokens(file, s.name, io::kByteVocabulary, {{"train", train, s.train_records}, {"test", test, 0}});
  const io::TrainTest in_memory = io::load_text_dataset(corpus.dir() / "fortunes", kSequence);
  const io::TrainTest streamed{io::open_h5_tokens(file, "train", kSequence),
                               io::open_h5_tokens(file, "test", kSequence)};
  ASSERT_EQ(streamed.train.tokens, nullptr);
  auto run = [](const io::TrainTest& data) {
    Sequential model = bigram_model(2);
    Adam adam(AdamOptions(0.01f));
    const History h =
        fit(model, adam, data.train, FitOptions().epochs(2).batch_size(8).tiles(3).seed(6).verbose(false), &data.test);
    return std::make_pair(model.weights_checksum(), h.epochs.back().val_loss);
  };
  EXPECT_EQ(run(streamed), run(in_memory));
}

// What `dtnn train --dataset text|synthetic|h5` loads for a model of token ids: windows of the model's input length.
TEST(TokenTrainingTest, LoadDataCutsWindowsOfTheModelsInputLength) {
  const Corpus corpus;
  const models::ModelInfo info{"bigram", "test model", {kSequence}, io::kByteVocabulary, [] {
                                 Sequential m;
                                 m.add(std::make_unique<Embedding>(EmbeddingOptions(io::kByteVocabulary, 4)));
                                 m.add(std::make_unique<Dense>(DenseOptions(4, io::kByteVocabulary)));
                                 return m;
                               }};
  EXPECT_TRUE(takes_tokens(info));
  DataOptions text;
  text.dataset = "text";
  text.dir = corpus.dir();
  text.test_samples = 5;
  const io::TrainTest d = load_data(text, info, 16, 1);
  EXPECT_EQ(d.train.sequence, kSequence);
  EXPECT_EQ(d.train.size(), io::load_text_dataset(corpus.dir(), kSequence).train.size());
  EXPECT_EQ(d.test.size(), 5);
  DataOptions synthetic;
  synthetic.dataset = "synthetic";
  synthetic.synthetic_samples = 12;
  const io::TrainTest r = load_data(synthetic, info, 16, 1);
  EXPECT_EQ(r.train.size(), 12);
  EXPECT_EQ(r.train.sequence, kSequence);
  EXPECT_EQ(r.test.size(), 2);
  text.normalize = true;
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { (void)load_data(text, info, 16, 1); }, {"--normalize", "token ids"}));
  text.normalize = false;
  text.file = corpus.dir() / "fortunes";
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { (void)load_data(text, info, 16, 1); },
                                           {"--data-dir", "--data-file", "expected one of them"}));
  const models::ModelInfo& classifier = models::find("simplecnn");
  EXPECT_FALSE(takes_tokens(classifier));
  text.file.clear();
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { (void)load_data(text, classifier, 16, 1); },
                                           {"--dataset text", "simplecnn", "model of token ids"}));
}

TEST(TokenTrainingTest, ModelsAndDataOfTheOtherKindAreRefused) {
  const Corpus corpus;
  const io::Dataset tokens = io::load_text_dataset(corpus.dir(), kSequence).train;
  const io::Dataset images = io::synthetic_dataset(8, 1, 1, kSequence, io::kByteVocabulary, 1);
  Sequential token_model = bigram_model(1);
  Sgd sgd(SgdOptions(0.1f));
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { fit(token_model, sgd, images, FitOptions().verbose(false)); },
                                           {"float32 samples", "int32"}));
  EXPECT_TRUE(throws_with<InvalidArgument>(
      [&] {
        fit(token_model, sgd, tokens,
            FitOptions().verbose(false).loss(codelets::LossKind::kBinaryCrossEntropy));
      },
      {"token cross-entropy", "binary_cross_entropy"}));
  EXPECT_TRUE(throws_with<InvalidArgument>(
      [&] { fit(token_model, sgd, tokens, FitOptions().verbose(false).augment(AugmentOptions{true, 0})); },
      {"token windows", "no augmentation"}));
  const io::Dataset longer = io::load_text_dataset(corpus.dir(), kSequence * 2).train;
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { (void)evaluate(token_model, longer); },
                                           {"windows of 16 token ids", "int32 input (16,)", "got int32 input (8,)"}));
  Sequential classifier;
  classifier.add(std::make_unique<Dense>(DenseOptions(kSequence, io::kByteVocabulary)));
  classifier.build({1, 1, kSequence}, 1);
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { fit(classifier, sgd, tokens, FitOptions().verbose(false)); },
                                           {"windows of 8 token ids", "got float32 input"}));
}

}  // namespace
}  // namespace dtnn
