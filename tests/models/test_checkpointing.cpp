// SPDX-License-Identifier: Apache-2.0
// Exact resume: a run interrupted after a checkpoint and resumed from it ends bitwise where the uninterrupted
// run ends.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>

#include "io/dataset.hpp"
#include "layers/batch_norm.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/dropout.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "models/checkpointing.hpp"
#include "models/optimizers.hpp"
#include "core/errors.hpp"

namespace dtnn {
namespace {

namespace fs = std::filesystem;

Sequential net(int hidden) {
  Sequential m;
  m.add<Conv2d>(Conv2dOptions(2, 4, 3).padding(1).bias(false))
      .add<BatchNorm2d>(BatchNorm2dOptions(4))
      .add<ReLU>()
      .add<MaxPool2d>(MaxPool2dOptions(2))
      .add<Flatten>()
      .add<Dense>(DenseOptions(4 * 4 * 4, hidden))
      .add<Dropout>(DropoutOptions(0.25))
      .add<ReLU>()
      .add<Dense>(DenseOptions(hidden, 3));
  return m;
}

// Interrupts training: an exception before the given step.
class Crash : public Callback {
 public:
  explicit Crash(std::int64_t step) : step_(step) {}
  void on_batch_begin(TrainState& state) override {
    if (state.step == step_) throw std::runtime_error("simulated crash");
  }

 private:
  std::int64_t step_;
};

fs::path temp_dir(const std::string& name) {
  return fs::temp_directory_path() / ("dtnn-ckpt-" + std::to_string(::getpid()) + "-" + name);
}

template <class MakeOptimizer>
void expect_exact_resume(MakeOptimizer make_optimizer, const std::string& label) {
  const io::Dataset data = io::synthetic_dataset(50, 2, 8, 8, 3, 4);
  const auto options = [] { return FitOptions().epochs(3).batch_size(8).tiles(2).seed(6).verbose(false); };

  Sequential uninterrupted = net(12);
  uninterrupted.build({2, 8, 8}, 3);
  auto opt_a = make_optimizer();
  fit(uninterrupted, *opt_a, data, options());

  const fs::path dir = temp_dir(label);
  fs::remove_all(dir);
  auto directory = std::make_shared<io::CheckpointDirectory>(dir, 2);
  {
    Sequential first = net(12);
    first.build({2, 8, 8}, 3);
    auto opt_b = make_optimizer();
    auto saver = std::make_shared<CheckpointCallback>(directory, CheckpointMeta{"net", "{}", 1},
                                                       CheckpointOptions().every_steps(4));
    EXPECT_THROW(fit(first, *opt_b, data, options().callback(saver).callback(std::make_shared<Crash>(10))),
                 std::runtime_error);
  }
  const fs::path latest = io::resolve_checkpoint(dir);
  const io::Checkpoint c = io::load_checkpoint(latest);
  EXPECT_EQ(c.step, 8) << latest;  // saved before step 8 (every 4 steps), crashed before step 10

  Sequential resumed = net(12);
  resumed.build({2, 8, 8}, 99);  // other initial weights: the checkpoint must replace them all
  auto opt_c = make_optimizer();
  restore_checkpoint(c, resumed, opt_c.get(), latest);
  fit(resumed, *opt_c, data, options().initial_step(c.step));
  EXPECT_EQ(resumed.weights_checksum(), uninterrupted.weights_checksum()) << label;
  fs::remove_all(dir);
}

TEST(CheckpointTest, ResumeIsBitwiseExactWithSgdMomentum) {
  expect_exact_resume([] { return std::make_unique<Sgd>(SgdOptions(0.05f).momentum(0.9f)); }, "sgd");
}

TEST(CheckpointTest, ResumeIsBitwiseExactWithAdam) {
  expect_exact_resume([] { return std::make_unique<Adam>(AdamOptions(0.01f)); }, "adam");
}

TEST(CheckpointTest, MismatchesAreAllReportedNamingTheFile) {
  Sequential model = net(12);
  model.build({2, 8, 8}, 0);
  const io::Checkpoint c = capture_checkpoint(model, nullptr, CheckpointMeta{"net"});
  Sequential other = net(16);
  other.add<Dense>(DenseOptions(3, 2));
  other.build({2, 8, 8}, 0);
  try {
    restore_checkpoint(c, other, nullptr, "/some/where.h5");
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("/some/where.h5"), std::string::npos) << m;
    EXPECT_NE(m.find("5.weight"), std::string::npos) << m;  // wrong shape
    EXPECT_NE(m.find("9.weight"), std::string::npos) << m;  // missing
  }
}

TEST(CheckpointTest, OptimizerOfAnotherKindIsRejected) {
  Sequential model = net(12);
  model.build({2, 8, 8}, 0);
  Sgd sgd(SgdOptions(0.1f));
  const io::Checkpoint c = capture_checkpoint(model, &sgd, CheckpointMeta{"net"});
  Adam adam(AdamOptions(0.1f));
  EXPECT_THROW(restore_checkpoint(c, model, &adam, "x.h5"), DataError);
}

// Weights alone (what tools/pytorch_to_checkpoint.py writes): the weights load and the optimizer starts fresh; an
// optimizer's state without its name is still refused.
TEST(CheckpointTest, WeightsWithoutAnOptimizerStartAFreshOne) {
  Sequential model = net(12);
  model.build({2, 8, 8}, 3);
  io::Checkpoint c = capture_checkpoint(model, nullptr, CheckpointMeta{"net"});
  c.optimizer = "{}";
  Sequential other = net(12);
  other.build({2, 8, 8}, 4);
  Adam adam(AdamOptions(0.1f));
  restore_checkpoint(c, other, &adam, "weights.h5");
  EXPECT_EQ(other.weights_checksum(), model.weights_checksum());
  EXPECT_EQ(adam.steps(*other.named_parameters().front().parameter), 0);
  c.optimizer_state.push_back({"0.weight.exp_avg", {1}, {0.0f}});
  EXPECT_THROW(restore_checkpoint(c, other, &adam, "weights.h5"), DataError);
}

}  // namespace
}  // namespace dtnn
