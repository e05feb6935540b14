// SPDX-License-Identifier: Apache-2.0
#include "runtime/mpi_transport.hpp"

#include <starpu.h>

#include <algorithm>
#include <cstring>

namespace dtnn::runtime {

struct MpiTransport::MpiFlight final : Transport::Flight {
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<float> staging;          // packed sums: copied back into `unpack` once complete
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
  float* data = buffers.empty() ? nullptr : buffers.front().data;
  std::size_t count = buffers.empty() ? 0 : buffers.front().count;
  if (buffers.size() > 1) {
    count = 0;
    for (const SumBuffer& b : buffers) count += b.count;
    f->staging = take_staging(count);
    f->staging.resize(count);
    std::size_t at = 0;
    for (const SumBuffer& b : buffers) {
      std::memcpy(f->staging.data() + at, b.data, b.count * sizeof(float));
      at += b.count;
    }
    f->unpack.assign(buffers.begin(), buffers.end());
    data = f->staging.data();
  }
  MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, mpi_.reduction_comm(),
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

int MpiTransport::test(Flight& flight, const std::string& what) {
  auto& f = static_cast<MpiFlight&>(flight);
  int done = 0;
  MPI_Test(&f.request, &done, MPI_STATUS_IGNORE);
  if (!done) return 0;
  if (!f.unpack.empty()) {
    std::size_t at = 0;
    for (const SumBuffer& b : f.unpack) {
      std::memcpy(b.data, f.staging.data() + at, b.count * sizeof(float));
      at += b.count;
    }
    f.unpack.clear();
    spare_.push_back(std::move(f.staging));
  }
  return 1;
}

}  // namespace dtnn::runtime
