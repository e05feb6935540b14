// SPDX-License-Identifier: Apache-2.0
#ifdef DTNN_HAVE_CUDA
#include "runtime/nccl.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dtnn::runtime {
namespace {

void check_cuda(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw RuntimeError(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

void check_nccl(ncclResult_t r, const std::string& what) {
  if (r != ncclSuccess) throw RuntimeError(fmt::format("{}: NCCL {}", what, ncclGetErrorString(r)));
}

}  // namespace

struct NcclComm::State {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

struct NcclComm::Flight {
  cudaEvent_t done = nullptr;
};

NcclComm::NcclComm(const Mpi& mpi, int device) : state_(std::make_unique<State>()), device_(device) {
  ncclUniqueId id{};
  if (mpi.rank() == 0) check_nccl(ncclGetUniqueId(&id), "NCCL unique id");
  // Through the driver communicator, like every start-up collective.
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, mpi.driver_comm());
  check_cuda(cudaSetDevice(device), fmt::format("NCCL: cudaSetDevice({})", device));
  check_nccl(ncclCommInitRank(&state_->comm, mpi.size(), id, mpi.rank()),
             fmt::format("NCCL communicator of rank {} of {} on CUDA device {}", mpi.rank(), mpi.size(), device));
  check_cuda(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking), "NCCL stream");
}

NcclComm::~NcclComm() {
  if (state_->stream != nullptr) {
    cudaStreamSynchronize(state_->stream);
    cudaStreamDestroy(state_->stream);
  }
  if (state_->comm != nullptr) ncclCommDestroy(state_->comm);
}

void NcclComm::bind_thread() const { check_cuda(cudaSetDevice(device_), "NCCL thread: cudaSetDevice"); }

std::unique_ptr<NcclComm::Flight, void (*)(NcclComm::Flight*)> NcclComm::start_sum(
    const std::vector<std::pair<float*, std::size_t>>& buffers, const std::string& what) {
  std::unique_ptr<Flight, void (*)(Flight*)> f(new Flight, [](Flight* p) {
    if (p->done != nullptr) cudaEventDestroy(p->done);
    delete p;
  });
  check_cuda(cudaEventCreateWithFlags(&f->done, cudaEventDisableTiming), what + ": event");
  check_nccl(ncclGroupStart(), what);
  for (const auto& [ptr, count] : buffers) {
    check_nccl(ncclAllReduce(ptr, ptr, count, ncclFloat, ncclSum, state_->comm, state_->stream), what);
  }
  check_nccl(ncclGroupEnd(), what);
  check_cuda(cudaEventRecord(f->done, state_->stream), what + ": event record");
  return f;
}

int NcclComm::test(Flight& flight, const std::string& what) {
  const cudaError_t e = cudaEventQuery(flight.done);
  if (e == cudaSuccess) return 1;
  if (e != cudaErrorNotReady) check_cuda(e, what);
  ncclResult_t async = ncclSuccess;
  check_nccl(ncclCommGetAsyncError(state_->comm, &async), what);
  check_nccl(async, what);
  return 0;
}

void NcclComm::abort() noexcept {
  if (state_->comm != nullptr) {
    ncclCommAbort(state_->comm);
    state_->comm = nullptr;
  }
}

}  // namespace dtnn::runtime
#endif  // DTNN_HAVE_CUDA
