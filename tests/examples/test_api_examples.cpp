// SPDX-License-Identifier: Apache-2.0
// The short API programs of examples/ run as a user runs them and do what they print: each checks itself and exits
// non-zero when a check fails.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "examples/program.hpp"
#include "support/environment.hpp"

namespace {

using dtnn::test::built_program;
using dtnn::test::run_program;

bool have_fashion_mnist() {
  const char* dir = std::getenv("DTNN_FASHION_MNIST_DIR");
  return std::filesystem::exists(dir != nullptr && *dir != '\0' ? dir : "/usr/share/datasets/fashion-mnist");
}

// The test accuracy a program printed ("test accuracy 84.12%"), or -1.
double printed_accuracy(const std::string& output) {
  std::smatch m;
  return std::regex_search(output, m, std::regex("test accuracy ([0-9.]+)%")) ? std::stod(m[1]) : -1.0;
}

// The README's example: a CNN trained one epoch on Fashion-MNIST learns it.
TEST(ApiExampleTest, TrainsACnnOnFashionMnist) {
  if (!have_fashion_mnist()) DTNN_SKIP_UNLESS_STRICT("dataset-fashion-mnist is not installed");
  const auto r = run_program(built_program("api_example"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_GT(printed_accuracy(r.output), 80.0) << r.output;
}

// A layer of one's own: its forward tasks match the formula, its slope-0 case trains dtnn's ReLU's weights bit for
// bit, and a CNN with it learns.
TEST(ApiExampleTest, CustomLayerChecksItselfAndTrains) {
  if (!have_fashion_mnist()) DTNN_SKIP_UNLESS_STRICT("dataset-fashion-mnist is not installed");
  const auto r = run_program(built_program("custom_layer"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("forward: 0 of 640 outputs differ"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("LeakyReLU"), std::string::npos) << r.output;  // the summary names the layer
  EXPECT_GT(printed_accuracy(r.output), 70.0) << r.output;
}

// A scheduling policy of one's own trains the weights every other policy trains.
TEST(ApiExampleTest, CustomPolicyTrainsTheSameWeightsAsLws) {
  const auto r = run_program(built_program("custom_policy"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("biggest-first: weights checksum"), std::string::npos) << r.output;
}

}  // namespace
