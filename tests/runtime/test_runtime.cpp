// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codelets/common.hpp"
#include "runtime/codelet.hpp"
#include "runtime/engine.hpp"
#include "core/errors.hpp"
#include "runtime/failure.hpp"
#include "runtime/tensor.hpp"
#include "runtime/trace.hpp"
#include "support/throws_with.hpp"

namespace dtnn {
namespace {

TEST(SplitRowsTest, SizesDifferByAtMostOneAndCoverEveryRow) {
  for (std::int64_t n : {1, 2, 5, 7, 64, 100}) {
    for (int tiles : {1, 2, 3, 4, 8}) {
      const auto ranges = split_rows(n, tiles);
      ASSERT_EQ(static_cast<std::int64_t>(ranges.size()), std::min<std::int64_t>(n, tiles));
      std::int64_t next = 0, lo = n, hi = 0;
      for (const auto& r : ranges) {
        EXPECT_EQ(r.begin, next);
        next += r.count;
        lo = std::min(lo, r.count);
        hi = std::max(hi, r.count);
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(hi - lo, 1);
    }
  }
}

TEST(SplitRowsTest, RejectsZeroRowsOrTiles) {
  EXPECT_THROW(split_rows(0, 2), InvalidArgument);
  EXPECT_THROW(split_rows(4, 0), InvalidArgument);
}

TEST(TensorTest, TilesCoverTheFirstDimension) {
  Tensor t({7, 3, 2}, 3);
  EXPECT_EQ(t.tiles(), 3);
  EXPECT_EQ(t.numel(), 42);
  EXPECT_EQ(t.row_elements(), 6);
  EXPECT_EQ(t.tile_range(0).count, 3);
  EXPECT_EQ(t.tile_range(2).begin, 5);
  EXPECT_EQ(starpu_vector_get_nx(t.tile(0)), 18u);
  EXPECT_EQ(starpu_vector_get_nx(t.tile(2)), 12u);
  EXPECT_THROW((void)t.handle(), InvalidArgument);
}

TEST(TensorTest, StartsZeroedAndRoundTripsThroughHostAccess) {
  Tensor t({4, 5}, 2);
  for (float v : t.to_vector()) EXPECT_EQ(v, 0.0f);
  std::vector<float> values(20);
  for (int i = 0; i < 20; ++i) values[i] = static_cast<float>(i);
  t.copy_from(values);
  EXPECT_EQ(t.to_vector(), values);
  t.fill(2.5f);
  for (float v : t.to_vector()) EXPECT_EQ(v, 2.5f);
}

TEST(TensorTest, MoveTransfersOwnership) {
  Tensor a({2, 2});
  a.fill(1.0f);
  Tensor b = std::move(a);
  EXPECT_FALSE(a.defined());
  EXPECT_TRUE(b.defined());
  EXPECT_EQ(b.to_vector(), std::vector<float>(4, 1.0f));
  Tensor c({3});
  c = std::move(b);
  EXPECT_EQ(c.numel(), 4);
}

// Token ids are int32 tensors: 4-byte elements in the tiles' handles, host access only as their own type.
TEST(TensorTest, Int32TensorsHoldTokenIdsAndRefuseAFloatView) {
  Tensor t({5, 3}, TensorOptions().dtype(DType::kInt32).tiles(2));
  EXPECT_EQ(t.dtype(), DType::kInt32);
  EXPECT_EQ(t.bytes(), 60);
  EXPECT_EQ(starpu_vector_get_elemsize(t.tile(1)), sizeof(std::int32_t));
  EXPECT_EQ(starpu_vector_get_nx(t.tile(1)), 6u);
  std::vector<std::int32_t> ids(15);
  for (int i = 0; i < 15; ++i) ids[static_cast<std::size_t>(i)] = 100000 + i;
  t.copy_from_values<std::int32_t>(ids);
  EXPECT_EQ(t.values_as<std::int32_t>(), ids);
  // The second tile starts at row 3, 4 bytes an element.
  EXPECT_EQ(reinterpret_cast<const std::int32_t*>(starpu_vector_get_local_ptr(t.tile(1)))[0], 100009);
  EXPECT_TRUE(test_support::throws_with<InvalidArgument>(
      [&] { (void)t.to_vector(); }, {"Tensor (5, 3): host access as float32, expected its element type int32"}));
  EXPECT_TRUE(test_support::throws_with<InvalidArgument>([&] { t.fill(1.0f); }, {"host access as float32"}));
  Tensor f({2});
  EXPECT_EQ(f.dtype(), DType::kFloat32);
  EXPECT_TRUE(test_support::throws_with<InvalidArgument>(
      [&] { (void)f.values_as<std::int32_t>(); }, {"host access as int32, expected its element type float32"}));
  Tensor moved = std::move(t);
  EXPECT_EQ(moved.dtype(), DType::kInt32);
  EXPECT_EQ(moved.values_as<std::int32_t>()[14], 100014);
}

TEST(TensorTest, RejectsBadShapes) {
  EXPECT_THROW(Tensor(Shape{}), InvalidArgument);
  EXPECT_THROW(Tensor(Shape{3, 0}), InvalidArgument);
  EXPECT_THROW(Tensor(Shape{2}).copy_from(std::vector<float>(3)), InvalidArgument);
}

TEST(EngineTest, OnlyOneEngineAtATime) {
  ASSERT_NE(runtime::Engine::current(), nullptr);
  EXPECT_THROW(runtime::Engine(runtime::EngineOptions()), InvalidArgument);
}

TEST(EngineTest, DescribesSchedulerWorkersAndBlis) {
  const std::string d = runtime::Engine::current()->describe();
  EXPECT_NE(d.find("scheduler lws"), std::string::npos) << d;
  EXPECT_NE(d.find("2 CPU workers"), std::string::npos) << d;
  EXPECT_NE(d.find("BLIS"), std::string::npos) << d;
}

struct ThrowArgs {
  int should_throw;
};

void maybe_throw(void** buffers, void* cl_arg) {
  float* p = runtime::vector_ptr(buffers[0]);
  p[0] += 1.0f;
  if (runtime::task_args<ThrowArgs>(cl_arg).should_throw) {
    throw std::runtime_error("kernel refused its input");
  }
}

runtime::Codelet cl_maybe_throw("test_maybe_throw", runtime::guarded<maybe_throw>, {STARPU_RW});

TEST(FailureTest, WorkerExceptionIsReraisedAtTheNextSynchronisation) {
  Tensor t({1});
  runtime::submit_task(cl_maybe_throw, {"probe:fwd", 0, 0.0, 0}, {codelets::rdwr(t.handle())}, ThrowArgs{0});
  runtime::submit_task(cl_maybe_throw, {"probe:bwd_data", 0, 0.0, 0}, {codelets::rdwr(t.handle())}, ThrowArgs{1});
  try {
    runtime::Engine::current()->wait_all();
    FAIL() << "expected a RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("probe:bwd_data: kernel refused its input"), std::string::npos) << e.what();
  }
  EXPECT_EQ(t.to_vector()[0], 2.0f);
  EXPECT_NO_THROW(runtime::Engine::current()->wait_all());  // the record is cleared once raised
}

TEST(SubmitTest, WrongBufferCountIsAnError) {
  Tensor t({1});
  EXPECT_THROW(runtime::submit_task(cl_maybe_throw, {"probe:fwd", 0, 0.0, 0},
                                    {codelets::rdwr(t.handle()), codelets::rdwr(t.handle())}, ThrowArgs{0}),
               InvalidArgument);
}

TEST(TracerTest, WritesChromeTraceWithOneEventPerTask) {
  runtime::Tracer::start();
  Tensor t({4, 1}, 2);
  for (int tile = 0; tile < 2; ++tile) {
    runtime::submit_task(cl_maybe_throw, {"probe:fwd", tile, 123.0, 0}, {codelets::rdwr(t.tile(tile))}, ThrowArgs{0});
  }
  runtime::Engine::current()->wait_all();
  runtime::Tracer::stop();
  const auto file = std::filesystem::temp_directory_path() / "dtnn-test-trace.json";
  runtime::Tracer::write_chrome_trace(file);
  std::ifstream in(file);
  const auto doc = nlohmann::json::parse(in);
  int tasks = 0;
  std::set<int> tiles;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X") {
      ++tasks;
      EXPECT_EQ(e.at("name"), "probe:fwd");
      EXPECT_EQ(e.at("args").at("flops"), 123.0);
      EXPECT_GE(e.at("dur").get<double>(), 0.0);
      EXPECT_GE(e.at("tid").get<int>(), 0);
      tiles.insert(e.at("args").at("tile").get<int>());
      EXPECT_GE(e.at("args").at("wait_us").get<double>(), 0.0);
    }
  }
  EXPECT_EQ(tasks, 2);
  EXPECT_EQ(tiles, (std::set<int>{0, 1}));
  std::filesystem::remove(file);
}

// A task is ready when its last dependency ends (StarPU's push time), and starts no earlier: a chain of three tasks
// on one handle, each made ready by the previous one's end.
TEST(TracerTest, TaskIsReadyWhenItsDependencyEndsAndStartsAfter) {
  runtime::Tracer::start();
  Tensor t({1});
  for (int i = 0; i < 3; ++i) {
    runtime::submit_task(cl_maybe_throw, {"probe:chain", 0, static_cast<double>(i), 0}, {codelets::rdwr(t.handle())},
                         ThrowArgs{0});
  }
  runtime::Engine::current()->wait_all();
  runtime::Tracer::stop();
  std::vector<runtime::TraceEvent> chain;
  for (const auto& e : runtime::Tracer::events()) {
    if (e.name == "probe:chain") chain.push_back(e);
  }
  ASSERT_EQ(chain.size(), 3u);
  std::sort(chain.begin(), chain.end(), [](const auto& a, const auto& b) { return a.flops < b.flops; });
  for (std::size_t i = 0; i < chain.size(); ++i) {
    EXPECT_GT(chain[i].ready_us, 0.0) << i;
    EXPECT_GE(chain[i].start_us, chain[i].ready_us) << i;
    if (i > 0) {
      EXPECT_GE(chain[i].ready_us, chain[i - 1].end_us) << i;
    }
  }
}

// The speeds `dtnn calibrate` records: per CPU worker, what its tasks would have lasted at their shape's mean over
// what they lasted. Worker ids are the engine's (two CPU workers, tests/support/test_main.cpp).
TEST(TracerTest, CpuWorkerSpeedsCompareTheSameShapesOnEachWorker) {
  ASSERT_EQ(starpu_cpu_worker_get_count(), 2u);
  const int w0 = starpu_worker_get_by_devid(STARPU_CPU_WORKER, 0);
  const int w1 = starpu_worker_get_by_devid(STARPU_CPU_WORKER, 1);
  auto task = [](std::string name, int tile, int worker, double start, double us) {
    runtime::TraceEvent e;
    e.name = std::move(name);
    e.codelet = "c";
    e.tile = tile;
    e.worker = worker;
    e.start_us = start;
    e.end_us = start + us;
    return e;
  };
  // "a" tile 0: 100 us on worker 0 (twice), 300 us on worker 1 (once): mean 500/3. "b" tile 0: 40 and 40 us.
  // Tile 1 of "a" ran on worker 1 only and says nothing; the event before from_us neither.
  std::vector<runtime::TraceEvent> events = {
      task("a", 0, w0, 10, 100), task("a", 0, w0, 20, 100), task("a", 0, w1, 30, 300), task("b", 0, w0, 40, 40),
      task("b", 0, w1, 50, 40),  task("a", 1, w1, 60, 900), task("a", 0, w1, 1, 5000)};
  const std::vector<double> speeds = runtime::cpu_worker_speeds(events, 5.0);
  ASSERT_EQ(speeds.size(), 2u);
  const double mean_a = 500.0 / 3.0;
  EXPECT_NEAR(speeds[0], (2 * mean_a + 40) / 240.0, 1e-12);
  EXPECT_NEAR(speeds[1], (mean_a + 40) / 340.0, 1e-12);
  // Weighted by the time each worked, the speeds average to 1.
  EXPECT_NEAR((240.0 * speeds[0] + 340.0 * speeds[1]) / 580.0, 1.0, 1e-12);
  // Nothing that ran on both workers: both at 1.
  EXPECT_EQ(runtime::cpu_worker_speeds({task("a", 0, w0, 10, 100)}, 0.0), (std::vector<double>{1.0, 1.0}));
}

// The time between tasks `dtnn calibrate` records: the median gap from a CPU worker's task to its next one, over the
// pairs whose second task was ready before the first ended (a worker waiting for work says nothing of its overhead).
TEST(TracerTest, CpuTaskOverheadIsTheMedianGapToAReadyNextTask) {
  const int w0 = starpu_worker_get_by_devid(STARPU_CPU_WORKER, 0);
  const int w1 = starpu_worker_get_by_devid(STARPU_CPU_WORKER, 1);
  auto task = [](int worker, double ready, double start, double end) {
    runtime::TraceEvent e;
    e.name = "t";
    e.worker = worker;
    e.ready_us = ready;
    e.start_us = start;
    e.end_us = end;
    return e;
  };
  // Worker 0: gaps 10 (ready at 50, before the end at 100) and 20; then a task made ready only at 400 after the end at
  // 300 (idle, left out). Worker 1, listed out of order: a gap of 30. The first event starts before from_us.
  std::vector<runtime::TraceEvent> events = {
      task(w0, 1, 5, 6),       task(w0, 0, 10, 100),     task(w0, 50, 110, 200), task(w0, 150, 220, 300),
      task(w0, 400, 405, 500), task(w1, 900, 930, 1000), task(w1, 0, 20, 900)};
  EXPECT_DOUBLE_EQ(runtime::cpu_task_overhead_us(events, 8.0), 20.0);
  // Without the first worker's second pair: gaps 10 and 30, the upper median.
  events.erase(events.begin() + 3);
  EXPECT_DOUBLE_EQ(runtime::cpu_task_overhead_us(events, 8.0), 30.0);
  // No task ready before its worker's previous one ended (or no ready time at all): 0.
  EXPECT_DOUBLE_EQ(runtime::cpu_task_overhead_us({task(w0, 0, 10, 100), task(w0, 0, 110, 200)}, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(runtime::cpu_task_overhead_us({task(w0, 0, 10, 100), task(w0, 150, 160, 200)}, 0.0), 0.0);
}

TEST(TracerTest, UnwritableFileIsADataErrorNamingIt) {
  try {
    runtime::Tracer::write_chrome_trace("/nonexistent-dir/trace.json");
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/trace.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dtnn
