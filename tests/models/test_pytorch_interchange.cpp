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
#include "models/checkpointing.hpp"
#include "models/optimizers.hpp"
#include "models/zoo.hpp"
#include "support/environment.hpp"

namespace dtnn {
namespace {

namespace fs = std::filesystem;

int python_has_torch_and_h5py() {
  return std::system("/usr/bin/python3 -c 'import torch, h5py' > /dev/null 2>&1") == 0;
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

}  // namespace
}  // namespace dtnn
