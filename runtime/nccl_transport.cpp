// SPDX-License-Identifier: Apache-2.0
// The NCCL transport, for gradients that live on a GPU (one MPI rank per GPU): the NCCL communicator is set up
// through MPI (rank 0's unique id broadcast), sums are enqueued on a stream of their own, so that they overlap
// the kernels of the backward pass on StarPU's worker stream, and completion is seen through an event. Built in
// CUDA configurations only (runtime/CMakeLists.txt).
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <starpu.h>

#include <chrono>
#include <exception>
#include <future>
#include <thread>

#include <fmt/format.h>

#include "core/cuda_check.hpp"
#include "core/errors.hpp"
#include "runtime/transport.hpp"

namespace dtnn::runtime {
namespace {

// The StarPU memory node of the CUDA worker on `device`.
int gpu_memory_node(int device) {
  for (unsigned w = 0; w < starpu_worker_get_count(); ++w) {
    if (starpu_worker_get_type(static_cast<int>(w)) == STARPU_CUDA_WORKER &&
        starpu_worker_get_devid(static_cast<int>(w)) == device) {
      return static_cast<int>(starpu_worker_get_memory_node(w));
    }
  }
  throw InvalidArgument(fmt::format("allreduce nccl: no CUDA worker on device {} in this rank, expected one GPU per "
                                    "rank (--device cuda)",
                                    device));
}

// ncclCommInitRank returns once every rank has joined: a rank that died or hangs would keep it waiting forever.
// It runs on a thread of its own (making `device` current there, which the communicator takes), and the caller
// waits for it within the time-out, like every other collective. A non-blocking communicator
// (ncclConfig_t::blocking = 0) would bound the set-up too, but would make every later NCCL call return
// ncclInProgress.
ncclComm_t init_communicator(const Mpi& mpi, const ncclUniqueId& id, int device) {
  const std::string what =
      fmt::format("NCCL communicator of rank {} of {} on CUDA device {}", mpi.rank(), mpi.size(), device);
  std::promise<ncclComm_t> result;
  std::future<ncclComm_t> done = result.get_future();
  std::thread init([&result, &mpi, id, device, what] {
    try {
      DTNN_CUDA_CHECK(cudaSetDevice(device), what);
      ncclComm_t comm = nullptr;
      DTNN_NCCL_CHECK(ncclCommInitRank(&comm, mpi.size(), id, mpi.rank()), what);
      result.set_value(comm);
    } catch (...) {
      result.set_exception(std::current_exception());
    }
  });
  if (done.wait_for(std::chrono::seconds(mpi.timeout_s())) != std::future_status::ready) {
    init.detach();  // still inside ncclCommInitRank: the job ends below
    mpi.abort(fmt::format("{}: set-up did not complete within {} s (--mpi-timeout): {} died, hangs or is unreachable",
                          what, mpi.timeout_s(), mpi.peers()));
  }
  init.join();
  return done.get();
}

class NcclTransport final : public Transport {
 public:
  NcclTransport(const Mpi& mpi, int device) : device_(device), node_(gpu_memory_node(device)) {
    ncclUniqueId id{};
    if (mpi.rank() == 0) DTNN_NCCL_CHECK(ncclGetUniqueId(&id), "NCCL unique id");
    // Through the driver communicator, like every start-up collective, and within the time-out.
    MPI_Request request;
    MPI_Ibcast(&id, sizeof(id), MPI_BYTE, 0, mpi.driver_comm(), &request);
    mpi.wait(request, "broadcast of the NCCL unique id");
    comm_ = init_communicator(mpi, id, device);
    DTNN_CUDA_CHECK(cudaSetDevice(device), fmt::format("NCCL on CUDA device {}", device));
    DTNN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "NCCL stream");
  }

  ~NcclTransport() override {
    if (stream_ != nullptr) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  [[nodiscard]] int memory_node() const override { return node_; }

  void attach_thread() override {
    DTNN_CUDA_CHECK(cudaSetDevice(device_), fmt::format("NCCL thread on CUDA device {}", device_));
  }

  // In place on each gradient's GPU copy, as one NCCL group: no packing.
  [[nodiscard]] std::unique_ptr<Flight> start_sum(std::span<const SumBuffer> buffers, const std::string& what) override {
    const std::string where = "NCCL " + what;
    auto f = std::make_unique<EventFlight>();
    DTNN_CUDA_CHECK(cudaEventCreateWithFlags(&f->done, cudaEventDisableTiming), where);
    DTNN_NCCL_CHECK(ncclGroupStart(), where);
    ncclResult_t status = ncclSuccess;
    for (const SumBuffer& b : buffers) {
      status = ncclAllReduce(b.data, b.data, b.count, ncclFloat, ncclSum, comm_, stream_);
      if (status != ncclSuccess) break;
    }
    // Always closed, even after a failed call: a group left open would swallow the next collectives.
    const ncclResult_t end = ncclGroupEnd();
    if (status != ncclSuccess) {
      cuda_check::fail("ncclAllReduce(b.data, b.data, b.count, ncclFloat, ncclSum, comm_, stream_)", status, __FILE__,
                       __LINE__, where);
    }
    if (end != ncclSuccess) cuda_check::fail("ncclGroupEnd()", end, __FILE__, __LINE__, where);
    DTNN_CUDA_CHECK(cudaEventRecord(f->done, stream_), where);
    return f;
  }

  int test(Flight& flight, const std::string& what) override {
    const std::string where = "NCCL " + what;
    const cudaError_t e = cudaEventQuery(static_cast<EventFlight&>(flight).done);
    if (e == cudaSuccess) return 1;
    if (e != cudaErrorNotReady) cuda_check::fail("cudaEventQuery(flight.done)", e, __FILE__, __LINE__, where);
    ncclResult_t async = ncclSuccess;
    DTNN_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async), where);
    if (async != ncclSuccess) {
      cuda_check::fail("an NCCL operation (ncclCommGetAsyncError)", async, __FILE__, __LINE__, where);
    }
    return 0;
  }

  void abort() noexcept override {
    if (comm_ != nullptr) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
  }

 private:
  struct EventFlight final : Flight {
    cudaEvent_t done = nullptr;
    ~EventFlight() override {
      if (done != nullptr) cudaEventDestroy(done);
    }
  };

  int device_;
  int node_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<Transport> make_nccl_transport(const Mpi& mpi, int cuda_device) {
  return std::make_unique<NcclTransport>(mpi, cuda_device);
}

}  // namespace dtnn::runtime
