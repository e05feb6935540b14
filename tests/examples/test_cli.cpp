// SPDX-License-Identifier: Apache-2.0
// The dtnn program as a user runs it: reproducibility across schedulers and worker counts (each run is its
// own process, since StarPU starts once per process), reports, traces and bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

struct CliRun {
  int status;
  std::string output;
};

std::string exe() {
  const char* bin = std::getenv("DTNN_BIN");
  return bin != nullptr ? bin : DTNN_BINARY_DIR "/bin/dtnn";
}

CliRun dtnn_with_prefix(const std::string& command) {
  const std::string cmd = "STARPU_SILENT=1 OMPI_MCA_btl_vader_single_copy_mechanism=none " + command + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) out += buf;
  const int rc = pclose(pipe);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

CliRun dtnn(const std::string& args) { return dtnn_with_prefix(exe() + " " + args); }

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("dtnn-cli-" + std::to_string(::getpid()) + "-" + name);
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// 20 steps of simplecnn on synthetic data.
const std::string kShortRun =
    "train --dataset synthetic --synthetic-samples 640 --batch-size 32 --steps-per-epoch 20 --seed 3 --tiles 3 "
    "--quiet --no-test";

TEST(CliTest, WeightsAreBitwiseIdenticalAcrossSchedulersAndWorkerCounts) {
  std::string reference;
  for (const char* sched : {"lws", "dmdas"}) {
    for (int workers : {1, 2}) {
      const fs::path report = temp_path(std::string("det-") + sched + std::to_string(workers) + ".json");
      const CliRun r = dtnn(kShortRun + " --scheduler " + sched + " --workers " + std::to_string(workers) +
                         " --report " + report.string());
      ASSERT_EQ(r.status, 0) << r.output;
      const auto doc = read_json(report);
      fs::remove(report);
      EXPECT_EQ(doc.at("workers"), workers);
      const std::string checksum = doc.at("weights_checksum");
      if (reference.empty()) {
        reference = checksum;
      } else {
        EXPECT_EQ(checksum, reference) << sched << " with " << workers << " workers";
      }
    }
  }
}

TEST(CliTest, ReportHoldsTheSummaryFields) {
  const fs::path report = temp_path("report.json");
  const CliRun r = dtnn("train --dataset synthetic --synthetic-samples 256 --batch-size 64 --epochs 2 --quiet --report " +
                     report.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const auto doc = read_json(report);
  fs::remove(report);
  for (const char* key : {"test_accuracy", "train_seconds", "images_per_second", "peak_rss_mb",
                          "images_per_second_after_first_epoch", "history", "weights_checksum"}) {
    EXPECT_TRUE(doc.contains(key)) << key;
  }
  EXPECT_EQ(doc.at("history").size(), 2u);
  EXPECT_GT(doc.at("images_per_second").get<double>(), 0.0);
  EXPECT_NE(r.output.find("Test accuracy:"), std::string::npos) << r.output;
}

TEST(CliTest, TraceHasTasksOfEveryPassOnEveryWorker) {
  const fs::path trace = temp_path("trace.json");
  const CliRun r = dtnn(kShortRun + " --workers 2 --trace " + trace.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const auto doc = read_json(trace);
  fs::remove(trace);
  std::set<int> workers;
  std::set<std::string> names;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    workers.insert(e.at("tid").get<int>());
    names.insert(e.at("name").get<std::string>());
  }
  EXPECT_EQ(workers.size(), 2u);
  for (const char* name : {"0:fwd", "0:bwd_weights", "3:bwd_data", "9:fwd", "loss:fwd_bwd", "0.weight:tile_sum",
                           "0.weight:update", "data:load"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
}

struct BadInput {
  std::string args;
  int status;
  std::string message;
};

class CliBadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(CliBadInputTest, ExitsWithAMessageNamingTheProblem) {
  const CliRun r = dtnn(GetParam().args);
  EXPECT_EQ(r.status, GetParam().status) << r.output;
  EXPECT_NE(r.output.find(GetParam().message), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CliBadInputTest,
    ::testing::Values(BadInput{"train --bogus", 2, "--bogus"},
                      BadInput{"train --batch-size 0", 2, "--batch-size"},
                      BadInput{"train --epochs abc", 2, "--epochs"},
                      BadInput{"train --dataset cifar99", 2, "--dataset"},
                      BadInput{"train --model resnet9000 --dataset synthetic", 2,
                               "--model: unknown model 'resnet9000', expected one of simplecnn"},
                      BadInput{"train --scheduler fastest --dataset synthetic", 2, "unknown scheduler 'fastest'"},
                      BadInput{"train --dataset mnist", 2, "--data-dir: required for --dataset mnist"},
                      BadInput{"train --dataset mnist --data-dir /nonexistent-dtnn", 1, "/nonexistent-dtnn"},
                      BadInput{"", 2, "subcommand"}));

CliRun mpirun(const std::string& args) {
  return dtnn_with_prefix("mpirun --oversubscribe --allow-run-as-root " + args);
}

const std::string kMpiRun =
    "train --dataset synthetic --synthetic-samples 640 --batch-size 16 --steps-per-epoch 20 --workers 1 --quiet";

TEST(CliMpiTest, TwoRanksAgreeOnTheWeights) {
  const fs::path report = temp_path("mpi-report.json");
  const CliRun r = mpirun("-np 2 " + exe() + " " + kMpiRun + " --report " + report.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const auto doc = read_json(report);
  fs::remove(report);
  EXPECT_EQ(doc.at("ranks"), 2);
  ASSERT_EQ(doc.at("weights_checksums").size(), 2u);
  EXPECT_EQ(doc.at("weights_checksums")[0], doc.at("weights_checksums")[1]);
}

TEST(CliMpiTest, ModelThatDiffersOnOneRankIsAClearErrorOnBoth) {
  const CliRun r = mpirun("-np 1 " + exe() + " " + kMpiRun + " : -np 1 " + exe() + " " + kMpiRun +
                          " --model simplemlp");
  EXPECT_NE(r.status, 0) << r.output;
  const std::string message = "rank 1 (hash";
  const auto first = r.output.find(message);
  ASSERT_NE(first, std::string::npos) << r.output;
  EXPECT_NE(r.output.find(message, first + 1), std::string::npos) << "expected the error on both ranks\n" << r.output;
}

TEST(CliMpiTest, KilledRankEndsTheJobWithAnError) {
  const auto start = std::chrono::steady_clock::now();
  const CliRun r = mpirun("-np 2 " + exe() + " " + kMpiRun + " --mpi-timeout 20 --fail-rank 1 --fail-step 5");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

TEST(CliMpiTest, HungRankMakesTheOtherAbortAfterTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  const CliRun r = mpirun("-np 2 " + exe() + " " + kMpiRun + " --mpi-timeout 3 --fail-rank 1 --fail-step 5 "
                          "--fail-mode hang");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("rank 0: gradient allreduce of"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("did not complete within 3 s (--mpi-timeout): rank 1 died or hangs"), std::string::npos)
      << r.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

TEST(CliTest, ModelsAndSummaryList) {
  const CliRun models = dtnn("models");
  EXPECT_EQ(models.status, 0);
  EXPECT_NE(models.output.find("simplecnn"), std::string::npos);
  const CliRun summary = dtnn("summary simplecnn");
  EXPECT_EQ(summary.status, 0) << summary.output;
  EXPECT_NE(summary.output.find("Total parameters: 421,642"), std::string::npos) << summary.output;
}

}  // namespace
