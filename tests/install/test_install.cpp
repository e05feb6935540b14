// SPDX-License-Identifier: Apache-2.0
// dtnn as a library that a program installs and links (docs/library.md): `cmake --install` of this build into a
// scratch prefix, then the installed program runs without LD_LIBRARY_PATH, and a program of one's own
// (examples/project) builds against the prefix with find_package(dtnn) and with pkg-config, and runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "examples/program.hpp"

namespace {

namespace fs = std::filesystem;

using dtnn::test::ProgramRun;
using dtnn::test::run_program;

// A fixed folder of the build tree, emptied first: the compiler cache recognises the same compilations run after run.
const fs::path kScratch = fs::path(DTNN_BINARY_DIR) / "install-test";
const fs::path kPrefix = kScratch / "prefix";
const fs::path kProject = fs::path(DTNN_SOURCE_DIR) / "examples" / "project";

std::string quoted(const fs::path& p) {
  std::string q = "'";  // appended in steps: "'" + string + "'" trips GCC 12's -Wrestrict
  q += p.string();
  q += '\'';
  return q;
}

// The C++ compiler of this build, behind its launcher (ccache) when it has one.
std::string compiler() {
  const std::string launcher = DTNN_CXX_COMPILER_LAUNCHER;
  return (launcher.empty() ? "" : launcher + " ") + DTNN_CXX_COMPILER;
}

std::string pkg_config(const std::string& args) {
  return "$(PKG_CONFIG_PATH=" + quoted(kPrefix / DTNN_INSTALL_LIBDIR / "pkgconfig") + " " DTNN_PKG_CONFIG " " +
         args + ")";
}

class InstallTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::error_code ignored;
    fs::remove_all(kScratch, ignored);
    fs::create_directories(kScratch);
    install_ = run_program(std::string(DTNN_CMAKE) + " --install " + quoted(DTNN_BINARY_DIR) + " --prefix " +
                           quoted(kPrefix));
  }

  void SetUp() override { ASSERT_EQ(install_.status, 0) << install_.output; }

  static ProgramRun install_;
};

ProgramRun InstallTest::install_;

TEST_F(InstallTest, InstallsTheProgramTheLibraryThePublicHeadersAndThePackageFiles) {
  const fs::path lib = kPrefix / DTNN_INSTALL_LIBDIR;
  for (const fs::path& p : {kPrefix / "bin" / "dtnn", lib / "libdtnn.so", lib / "cmake" / "dtnn" / "dtnnConfig.cmake",
                            lib / "pkgconfig" / "dtnn.pc", kPrefix / "include" / "dtnn" / "dtnn.hpp",
                            kPrefix / "include" / "dtnn" / "task_graph.hpp",
                            kPrefix / "include" / "dtnn" / "distributed.hpp",
                            kPrefix / "include" / "dtnn" / "layers" / "conv2d.hpp",
                            kPrefix / "include" / "dtnn" / "runtime" / "sched.hpp"}) {
    EXPECT_TRUE(fs::exists(p)) << p;
  }
  // Headers that no public one includes stay in the source tree: the program's, the kernels', the tests'.
  for (const fs::path& p : {kPrefix / "include" / "dtnn" / "app", kPrefix / "include" / "dtnn" / "tests",
                            kPrefix / "include" / "dtnn" / "codelets" / "cpu" / "convgemm.hpp",
                            kPrefix / "include" / "dtnn" / "codelets" / "conv2d.hpp"}) {
    EXPECT_FALSE(fs::exists(p)) << p;
  }
}

TEST_F(InstallTest, InstalledProgramFindsItsLibrariesWithoutLibraryPath) {
  const ProgramRun r = run_program("env -u LD_LIBRARY_PATH " + quoted(kPrefix / "bin" / "dtnn") + " models");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resnet18_cifar10"), std::string::npos) << r.output;
}

// examples/project prints its test accuracy, and exits 1 when the model did not learn.
void expect_trained(const ProgramRun& r) {
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("images of squares: test accuracy"), std::string::npos) << r.output;
}

TEST_F(InstallTest, ProgramBuildsWithFindPackageAndRuns) {
  const fs::path build = kScratch / "project-cmake";
  const ProgramRun configure = run_program(
      std::string(DTNN_CMAKE) + " -S " + quoted(kProject) + " -B " + quoted(build) + " -DCMAKE_PREFIX_PATH=" +
      quoted(kPrefix) + " -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=" DTNN_CXX_COMPILER +
      " -DCMAKE_CXX_COMPILER_LAUNCHER='" DTNN_CXX_COMPILER_LAUNCHER "'");
  ASSERT_EQ(configure.status, 0) << configure.output;
  const ProgramRun make = run_program(std::string(DTNN_CMAKE) + " --build " + quoted(build));
  ASSERT_EQ(make.status, 0) << make.output;
  expect_trained(run_program("env -u LD_LIBRARY_PATH " + quoted(build / "train_synthetic")));
}

TEST_F(InstallTest, ProgramBuildsWithPkgConfigAndRuns) {
  const fs::path exe = kScratch / "train_synthetic_pkg_config";
  const ProgramRun make = run_program(compiler() + " -std=c++20 -O2 " + quoted(kProject / "train_synthetic.cpp") +
                                      " -o " + quoted(exe) + " " + pkg_config("--cflags --libs dtnn") +
                                      " -Wl,-rpath," + pkg_config("--variable=libdir dtnn"));
  ASSERT_EQ(make.status, 0) << make.output;
  expect_trained(run_program("env -u LD_LIBRARY_PATH " + quoted(exe)));
}

// <dtnn/dtnn.hpp> with dtnn's own include folders alone (no StarPU, no MPI), <dtnn/task_graph.hpp> with dtnn.pc's
// flags (StarPU's), <dtnn/distributed.hpp> with MPI's on top.
TEST_F(InstallTest, PublicHeadersCompileWithWhatTheyPromise) {
  const fs::path include = kPrefix / "include";
  const std::string check = compiler() + " -std=c++20 -fsyntax-only -x c++ ";
  const ProgramRun umbrella = run_program("echo '#include <dtnn/dtnn.hpp>' | " + check + "-I" + quoted(include) +
                                          " -I" + quoted(include / "dtnn") + " -");
  EXPECT_EQ(umbrella.status, 0) << umbrella.output;
  const ProgramRun task_graph =
      run_program("echo '#include <dtnn/task_graph.hpp>' | " + check + pkg_config("--cflags dtnn") + " -");
  EXPECT_EQ(task_graph.status, 0) << task_graph.output;
  const ProgramRun distributed = run_program("echo '#include <dtnn/distributed.hpp>' | " + check +
                                             pkg_config("--cflags dtnn") + " " DTNN_MPI_CFLAGS " -");
  EXPECT_EQ(distributed.status, 0) << distributed.output;
}

}  // namespace
