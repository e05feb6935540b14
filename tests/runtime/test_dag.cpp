// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "runtime/codelet.hpp"
#include "runtime/dag.hpp"
#include "runtime/engine.hpp"
#include "runtime/sched.hpp"
#include "runtime/tensor.hpp"

namespace dtnn::runtime {
namespace {

// A task of known duration: each buffer's values are incremented for about `spin_us`.
struct SpinArgs {
  double spin_us;
};
void spin_cpu(void** buffers, void* cl_arg) {
  const double until = starpu_timing_now() + task_args<SpinArgs>(cl_arg).spin_us;
  float* x = vector_ptr(buffers[0]);
  while (starpu_timing_now() < until) x[0] += 1.0f;
}
Codelet& spin_rw_r() {
  static Codelet cl("test_spin_rw_r", spin_cpu, {STARPU_RW, STARPU_R});
  return cl;
}
Codelet& spin_w_r() {
  static Codelet cl("test_spin_w_r", spin_cpu, {STARPU_W, STARPU_R});
  return cl;
}

Dag hand_made(const std::vector<double>& durations, const std::vector<DagEdge>& edges) {
  Dag g;
  for (std::size_t i = 0; i < durations.size(); ++i) {
    DagTask t;
    t.id = static_cast<std::int64_t>(i);
    t.name = fmt::format("t{}:fwd", i);
    t.worker = 0;
    t.start_us = 100.0 * static_cast<double>(i);
    t.end_us = t.start_us + durations[i];
    g.tasks.push_back(t);
  }
  g.edges = edges;
  return g;
}

TEST(DagTest, BoundsOfAHandMadeGraph) {
  // 0 -> 1 -> 3, 0 -> 2 -> 3 and a lone 4: chains 0-1-3 = 2+5+1 = 8, 0-2-3 = 2+3+1 = 6, 4 = 4.
  const Dag g = hand_made({2, 5, 3, 1, 4}, {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  const std::vector<double> rank = g.upward_ranks();
  EXPECT_EQ(rank, (std::vector<double>{8, 6, 4, 1, 4}));
  const DagBounds one = g.bounds(1);
  EXPECT_DOUBLE_EQ(one.critical_path_us, 8.0);
  EXPECT_DOUBLE_EQ(one.work_us, 15.0);
  EXPECT_DOUBLE_EQ(one.lower_bound_us(), 15.0);  // one worker: all the work
  const DagBounds three = g.bounds(3);
  EXPECT_DOUBLE_EQ(three.work_per_worker_us(), 5.0);
  EXPECT_DOUBLE_EQ(three.lower_bound_us(), 8.0);  // three workers: the critical path
  // The recorded times: first start 0, last end 400 + 4.
  EXPECT_DOUBLE_EQ(three.span_us, 404.0);
  EXPECT_DOUBLE_EQ(three.efficiency(), 8.0 / 404.0);
}

TEST(DagTest, RejectsEdgesAgainstSubmissionOrder) {
  EXPECT_THROW((void)hand_made({1, 1}, {{1, 0}}).upward_ranks(), InvalidArgument);
  EXPECT_THROW((void)hand_made({1, 1}, {{0, 2}}).bounds(1), InvalidArgument);
  EXPECT_THROW((void)hand_made({1}, {}).bounds(0), InvalidArgument);
}

TEST(DagRecorderTest, EdgesFollowTheOrderOfDataAccesses) {
  Tensor x({1, 4}), y({1, 4}), z({1, 4});
  DagRecorder recorder;
  recorder.start();
  const SpinArgs a{200.0};
  submit_task(spin_w_r(), {"a:fwd", 0}, {{x.tile(0), STARPU_W}, {z.tile(0), STARPU_R}}, a);   // 0 writes x
  submit_task(spin_rw_r(), {"b:fwd", 0}, {{y.tile(0), STARPU_RW}, {x.tile(0), STARPU_R}}, a);  // 1 reads x
  submit_task(spin_rw_r(), {"c:fwd", 1}, {{z.tile(0), STARPU_RW}, {x.tile(0), STARPU_R}}, a);  // 2 reads x
  submit_task(spin_rw_r(), {"d:bwd_data", 0}, {{x.tile(0), STARPU_RW}, {y.tile(0), STARPU_R}}, a);  // 3 writes x
  recorder.stop();
  submit_task(spin_rw_r(), {"after:fwd", 0}, {{x.tile(0), STARPU_RW}, {y.tile(0), STARPU_R}}, a);  // not recorded
  Engine::current()->wait_all();
  const Dag g = recorder.graph();
  ASSERT_EQ(g.tasks.size(), 4u);
  std::set<std::pair<std::int64_t, std::int64_t>> edges;
  for (const DagEdge& e : g.edges) edges.insert({e.from, e.to});
  // c wrote z after a read it (0 -> 2 once more); d reads y after b wrote it, writes x after b and c read it.
  EXPECT_EQ(edges, (std::set<std::pair<std::int64_t, std::int64_t>>{{0, 1}, {0, 2}, {1, 3}, {2, 3}}));
  EXPECT_EQ(g.tasks[2].tile, 1);
  EXPECT_EQ(g.tasks[3].layer(), "d");
  EXPECT_EQ(g.tasks[3].pass(), "bwd_data");
  EXPECT_EQ(g.tasks[0].codelet, "test_spin_w_r");
  std::vector<double> d;  // the recorded durations
  for (const DagTask& t : g.tasks) {
    EXPECT_GE(t.worker, 0) << t.name;
    EXPECT_GT(t.duration_us(), 0.0) << t.name;
    d.push_back(t.duration_us());
  }
  // Dependencies held: every task starts after its predecessors end.
  for (const DagEdge& e : g.edges) {
    EXPECT_GE(g.tasks[static_cast<std::size_t>(e.to)].start_us, g.tasks[static_cast<std::size_t>(e.from)].end_us);
  }
  // The bounds are those of the recorded durations, whatever the machine made of the spins: the longer of the two
  // chains a-b-d and a-c-d, all the work, and a span that no schedule keeping the dependencies beats.
  const DagBounds b = g.bounds(2);
  EXPECT_DOUBLE_EQ(b.critical_path_us, d[0] + std::max(d[1], d[2]) + d[3]);
  EXPECT_DOUBLE_EQ(b.work_us, d[0] + d[1] + d[2] + d[3]);
  EXPECT_DOUBLE_EQ(b.lower_bound_us(), std::max(b.critical_path_us, b.work_us / 2));
  EXPECT_DOUBLE_EQ(b.span_us, g.tasks[3].end_us - g.tasks[0].start_us);
  EXPECT_GE(b.span_us, b.critical_path_us);
  EXPECT_LE(b.lower_bound_us(), b.span_us * 1.0001);
  EXPECT_GT(b.efficiency(), 0.0);
  EXPECT_LE(b.efficiency(), 1.0001);

  const auto file = std::filesystem::temp_directory_path() / "dtnn_test_dag.json";
  g.write_json(file, 2, R"({"scheduler": "lws"})");
  std::ifstream in(file);
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["scheduler"], "lws");
  EXPECT_EQ(doc["tasks"].size(), 4u);
  EXPECT_EQ(doc["edges"].size(), 4u);
  EXPECT_EQ(doc["tasks"][1]["name"], "b:fwd");
  EXPECT_DOUBLE_EQ(doc["bounds"]["critical_path_us"].get<double>(), b.critical_path_us);
  std::filesystem::remove(file);
}

TEST(DagRecorderTest, TwoRecordersKeepTheirOwnGraphs) {
  Tensor x({1, 4}), y({1, 4});
  DagRecorder outer, inner;
  outer.start();
  const SpinArgs a{10.0};
  submit_task(spin_rw_r(), {"one:fwd", 0}, {{x.tile(0), STARPU_RW}, {y.tile(0), STARPU_R}}, a);
  inner.start();
  submit_task(spin_rw_r(), {"two:fwd", 0}, {{x.tile(0), STARPU_RW}, {y.tile(0), STARPU_R}}, a);
  inner.stop();
  outer.stop();
  Engine::current()->wait_all();
  EXPECT_EQ(outer.graph().tasks.size(), 2u);
  EXPECT_EQ(outer.graph().edges.size(), 1u);
  ASSERT_EQ(inner.graph().tasks.size(), 1u);
  EXPECT_EQ(inner.graph().tasks[0].name, "two:fwd");
  EXPECT_TRUE(inner.graph().edges.empty());  // its predecessor was submitted before it started
}

TEST(TaskKeyTest, SubmittedTasksCarryTheirInternedKey) {
  const TaskKey* k = intern_task_key("conv1:fwd", 3);
  EXPECT_EQ(k, intern_task_key("conv1:fwd", 3));
  EXPECT_NE(k, intern_task_key("conv1:fwd", 2));
  EXPECT_EQ(k->name, "conv1:fwd");
  EXPECT_EQ(k->tile, 3);
}

TEST(ScoredReadyListTest, HighestScoreFirstTiesInPushOrder) {
  ScoredReadyList list;
  std::vector<starpu_task*> tasks;
  for (int i = 0; i < 5; ++i) {
    starpu_task* t = starpu_task_create();
    t->cl = spin_rw_r().get();
    t->destroy = 0;
    tasks.push_back(t);
  }
  list.push(tasks[0], 1.0);
  list.push(tasks[1], 3.0);
  list.push(tasks[2], 1.0);
  list.push(tasks[3], 2.0);
  list.push(tasks[4], 3.0);
  EXPECT_EQ(list.size(), 5u);
  std::vector<starpu_task*> order;
  while (starpu_task* t = list.pop(0)) order.push_back(t);
  EXPECT_EQ(order, (std::vector<starpu_task*>{tasks[1], tasks[4], tasks[3], tasks[0], tasks[2]}));
  for (starpu_task* t : tasks) starpu_task_destroy(t);
}

TEST(PolicyRegistryTest, OwnPoliciesAreListedAndNamesAreChecked) {
  EXPECT_TRUE(is_registered_policy("dtnn-uprank"));
  EXPECT_FALSE(is_registered_policy("lws"));
  try {
    register_policy({"dmdas", "clash", [] { return std::make_unique<UpwardRankPolicy>(); }});
    FAIL() << "a StarPU name was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'dmdas' is a StarPU policy name"), std::string::npos) << e.what();
  }
  EXPECT_THROW(register_policy({"dtnn-uprank", "again", [] { return std::make_unique<UpwardRankPolicy>(); }}),
               InvalidArgument);
  EXPECT_THROW(register_policy({"no-factory", "", nullptr}), InvalidArgument);
}

}  // namespace
}  // namespace dtnn::runtime
