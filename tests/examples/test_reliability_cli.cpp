// SPDX-License-Identifier: Apache-2.0
// dtnn train on a cluster's bad days: a preemption signal (SIGTERM from a batch scheduler, to any rank) ends the run
// at a step boundary with a checkpoint that resumes bitwise, a second signal ends it at once; a full disk stops it
// with the file and the reason, the previous checkpoint intact; a loss that is not finite stops it at that step
// naming the layer, or skips that step's update exactly.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "examples/program.hpp"
#include "support/environment.hpp"

namespace {

namespace fs = std::filesystem;
using dtnn::test::ProgramRun;

std::string dtnn_bin() { return dtnn::test::built_program("dtnn"); }

// A new empty folder of this test's.
fs::path scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("dtnn-reliability-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::string checksum(const fs::path& report) {
  std::ifstream in(report);
  return nlohmann::json::parse(in).at("weights_checksum");
}

// Epochs of steps of simplecnn on synthetic data (2 of 15 by default).
std::string training(int epochs = 2, int steps = 15) {
  return "train --model simplecnn --dataset synthetic --synthetic-samples 2048 --batch-size 32 --epochs " +
         std::to_string(epochs) + " --steps-per-epoch " + std::to_string(steps) + " --seed 4 --quiet --no-test";
}
const std::string kRun = training();

ProgramRun dtnn(const std::string& args) { return dtnn::test::run_program(dtnn_bin() + " " + args); }

TEST(PreemptionTest, ASignalStopsAtAStepBoundaryAndTheResumeEndsBitwiseWhereTheRunWould) {
  const fs::path dir = scratch("preempt");
  const ProgramRun whole = dtnn(kRun + " --report " + (dir / "whole.json").string());
  ASSERT_EQ(whole.status, 0) << whole.output;
  // SIGTERM raised in the process before step 13: step 13 was submitted already, the run stops before step 14.
  const ProgramRun stopped = dtnn(kRun + " --checkpoint-dir " + (dir / "ck").string() +
                                  " --fail-rank 0 --fail-step 13 --fail-mode sigterm");
  EXPECT_EQ(stopped.status, 128 + 15) << stopped.output;
  EXPECT_NE(stopped.output.find("SIGTERM at step 14: training stopped, checkpoint " + (dir / "ck").string() +
                                "/ckpt-epoch0000-step000014.h5; continue with --resume"),
            std::string::npos)
      << stopped.output;
  const ProgramRun resumed = dtnn(kRun + " --checkpoint-dir " + (dir / "ck").string() + " --resume " +
                                  (dir / "ck").string() + " --report " + (dir / "resumed.json").string());
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(checksum(dir / "resumed.json"), checksum(dir / "whole.json"));
  fs::remove_all(dir);
}

TEST(PreemptionTest, OneRanksSignalStopsEveryRankAtTheSameStep) {
  const fs::path dir = scratch("preempt-mpi");
  const std::string mpirun = "mpirun --oversubscribe --allow-run-as-root -np 2 " + dtnn_bin() + " ";
  const std::string run = kRun + " --workers 1";
  const ProgramRun whole = dtnn::test::run_program(mpirun + run + " --report " + (dir / "whole.json").string());
  ASSERT_EQ(whole.status, 0) << whole.output;
  const ProgramRun stopped = dtnn::test::run_program(mpirun + run + " --checkpoint-dir " + (dir / "ck").string() +
                                                     " --fail-rank 1 --fail-step 9 --fail-mode sigterm");
  EXPECT_NE(stopped.status, 0) << stopped.output;
  EXPECT_NE(stopped.output.find("SIGTERM at step 10: training stopped, checkpoint"), std::string::npos)
      << stopped.output;
  ASSERT_TRUE(fs::exists(dir / "ck" / "ckpt-epoch0000-step000010.h5")) << stopped.output;
  const ProgramRun resumed = dtnn::test::run_program(mpirun + run + " --checkpoint-dir " + (dir / "ck").string() +
                                                     " --resume " + (dir / "ck").string() + " --report " +
                                                     (dir / "resumed.json").string());
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(checksum(dir / "resumed.json"), checksum(dir / "whole.json"));
  fs::remove_all(dir);
}

TEST(PreemptionTest, ASecondSignalExitsAtOnceLeavingTheCheckpointsWhole) {
  const fs::path dir = scratch("twice");
  const ProgramRun r = dtnn(kRun + " --checkpoint-dir " + dir.string() +
                            " --checkpoint-steps 5 --fail-rank 0 --fail-step 13 --fail-mode sigterm-twice");
  EXPECT_EQ(r.status, 128 + 15) << r.output;
  EXPECT_EQ(r.output.find("training stopped"), std::string::npos) << r.output;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    EXPECT_FALSE(name.ends_with(".tmp")) << name;
  }
  const ProgramRun loads = dtnn("evaluate --dataset synthetic --test-samples 64 --checkpoint " + dir.string());
  EXPECT_EQ(loads.status, 0) << loads.output;
  EXPECT_NE(loads.output.find("step 10"), std::string::npos) << loads.output;
  fs::remove_all(dir);
}

// A signal from outside, to a process whose workers run tasks on other threads, as a scheduler sends it.
TEST(PreemptionTest, ASigtermFromOutsideIsAPreemption) {
  const fs::path dir = scratch("outside");
  // A run far longer than the test; the signal comes once its first checkpoint exists (at most 600 polls apart).
  const std::string script =
      dtnn_bin() + " train --model simplecnn --dataset synthetic --batch-size 32 --epochs 1 --steps-per-epoch "
      "100000 --quiet --no-test --checkpoint-steps 3 --checkpoint-dir " + (dir / "ck").string() +
      " > " + (dir / "out.txt").string() + " 2>&1 & pid=$!; n=0; "
      "while [ ! -e " + (dir / "ck" / "ckpt-epoch0000-step000003.h5").string() +
      " ] && [ $n -lt 600 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; n=$((n+1)); done; kill -TERM $pid; wait $pid; "
      "echo status=$?; cat " + (dir / "out.txt").string();
  const ProgramRun r = dtnn::test::run_program("bash -c '" + script + "'");
  EXPECT_NE(r.output.find("status=143"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("SIGTERM at step "), std::string::npos) << r.output;
  const ProgramRun loads = dtnn("evaluate --dataset synthetic --test-samples 64 --checkpoint " + (dir / "ck").string());
  EXPECT_EQ(loads.status, 0) << loads.output;
  fs::remove_all(dir);
}

// A file system of 5 MiB (tmpfs, made and removed here): one checkpoint of simplecnn (3.4 MB) fits, two do not.
class FullDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch("small-fs");
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=5m") != 0) {
      fs::remove_all(dir_);
      GTEST_SKIP() << "cannot mount a small tmpfs here (" << std::strerror(errno) << "; needs root)";
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) ::umount(dir_.c_str());
    fs::remove_all(dir_);
  }
  fs::path dir_;
  bool mounted_ = false;
};

TEST_F(FullDiskTest, ACheckpointThatCannotBeWrittenStopsTrainingNamingItAndKeepsThePreviousOne) {
  const std::string run = training(3, 5) + " --checkpoint-dir " + (dir_ / "ck").string();
  const ProgramRun r = dtnn(run);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find((dir_ / "ck" / "ckpt-epoch0002-step000010.h5").string() + ": cannot be written"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
  const ProgramRun loads =
      dtnn("evaluate --dataset synthetic --test-samples 64 --checkpoint " + (dir_ / "ck").string());
  EXPECT_EQ(loads.status, 0) << loads.output;
  EXPECT_NE(loads.output.find("ckpt-epoch0001-step000005.h5 (step 5)"), std::string::npos) << loads.output;
  // warn: the run goes on, each failure said.
  fs::remove_all(dir_ / "ck");
  const ProgramRun warned = dtnn(run + " --on-checkpoint-error warn");
  EXPECT_EQ(warned.status, 0) << warned.output;
  EXPECT_NE(warned.output.find("dtnn: warning: " + (dir_ / "ck" / "ckpt-epoch0003-step000015.h5").string() +
                               ": cannot be written"),
            std::string::npos)
      << warned.output;
}

TEST_F(FullDiskTest, AReportThatCannotBeWrittenNamesItsFile) {
  std::ofstream(dir_ / "filler", std::ios::binary) << std::string(5 << 20, 'x');
  const ProgramRun r = dtnn(kRun + " --report " + (dir_ / "report.json").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find((dir_ / "report.json").string() + ": the report cannot be written"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "report.json.tmp"));
}

TEST(NonFiniteCliTest, ADivergedRunStopsAtItsStepNamingTheLayerAndKeepsItsGoodCheckpoints) {
  const fs::path dir = scratch("diverged");
  const ProgramRun r = dtnn(kRun + " --lr 50 --checkpoint-steps 2 --checkpoint-dir " + dir.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("dtnn: error: fit: the loss of step "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" replayed from "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(": layer "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("holds"), std::string::npos) << r.output;
  const ProgramRun loads = dtnn("evaluate --dataset synthetic --test-samples 64 --checkpoint " + dir.string());
  EXPECT_EQ(loads.status, 0) << loads.output;
  fs::remove_all(dir);
}

bool have_h5py() { return std::system("/usr/bin/python3 -c 'import h5py' > /dev/null 2>&1") == 0; }

// skip-step: the run whose step 8 is NaN (a NaN learning rate at step 7 poisoned its weights) ends with the weights
// of the clean run continued from step 9 with its state before step 8: a clean run's checkpoint of step 8 relabelled
// as step 9 and resumed.
TEST(NonFiniteCliTest, SkipStepEndsWithTheWeightsOfTheRunWithoutThatStepsUpdate) {
  if (!have_h5py()) {
    DTNN_SKIP_UNLESS_STRICT("/usr/bin/python3 cannot import h5py (to relabel the reference's checkpoint)");
  }
  const fs::path dir = scratch("skip");
  const ProgramRun skipped = dtnn(kRun + " --checkpoint-dir " + (dir / "ck").string() +
                                  " --checkpoint-steps 5 --on-nan skip-step --fail-rank 0 --fail-step 7 "
                                  "--fail-mode nan --report " + (dir / "skipped.json").string());
  ASSERT_EQ(skipped.status, 0) << skipped.output;
  EXPECT_NE(skipped.output.find("step 8 skipped (--on-nan skip-step)"), std::string::npos) << skipped.output;
  const ProgramRun clean =
      dtnn(kRun + " --checkpoint-dir " + (dir / "ref").string() + " --checkpoint-steps 8 --keep 10");
  ASSERT_EQ(clean.status, 0) << clean.output;
  const fs::path eight = dir / "ref" / "ckpt-epoch0000-step000008.h5";
  ASSERT_EQ(std::system(("/usr/bin/python3 -c \"import h5py; f = h5py.File('" + eight.string() +
                         "', 'r+'); f.attrs.modify('step', f.attrs['step'].__class__(9)); f.close()\"")
                            .c_str()),
            0);
  const ProgramRun reference = dtnn(kRun + " --resume " + eight.string() + " --report " + (dir / "ref.json").string());
  ASSERT_EQ(reference.status, 0) << reference.output;
  EXPECT_EQ(checksum(dir / "skipped.json"), checksum(dir / "ref.json"));
  fs::remove_all(dir);
}

}  // namespace
