// SPDX-License-Identifier: Apache-2.0
// Data parallel over a network: two ranks, each in a network namespace of its own, over Open MPI's TCP transport
// on links shaped to a low bandwidth (scripts/netns_cluster.sh), as across nodes. They train the weights of the same
// two ranks through shared memory, bit for bit; a link that goes down ends the job within the time-out with an error
// naming the unreachable rank, and a link that comes back before it lets training go on with the same weights.
// Needs root and iproute2 (namespaces, veth links, tc); skipped with the reason elsewhere.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "examples/program.hpp"
#include "support/environment.hpp"

namespace {

namespace fs = std::filesystem;
using dtnn::test::ProgramRun;
using dtnn::test::run_program;

std::string exe() { return dtnn::test::built_program("dtnn"); }

std::string cluster() { return "bash " + (fs::path(DTNN_SOURCE_DIR) / "scripts" / "netns_cluster.sh").string(); }

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("dtnn-network-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string weights_checksum(const fs::path& report) {
  std::ifstream in(report);
  return nlohmann::json::parse(in).at("weights_checksum").get<std::string>();
}

// Why namespaces cannot be made here, or empty where they can. Only root in a place that allows namespaces can;
// a missing iproute2 is the set-up's fault (scripts/setup.sh installs it), checked by SKIP_WITHOUT_NAMESPACES.
std::string why_no_namespaces() {
  if (::geteuid() != 0) return "not root: network namespaces, veth links and tc need root";
  const std::string probe = "dtnn-probe-" + std::to_string(::getpid());
  if (std::system(("ip netns add " + probe + " 2> /dev/null").c_str()) != 0) {
    return "`ip netns add` fails here (a container without CAP_SYS_ADMIN?)";
  }
  std::system(("ip netns delete " + probe).c_str());
  return "";
}

std::set<std::string> cluster_namespaces() {
  std::set<std::string> names;
  FILE* list = ::popen("ip netns list 2> /dev/null", "r");
  char line[256];
  while (list != nullptr && std::fgets(line, sizeof line, list) != nullptr) {
    std::istringstream words(line);
    std::string name;
    words >> name;
    if (name.rfind("dtnn-cluster-", 0) == 0) names.insert(name);
  }
  if (list != nullptr) ::pclose(list);
  return names;
}

#define SKIP_WITHOUT_NAMESPACES()                                                                   \
  do {                                                                                              \
    if (std::system("command -v ip > /dev/null && command -v tc > /dev/null") != 0) {               \
      DTNN_SKIP_UNLESS_STRICT("iproute2 (ip, tc) is not installed");                                \
    }                                                                                               \
    const std::string why = why_no_namespaces();                                                    \
    if (!why.empty()) GTEST_SKIP() << "no emulated cluster: " << why;                               \
  } while (false)

// simplecnn on synthetic data, one worker a rank.
const std::string kRun =
    "train --dataset synthetic --synthetic-samples 1280 --batch-size 16 --epochs 1 --workers 1 --quiet --no-test";

TEST(CliMpiTest, TwoRanksOverATcpNetworkTrainTheWeightsOfSharedMemory) {
  SKIP_WITHOUT_NAMESPACES();
  const fs::path dir = scratch("bitwise");
  const std::set<std::string> before = cluster_namespaces();
  const ProgramRun network = run_program(cluster() + " --ranks 2 --gbps 0.2 -- " + exe() + " " + kRun +
                                         " --steps-per-epoch 20 --report " + (dir / "network.json").string());
  ASSERT_EQ(network.status, 0) << network.output;
  EXPECT_NE(network.output.find("links of 0.2 Gb/s each way"), std::string::npos) << network.output;
  EXPECT_NE(network.output.find("over Open MPI's TCP transport"), std::string::npos) << network.output;
  EXPECT_EQ(cluster_namespaces(), before) << "the script left namespaces behind";
  const ProgramRun shared = run_program("mpirun --oversubscribe --allow-run-as-root -np 2 " + exe() + " " + kRun +
                                        " --steps-per-epoch 20 --report " + (dir / "shared.json").string());
  ASSERT_EQ(shared.status, 0) << shared.output;
  EXPECT_EQ(weights_checksum(dir / "network.json"), weights_checksum(dir / "shared.json"));
  fs::remove_all(dir);
}

// Runs `command` in the background, waits for `checkpoint` to appear, then takes the link of the new cluster's
// rank 1 down (both ends) and, where `down_for` is positive, brings it up again after that long.
ProgramRun cut_link_once_saved(const std::string& command, const fs::path& checkpoint, std::chrono::seconds down_for) {
  const std::set<std::string> before = cluster_namespaces();
  std::future<ProgramRun> run = std::async(std::launch::async, [&] { return run_program(command); });
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(checkpoint) && std::chrono::steady_clock::now() < give_up &&
         run.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
  }
  std::string host, port;
  for (const std::string& name : cluster_namespaces()) {
    if (before.count(name) != 0) continue;
    if (name.size() > 2 && name.compare(name.size() - 2, 2, "-2") == 0) host = name;
    if (name.size() > 7 && name.compare(name.size() - 7, 7, "-switch") == 0) port = name;
  }
  if (!host.empty() && !port.empty()) {
    std::system(("ip -n " + host + " link set eth0 down; ip -n " + port + " link set p2 down").c_str());
    if (down_for.count() > 0) {
      std::this_thread::sleep_for(down_for);
      std::system(("ip -n " + port + " link set p2 up; ip -n " + host + " link set eth0 up").c_str());
    }
  }
  ProgramRun done = run.get();
  if (host.empty() || port.empty()) done.output += "\n[test: no cluster namespaces found to cut a link in]";
  return done;
}

TEST(CliMpiTest, LinkDownEndsEveryRankWithinTheTimeoutAndTheLastCheckpointLoads) {
  SKIP_WITHOUT_NAMESPACES();
  const fs::path dir = scratch("cut");
  const fs::path first = dir / "ck" / "ckpt-epoch0000-step000010.h5";
  const ProgramRun r = cut_link_once_saved(cluster() + " --ranks 2 --gbps 0.2 -- " + exe() + " " + kRun +
                                               " --steps-per-epoch 100000 --mpi-timeout 4 --checkpoint-steps 10 "
                                               "--checkpoint-dir " + (dir / "ck").string(),
                                           first, std::chrono::seconds(0));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("did not complete within 4 s (--mpi-timeout): rank 1 died, hangs or is unreachable"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("did not complete within 4 s (--mpi-timeout): rank 0 died, hangs or is unreachable"),
            std::string::npos)
      << r.output;
  const ProgramRun loads = run_program(exe() + " evaluate --dataset synthetic --synthetic-samples 64 --checkpoint " +
                                       (dir / "ck").string());
  EXPECT_EQ(loads.status, 0) << loads.output;
  fs::remove_all(dir);
}

TEST(CliMpiTest, LinkBackBeforeTheTimeoutLetsTrainingGoOnWithTheSameWeights) {
  SKIP_WITHOUT_NAMESPACES();
  const fs::path dir = scratch("flap");
  const std::string run = exe() + " " + kRun + " --steps-per-epoch 40 --mpi-timeout 60 --checkpoint-steps 10 ";
  const ProgramRun flapped = cut_link_once_saved(
      cluster() + " --ranks 2 --gbps 0.2 -- " + run + "--checkpoint-dir " + (dir / "ck").string() + " --report " +
          (dir / "flapped.json").string(),
      dir / "ck" / "ckpt-epoch0000-step000010.h5", std::chrono::seconds(2));
  ASSERT_EQ(flapped.status, 0) << flapped.output;
  ASSERT_EQ(flapped.output.find("[test: no cluster namespaces"), std::string::npos) << flapped.output;
  const ProgramRun steady = run_program(cluster() + " --ranks 2 --gbps 0.2 -- " + run + "--checkpoint-dir " +
                                        (dir / "ck2").string() + " --report " + (dir / "steady.json").string());
  ASSERT_EQ(steady.status, 0) << steady.output;
  EXPECT_EQ(weights_checksum(dir / "flapped.json"), weights_checksum(dir / "steady.json"));
  fs::remove_all(dir);
}

}  // namespace
