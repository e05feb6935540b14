// SPDX-License-Identifier: Apache-2.0
// Weights exported by dtnn give the same logits in PyTorch, and come back unchanged (tools/*.py). Skipped where
// Debian's python3-torch or python3-h5py is absent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "io/checkpoint.hpp"
#include "io/dataset.hpp"
#include "layers/init.hpp"
#include "models/checkpointing.hpp"
#include "models/optimizers.hpp"
#include "models/zoo.hpp"
#include "support/environment.hpp"

namespace dtnn {
namespace {

namespace fs = std::filesystem;

// Asked once per process: importing torch takes seconds.
int python_has_torch_and_h5py() {
  static const int available = std::system("/usr/bin/python3 -c 'import torch, h5py' > /dev/null 2>&1") == 0;
  return available;
}

void write_floats(const fs::path& file, const std::vector<float>& v) {
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
}

std::vector<float> read_floats(const fs::path& file, std::size_t count) {
  std::vector<float> v(count);
  std::ifstream in(file, std::ios::binary);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * sizeof(float)));
  return v;
}

int run(const std::string& command) { return std::system((command + " 2>&1").c_str()); }

TEST(PytorchInterchangeTest, Resnet18Cifar10GivesTheSameLogitsInPyTorch) {
  if (!python_has_torch_and_h5py()) DTNN_SKIP_UNLESS_STRICT("/usr/bin/python3 cannot import torch and h5py");
  const fs::path dir = fs::temp_directory_path() / ("dtnn-torch-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const models::ModelInfo& info = models::find("resnet18_cifar10");
  Sequential model = info.make();
  model.build(info.input, 3);
  // A few steps, so that the running statistics of every BatchNorm are not the initial ones.
  const io::Dataset train = io::synthetic_dataset(32, 3, 32, 32, 10, 1);
  Sgd sgd(SgdOptions(0.01f).momentum(0.9f));
  fit(model, sgd, train, FitOptions().batch_size(16).tiles(2).verbose(false));

  const io::Dataset input = io::synthetic_dataset(4, 3, 32, 32, 10, 2);
  const auto ours = predict(model, input, EvalOptions().logits(true));
  io::save_checkpoint(dir / "ckpt.h5", capture_checkpoint(model, nullptr, CheckpointMeta{info.name}));
  write_floats(dir / "input.f32", input.images);

  const std::string src = DTNN_SOURCE_DIR;
  ASSERT_EQ(run("/usr/bin/python3 " + src + "/tools/checkpoint_to_pytorch.py " + (dir / "ckpt.h5").string() + " " +
                (dir / "sd.pt").string()),
            0);
  ASSERT_EQ(run("/usr/bin/python3 " + src + "/tests/python/resnet18_cifar10_logits.py " + (dir / "sd.pt").string() +
                " " + (dir / "input.f32").string() + " 4 " + (dir / "logits.f32").string()),
            0);
  const auto theirs = read_floats(dir / "logits.f32", ours.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < ours.size(); ++i) worst = std::max(worst, std::abs(double(ours[i]) - theirs[i]));
  EXPECT_LE(worst, 1e-4);
  RecordProperty("max_abs_logit_difference", std::to_string(worst));
  std::printf("resnet18_cifar10: max |logit difference| dtnn vs PyTorch = %.3g\n", worst);

  // And back: the state_dict converted to a checkpoint loads into a fresh model with the same logits.
  ASSERT_EQ(run("/usr/bin/python3 " + src + "/tools/pytorch_to_checkpoint.py " + (dir / "sd.pt").string() + " " +
                (dir / "back.h5").string() + " --model-name resnet18_cifar10"),
            0);
  Sequential back = info.make();
  back.build(info.input, 99);
  restore_checkpoint(io::load_checkpoint(dir / "back.h5"), back, nullptr, dir / "back.h5");
  EXPECT_EQ(back.weights_checksum(), model.weights_checksum());
  fs::remove_all(dir);
}

std::vector<double> read_doubles(const fs::path& file, std::size_t count) {
  std::vector<double> v(count);
  std::ifstream in(file, std::ios::binary);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * sizeof(double)));
  return v;
}

// A transformer language model exported by dtnn gives PyTorch's logits (tools/gpt_reference.py's TransformerLM in
// float64, the checkpoint's entries loaded strictly: the same names and shapes) to 1e-5 of the largest logit:
// gpt_tiny (pre-LN, causal, GELU tanh, tied head) and a post-LN model (BERT's layout: emb_ln, no causal mask, exact
// GELU, untied head). The weights are drawn wide (U(-0.5, 0.5), LayerNorm's around 1) so that every part moves the
// logits. One Python process for both (importing torch takes seconds).
TEST(PytorchInterchangeTest, TransformerLanguageModelsGiveTheSameLogitsInPyTorch) {
  if (!python_has_torch_and_h5py()) DTNN_SKIP_UNLESS_STRICT("/usr/bin/python3 cannot import torch and h5py");
  const fs::path dir = fs::temp_directory_path() / ("dtnn-torch-lm-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  models::TransformerLmOptions post;
  post.vocabulary = 13;
  post.context = 7;
  post.d_model = 12;
  post.num_heads = 3;
  post.layers = 2;
  post.d_ff = 20;
  post.causal = false;
  post.norm_first = false;
  post.activation = "gelu";
  struct Case {
    std::string name;
    Sequential model;
    std::string config;
    std::int64_t seq;
    std::int64_t vocabulary;
    std::vector<float> logits;
  };
  std::vector<Case> cases;
  cases.push_back({"gpt_tiny", models::gpt_tiny(),
                   R"({"vocabulary": 256, "context": 16, "d_model": 32, "num_heads": 2, "layers": 2, "d_ff": 128,
                       "tied": true})",
                   16, 256, {}});
  cases.push_back({"post_ln", models::transformer_lm(post),
                   R"({"vocabulary": 13, "context": 7, "d_model": 12, "num_heads": 3, "layers": 2, "d_ff": 20,
                       "causal": false, "norm_first": false, "activation": "gelu"})",
                   6, 13, {}});
  const std::int64_t n = 3;
  std::string json = "[";
  for (Case& c : cases) {
    c.model.build({c.seq}, 5);
    Rng rng(9);
    for (const NamedParameter& p : c.model.named_parameters()) {
      const bool norm_weight = p.name.find("ln") != std::string::npos && p.name.ends_with("weight");
      init::uniform(p.parameter->value, norm_weight ? 0.5f : -0.5f, norm_weight ? 1.5f : 0.5f, rng);
    }
    std::vector<std::int32_t> ids(static_cast<std::size_t>(n * c.seq));
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 37 + 5) % c.vocabulary);
    std::vector<Tensor> acts;
    c.model.allocate(n, 2, acts, nullptr);
    acts[0].copy_from_values<std::int32_t>(ids);
    c.model.forward(acts, PassContext{0, 0});
    c.logits = acts.back().to_vector();
    const fs::path base = dir / c.name;
    io::save_checkpoint(base.string() + ".h5", capture_checkpoint(c.model, nullptr, CheckpointMeta{c.name}));
    {
      std::ofstream out(base.string() + ".i32", std::ios::binary);
      out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 4));
    }
    json += std::string(json.size() > 1 ? "," : "") + R"({"checkpoint": ")" + base.string() + R"(.h5", "config": )" +
            c.config + R"(, "ids": ")" + base.string() + R"(.i32", "n": )" + std::to_string(n) + R"(, "seq": )" +
            std::to_string(c.seq) + R"(, "output": ")" + base.string() + R"(.f64"})";
  }
  json += "]";
  const std::string src = DTNN_SOURCE_DIR;
  ASSERT_EQ(run("/usr/bin/python3 " + src + "/tests/python/transformer_lm_logits.py '" + json + "'"), 0);
  for (const Case& c : cases) {
    const auto theirs = read_doubles(dir / (c.name + ".f64"), c.logits.size());
    double worst = 0.0, largest = 0.0;
    for (std::size_t i = 0; i < c.logits.size(); ++i) {
      worst = std::max(worst, std::abs(double(c.logits[i]) - theirs[i]));
      largest = std::max(largest, std::abs(theirs[i]));
    }
    EXPECT_GT(largest, 0.5) << c.name;
    EXPECT_LE(worst, 1e-5 * largest) << c.name << ": largest logit " << largest;
    std::printf("%s: max |logit difference| dtnn vs PyTorch (float64) = %.3g, largest |logit| %.3g\n", c.name.c_str(),
                worst, largest);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dtnn
