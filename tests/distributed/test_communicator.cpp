// SPDX-License-Identifier: Apache-2.0
// The communicator's failure paths, on each rank alone (no collective is ever started): an error on the
// communication thread is raised on the driver with its message, and the tensors of the collectives it can no
// longer run go back to the task graph, which drains.
#include <gtest/gtest.h>
#include <starpu.h>

#include <stdexcept>

#include "core/errors.hpp"
#include "runtime/communicator.hpp"
#include "runtime/engine.hpp"

namespace dtnn {
namespace {

// A transport that fails where it is told to: at the start of the communication thread, or at the start of its
// first sum.
class FailingTransport final : public runtime::Transport {
 public:
  enum class Where { kThreadStart, kSumStart };
  explicit FailingTransport(Where where) : where_(where) {}
  [[nodiscard]] int memory_node() const override { return STARPU_MAIN_RAM; }
  void attach_thread() override {
    if (where_ == Where::kThreadStart) throw RuntimeError("test transport: device lost");
  }
  [[nodiscard]] std::unique_ptr<Flight> start_sum(std::span<const runtime::SumBuffer>, const std::string&) override {
    throw RuntimeError("test transport: no route to rank 1");
  }
  int test(Flight&, const std::string&) override { return 1; }

 private:
  Where where_;
};

const runtime::Mpi& mpi() { return *runtime::Mpi::current(); }

float own_value() { return static_cast<float>(mpi().rank() + 1); }

void expect_message(const std::string& what, const std::string& part) {
  EXPECT_NE(what.find(part), std::string::npos) << what;
}

TEST(CommunicatorTest, ThreadStartFailureIsRaisedOnTheDriverAndTheGraphDrains) {
  runtime::Communicator comm(mpi(), std::make_unique<FailingTransport>(FailingTransport::Where::kThreadStart),
                             runtime::AllreduceMode::kOverlapped);
  Tensor t(Shape{16});
  t.fill(own_value());
  try {
    // Issued before or after the thread recorded its failure: either refused here, or released unchanged.
    comm.sum({&t}, "t");
  } catch (const RuntimeError&) {
  }
  try {
    comm.wait_idle();
    FAIL() << "expected the thread's failure";
  } catch (const RuntimeError& e) {
    expect_message(e.what(), "device lost");
    expect_message(e.what(), "communication thread of rank " + std::to_string(mpi().rank()));
  }
  EXPECT_THROW(comm.sum({&t}, "t"), RuntimeError);
  EXPECT_THROW(comm.end_step(), RuntimeError);
  // The tensor went back to the task graph as it was: readable (no acquisition left behind) and not summed.
  for (const float v : t.to_vector()) ASSERT_EQ(v, own_value());
}

TEST(CommunicatorTest, FailedStartOfACollectiveIsRaisedAndTheLaterOnesAreReleased) {
  for (const auto mode : {runtime::AllreduceMode::kOverlapped, runtime::AllreduceMode::kBlocking}) {
    runtime::Communicator comm(mpi(), std::make_unique<FailingTransport>(FailingTransport::Where::kSumStart), mode);
    Tensor a(Shape{8}), b(Shape{8});
    a.fill(own_value());
    b.fill(own_value());
    comm.sum({&a}, "a");
    try {
      comm.sum({&b}, "b");
      comm.end_step();
    } catch (const RuntimeError&) {
      // a's start may already have failed.
    }
    try {
      comm.wait_idle();
      FAIL() << "expected the failed start";
    } catch (const RuntimeError& e) {
      expect_message(e.what(), "start of the gradient allreduce of a");
      expect_message(e.what(), "no route to rank 1");
    }
    EXPECT_THROW(comm.check(), RuntimeError);
    for (const Tensor* t : {&a, &b}) {
      for (const float v : t->to_vector()) ASSERT_EQ(v, own_value());
    }
  }
}

// A transport whose sums start as MPI's do, on every rank, and then fail on rank 1 while in flight.
class FailsInFlightOnRank1 final : public runtime::Transport {
 public:
  explicit FailsInFlightOnRank1(const runtime::Mpi& mpi) : mpi_(mpi), mpi_transport_(mpi) {}
  [[nodiscard]] int memory_node() const override { return mpi_transport_.memory_node(); }
  [[nodiscard]] std::unique_ptr<Flight> start_sum(std::span<const runtime::SumBuffer> buffers,
                                                  const std::string& what) override {
    return mpi_transport_.start_sum(buffers, what);
  }
  int test(Flight& flight, const std::string& what) override {
    if (mpi_.rank() == 1) throw RuntimeError("test transport: connection to rank 0 lost during the " + what);
    return mpi_transport_.test(flight, what);
  }

 private:
  const runtime::Mpi& mpi_;
  runtime::MpiTransport mpi_transport_;
};

// A transport that fails while a sum is in flight ends the job (the peers wait in the sum), with dtnn's error naming
// the rank and the sum. Disabled in the suite's run, since it ends the job: ctest's distributed_sum_fails_in_flight
// runs it alone (--gtest_also_run_disabled_tests) and passes on rank 1's message, and fails if the job reached the
// end of its tests instead (tests/CMakeLists.txt).
TEST(CommunicatorTest, DISABLED_TransportFailingWhileASumIsInFlightEndsTheJobNamingTheRank) {
  runtime::Communicator comm(mpi(), std::make_unique<FailsInFlightOnRank1>(mpi()), runtime::AllreduceMode::kOverlapped);
  Tensor t(Shape{16});
  t.fill(own_value());
  comm.sum({&t}, "t");
  comm.end_step();
  comm.wait_idle();
  // Rank 0 may see its sum complete; rank 1's failure ends the job while it waits here.
  mpi().barrier("end of the in-flight failure test");
  FAIL() << "rank " << mpi().rank() << " went on after rank 1's transport failed";
}

TEST(CommunicatorTest, NcclInABuildWithoutCudaIsAClearError) {
  if (runtime::built_with_cuda()) GTEST_SKIP() << "a CUDA build has the NCCL transport";
  try {
    runtime::Communicator comm(mpi(), runtime::CommunicatorOptions().backend(runtime::AllreduceBackend::kNccl));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    expect_message(e.what(), "allreduce nccl: this build has no CUDA, expected mpi");
  }
}

}  // namespace
}  // namespace dtnn
