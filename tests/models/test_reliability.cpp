// SPDX-License-Identifier: Apache-2.0
// A run that must stop: a stop request at a step boundary (preemption) leaves a checkpoint that resumes bitwise;
// a step whose loss is not finite stops training at that step (NonFiniteLoss), no checkpoint holding non-finite
// values is ever written, and the first layer whose values stop being finite is found.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <limits>

#include "io/checkpoint.hpp"
#include "io/dataset.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "models/checkpointing.hpp"
#include "models/diagnosis.hpp"
#include "models/optimizers.hpp"
#include "models/preemption.hpp"
#include "support/throws_with.hpp"

namespace dtnn {
namespace {

namespace fs = std::filesystem;

Sequential net() {
  Sequential m;
  m.add<Conv2d>(Conv2dOptions(2, 4, 3).padding(1))
      .add<ReLU>()
      .add<MaxPool2d>(MaxPool2dOptions(2))
      .add<Flatten>()
      .add<Dense>(DenseOptions(4 * 4 * 4, 16))
      .add<ReLU>()
      .add<Dense>(DenseOptions(16, 3));
  m.build({2, 8, 8}, 3);
  return m;
}

const io::Dataset& data() {
  static const io::Dataset d = io::synthetic_dataset(96, 2, 8, 8, 3, 4);
  return d;
}

FitOptions options() { return FitOptions().epochs(2).batch_size(8).tiles(2).seed(6).verbose(false); }

fs::path temp_dir(const std::string& name) {
  return fs::temp_directory_path() / ("dtnn-reliability-" + std::to_string(::getpid()) + "-" + name);
}

TEST(StopWhenTest, StopsAtTheStepAskedWithTheWeightsOfThoseStepsAlone) {
  Sequential stopped = net();
  Sgd sgd_a(SgdOptions(0.05f).momentum(0.9f));
  const History h = fit(stopped, sgd_a, data(), options().stop_when([](std::int64_t step) {
    return step >= 5 ? SIGUSR1 : 0;
  }));
  EXPECT_EQ(h.stopped_at_step, 5);
  EXPECT_EQ(h.stop_reason, SIGUSR1);
  EXPECT_TRUE(h.epochs.empty());  // the first epoch did not end
  // Five steps of a run of 5-step epochs: the same batches (the order's first ones), the same weights.
  Sequential five = net();
  Sgd sgd_b(SgdOptions(0.05f).momentum(0.9f));
  const History full = fit(five, sgd_b, data(), options().epochs(1).steps_per_epoch(5));
  EXPECT_EQ(full.stopped_at_step, -1);
  EXPECT_EQ(stopped.weights_checksum(), five.weights_checksum());
}

TEST(StopWhenTest, TheCheckpointOfTheStopResumesBitwise) {
  const fs::path dir = temp_dir("stop");
  fs::remove_all(dir);
  Sequential uninterrupted = net();
  Sgd sgd_a(SgdOptions(0.05f).momentum(0.9f));
  fit(uninterrupted, sgd_a, data(), options());

  Sequential first = net();
  Sgd sgd_b(SgdOptions(0.05f).momentum(0.9f));
  // Only where training stops (each_epoch false): as the program does without --checkpoint-dir.
  auto saver = std::make_shared<CheckpointCallback>(dir, 3, CheckpointMeta{"net", "{}", 1},
                                                    CheckpointOptions().each_epoch(false));
  fit(first, sgd_b, data(), options().callback(saver).stop_when([](std::int64_t step) { return step >= 17 ? 15 : 0; }));
  ASSERT_FALSE(saver->last_saved().empty());
  const io::Checkpoint c = io::load_checkpoint(saver->last_saved());
  EXPECT_EQ(c.step, 17);
  EXPECT_EQ(io::CheckpointDirectory(dir).checkpoints().size(), 1u);

  Sequential resumed = net();
  Sgd sgd_c(SgdOptions(0.05f).momentum(0.9f));
  restore_checkpoint(c, resumed, &sgd_c, saver->last_saved());
  fit(resumed, sgd_c, data(), options().initial_step(c.step));
  EXPECT_EQ(resumed.weights_checksum(), uninterrupted.weights_checksum());
  fs::remove_all(dir);
}

// The data with a NaN in one sample of global step `step`'s batch: that step's loss is NaN, and the weights after it.
io::Dataset poisoned_at(std::int64_t step) {
  io::Dataset d = data();
  const StepRows rows = step_rows(d, options(), step);
  d.images[static_cast<std::size_t>(rows.rows.front() * d.sample_elements() + 5)] = std::nanf("");
  return d;
}

TEST(NonFiniteTest, ALossThatIsNotFiniteStopsAtItsStepAndNoCheckpointHoldsIt) {
  const fs::path dir = temp_dir("nan");
  fs::remove_all(dir);
  Sequential m = net();
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  auto saver = std::make_shared<CheckpointCallback>(std::make_shared<io::CheckpointDirectory>(dir, 50),
                                                    CheckpointMeta{"net", "{}", 1}, CheckpointOptions().every_steps(1));
  std::int64_t step = -1;
  try {
    fit(m, sgd, poisoned_at(7), options().callback(saver));
  } catch (const NonFiniteLoss& e) {
    step = e.step();
    EXPECT_NE(std::string(e.what()).find("the loss of step 7 is nan"), std::string::npos) << e.what();
  }
  EXPECT_EQ(step, 7);
  // Checkpoints every step, each of a step up to the diverged one (whose weights are those before it), all finite.
  const auto all = io::CheckpointDirectory(dir).checkpoints();
  ASSERT_EQ(all.size(), 7u);  // steps 1 to 7
  for (const fs::path& file : all) {
    const io::Checkpoint c = io::load_checkpoint(file);
    EXPECT_LE(c.step, 7) << file;
    EXPECT_NO_THROW(check_finite(c, dir)) << file;
  }
  fs::remove_all(dir);
}

TEST(NonFiniteTest, TheCheckOffTrainsOnAsBefore) {
  Sequential m = net();
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  EXPECT_NO_THROW(fit(m, sgd, poisoned_at(7), options().check_finite(false)));
  EXPECT_TRUE(std::isnan(m.layer(0).parameters()[0]->value.to_vector()[0]));
}

TEST(NonFiniteTest, CheckFiniteNamesTheArray) {
  io::Checkpoint c;
  c.step = 7;
  c.parameters.push_back({"0.weight", {2}, {1.0f, 2.0f}});
  c.optimizer_state.push_back({"0.weight.momentum_buffer", {2}, {0.5f, std::numeric_limits<float>::infinity()}});
  EXPECT_TRUE(test_support::throws_with<NonFiniteState>([&] { check_finite(c, "/somewhere"); },
                                          {"/somewhere", "step 7", "optimizer state '0.weight.momentum_buffer'",
                                           "inf at index 1"}));
  c.optimizer_state.back().data[1] = 0.0f;
  EXPECT_NO_THROW(check_finite(c, "/somewhere"));
}

TEST(NonFiniteTest, FirstNonFiniteNamesTheLayerWhoseOutputIsNotFinite) {
  Sequential m = net();
  const FitOptions o = options();
  const StepRows rows = step_rows(data(), o, 3);
  EXPECT_FALSE(first_nonfinite(m, data(), rows.rows, 3, rows.epoch, o).found());
  // An infinite weight in the first Dense: its output is the first that is not finite.
  m.layer(4).parameters()[0]->value.fill(std::numeric_limits<float>::infinity());
  const NonFiniteSite site = first_nonfinite(m, data(), rows.rows, 3, rows.epoch, o);
  ASSERT_TRUE(site.found());
  EXPECT_EQ(site.layer, m.layer(4).name());
  EXPECT_EQ(site.type, "Dense with its ReLU fused");  // the ReLU after it runs in its tasks
  EXPECT_FALSE(site.gradient);
  EXPECT_TRUE(site.value.find("nan") != std::string::npos || site.value.find("inf") != std::string::npos);
  // A NaN in the data: the first layer's output.
  Sequential fresh = net();
  const io::Dataset bad = poisoned_at(3);
  const NonFiniteSite first = first_nonfinite(fresh, bad, rows.rows, 3, rows.epoch, o);
  ASSERT_TRUE(first.found());
  EXPECT_EQ(first.layer, fresh.layer(0).name());
}

TEST(SignalStopTest, RecordsTheFirstSignalAndPutsTheHandlersBack) {
  struct sigaction mine {};
  mine.sa_handler = [](int) {};
  sigemptyset(&mine.sa_mask);
  struct sigaction before {};
  sigaction(SIGUSR1, &mine, &before);
  {
    const SignalStop stop;
    EXPECT_EQ(stop.received(), 0);
    std::raise(SIGUSR1);
    EXPECT_EQ(stop.received(), SIGUSR1);
    EXPECT_EQ(stop.poll()(123), SIGUSR1);
    EXPECT_THROW(SignalStop(), InvalidArgument);  // one at a time
  }
  struct sigaction now {};
  sigaction(SIGUSR1, nullptr, &now);
  EXPECT_EQ(now.sa_handler, mine.sa_handler);
  sigaction(SIGUSR1, &before, nullptr);
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
}

TEST(SignalStopTest, ASecondSignalEndsTheProcessAtOnce) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const SignalStop stop;
    std::raise(SIGTERM);
    std::raise(SIGTERM);
    _exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
}

}  // namespace
}  // namespace dtnn
