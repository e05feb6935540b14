// SPDX-License-Identifier: Apache-2.0
#include "runtime/mpi_transport.hpp"

#include <starpu.h>

#include <algorithm>
#include <cstring>

namespace dtnn::runtime {

struct MpiTransport::MpiFlight final : Transport::Flight {
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<float> send;             // the packed sums, what this rank contributes
  std::vector<float> receive;          // the result of a bucket of several tensors: copied back into `unpack`
  std::vector<SumBuffer> unpack;
};

int MpiTransport::memory_node() const { return STARPU_MAIN_RAM; }

std::vector<float> MpiTransport::take_staging(std::size_t count) {
  // The smallest spare buffer that holds the bucket, else the largest (it grows): the spare buffers settle on the
  // sizes of the buckets, which are the same every step.
  auto by_capacity = [](const std::vector<float>& a, const std::vector<float>& b) { return a.capacity() < b.capacity(); };
  auto pick = spare_.end();
  for (auto it = spare_.begin(); it != spare_.end(); ++it) {
    if (it->capacity() >= count && (pick == spare_.end() || by_capacity(*it, *pick))) pick = it;
  }
  if (pick == spare_.end()) pick = std::max_element(spare_.begin(), spare_.end(), by_capacity);
  std::vector<float> out;
  if (pick != spare_.end()) {
    out = std::move(*pick);
    spare_.erase(pick);
  }
  return out;
}

std::unique_ptr<Transport::Flight> MpiTransport::start_sum(std::span<const SumBuffer> buffers,
                                                           const std::string& what) {
  auto f = std::make_unique<MpiFlight>();
  std::size_t count = 0;
  for (const SumBuffer& b : buffers) count += b.count;
  // Not MPI_IN_PLACE: Open MPI's non-blocking allreduce (libnbc) then copies the buffer into a temporary one of
  // its own, allocated for every call, which the communication thread's malloc arena hands back to the kernel
  // when freed: every bucket paid a page fault per 4 KiB (measured: vgg16_cifar10, 2 ranks x 1 worker, 27% of
  // that thread's time in page faults under that copy). The send buffers here are kept and reused.
  f->send = take_staging(count);
  f->send.resize(count);
  std::size_t at = 0;
  for (const SumBuffer& b : buffers) {
    std::memcpy(f->send.data() + at, b.data, b.count * sizeof(float));
    at += b.count;
  }
  float* result = buffers.empty() ? nullptr : buffers.front().data;
  if (buffers.size() > 1) {
    f->receive = take_staging(count);
    f->receive.resize(count);
    f->unpack.assign(buffers.begin(), buffers.end());
    result = f->receive.data();
  }
  MPI_Iallreduce(f->send.data(), result, static_cast<int>(count), MPI_FLOAT, MPI_SUM, mpi_.reduction_comm(),
                 &f->request);
  return f;
}

std::unique_ptr<Transport::Flight> MpiTransport::start_all_gather(const float* local, int count, float* global,
                                                                  const std::vector<int>& counts,
                                                                  const std::vector<int>& displacements) {
  auto f = std::make_unique<MpiFlight>();
  MPI_Iallgatherv(local, count, MPI_FLOAT, global, counts.data(), displacements.data(), MPI_FLOAT,
                  mpi_.reduction_comm(), &f->request);
  return f;
}

std::unique_ptr<Transport::Flight> MpiTransport::start_send(const float* data, std::size_t count, int peer, int tag) {
  auto f = std::make_unique<MpiFlight>();
  MPI_Isend(data, static_cast<int>(count), MPI_FLOAT, peer, tag, mpi_.reduction_comm(), &f->request);
  return f;
}

std::unique_ptr<Transport::Flight> MpiTransport::start_receive(float* data, std::size_t count, int peer, int tag) {
  auto f = std::make_unique<MpiFlight>();
  MPI_Irecv(data, static_cast<int>(count), MPI_FLOAT, peer, tag, mpi_.reduction_comm(), &f->request);
  return f;
}

std::unique_ptr<Transport::Flight> MpiTransport::start_broadcast(float* data, std::size_t count, int root) {
  auto f = std::make_unique<MpiFlight>();
  MPI_Ibcast(data, static_cast<int>(count), MPI_FLOAT, root, mpi_.reduction_comm(), &f->request);
  return f;
}

int MpiTransport::test(Flight& flight, const std::string& what) {
  auto& f = static_cast<MpiFlight&>(flight);
  int done = 0;
  MPI_Test(&f.request, &done, MPI_STATUS_IGNORE);
  if (!done) return 0;
  if (!f.unpack.empty()) {
    std::size_t at = 0;
    for (const SumBuffer& b : f.unpack) {
      std::memcpy(b.data, f.receive.data() + at, b.count * sizeof(float));
      at += b.count;
    }
    f.unpack.clear();
    spare_.push_back(std::move(f.receive));
  }
  if (f.send.capacity() > 0) spare_.push_back(std::move(f.send));
  return 1;
}

}  // namespace dtnn::runtime
