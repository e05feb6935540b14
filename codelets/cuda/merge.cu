// SPDX-License-Identifier: Apache-2.0
#include <string>

#include "codelets/cuda/launch.cuh"
#include "codelets/cuda/merge.hpp"
#include "core/errors.hpp"

namespace dtnn::kernels::cuda {
namespace {

using std::size_t;

// The source pointers travel by value in the kernel's parameters.
struct Sources {
  const float* ptr[kMaxMergeSources];
  int count;
};

// Each thread adds its element's sources in order: bitwise the CPU's sum. dst may be one of the sources, as on
// the CPU: every element is written once, after all its sources were read.
__global__ void sum_fixed_order_kernel(size_t count, Sources src, float* dst) {
  DTNN_GRID_STRIDE(i, count) {
    float acc = src.ptr[0][i];
    for (int s = 1; s < src.count; ++s) acc += src.ptr[s][i];
    dst[i] = acc;
  }
}

// sum_fixed_order_kernel with the ReLU of kernels::cpu::sum_fixed_order_relu on each total.
__global__ void sum_fixed_order_relu_kernel(size_t count, Sources src, float* dst) {
  DTNN_GRID_STRIDE(i, count) {
    float acc = src.ptr[0][i];
    for (int s = 1; s < src.count; ++s) acc += src.ptr[s][i];
    dst[i] = acc < 0.0f ? 0.0f : acc;
  }
}

__global__ void accumulate_fixed_order_kernel(size_t count, Sources src, float* dst) {
  DTNN_GRID_STRIDE(i, count) {
    float acc = dst[i];
    for (int s = 0; s < src.count; ++s) acc += src.ptr[s][i];
    dst[i] = acc;
  }
}

__global__ void fill_zero_kernel(size_t count, float* dst) {
  DTNN_GRID_STRIDE(i, count) { dst[i] = 0.0f; }
}

void check_count(const char* what, int count) {
  if (count > kMaxMergeSources) {
    throw InvalidArgument(std::string(what) + ": " + std::to_string(count) + " parts, expected at most " +
                          std::to_string(kMaxMergeSources) + " on CUDA");
  }
}

Sources sources(const char* what, int nsrc, const float* const* src) {
  check_count(what, nsrc);
  Sources s{};
  s.count = nsrc;
  for (int i = 0; i < nsrc; ++i) s.ptr[i] = src[i];
  return s;
}

// The parts of a concatenation: offset[p] is where part p starts within a sample of the whole, offset[nparts] the
// sample's size.
template <class Ptr>
struct Parts {
  Ptr ptr[kMaxMergeSources];
  std::int64_t offset[kMaxMergeSources + 1];
  int count;
};

template <class Ptr>
Parts<Ptr> parts_of(const char* what, int nparts, Ptr const* ptrs, const std::int64_t* part_elems) {
  check_count(what, nparts);
  Parts<Ptr> p{};
  p.count = nparts;
  p.offset[0] = 0;
  for (int i = 0; i < nparts; ++i) {
    p.ptr[i] = ptrs[i];
    p.offset[i + 1] = p.offset[i] + part_elems[i];
  }
  return p;
}

// The part holding position r of a sample (0 <= r < offset[count]); empty parts are skipped.
template <class Ptr>
__device__ inline int part_at(const Parts<Ptr>& parts, size_t r) {
  int p = 0;
  while (static_cast<std::int64_t>(r) >= parts.offset[p + 1]) ++p;
  return p;
}

// One thread per value of the whole: coalesced on the whole's side and within each part's slice.
__global__ void concat_fwd_kernel(size_t n, Parts<const float*> parts, float* __restrict__ y) {
  const auto sample = static_cast<size_t>(parts.offset[parts.count]);
  DTNN_GRID_STRIDE(idx, n * sample) {
    const size_t i = idx / sample;
    const size_t r = idx - i * sample;
    const int p = part_at(parts, r);
    const auto begin = static_cast<size_t>(parts.offset[p]);
    const auto len = static_cast<size_t>(parts.offset[p + 1]) - begin;
    y[idx] = parts.ptr[p][i * len + (r - begin)];
  }
}

__global__ void concat_bwd_data_kernel(size_t n, const float* __restrict__ dy, Parts<float*> parts) {
  const auto sample = static_cast<size_t>(parts.offset[parts.count]);
  DTNN_GRID_STRIDE(idx, n * sample) {
    const size_t i = idx / sample;
    const size_t r = idx - i * sample;
    const int p = part_at(parts, r);
    const auto begin = static_cast<size_t>(parts.offset[p]);
    const auto len = static_cast<size_t>(parts.offset[p + 1]) - begin;
    parts.ptr[p][i * len + (r - begin)] = dy[idx];
  }
}

}  // namespace

void sum_fixed_order(std::size_t count, int nsrc, const float* const* src, float* dst, cudaStream_t stream) {
  if (count == 0) return;
  if (nsrc <= 0) {
    fill_zero_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, dst);
    return;
  }
  sum_fixed_order_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, sources("sum_fixed_order", nsrc, src),
                                                                     dst);
}

void sum_fixed_order_relu(std::size_t count, int nsrc, const float* const* src, float* dst, cudaStream_t stream) {
  if (count == 0) return;
  if (nsrc <= 0) {
    fill_zero_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, dst);
    return;
  }
  sum_fixed_order_relu_kernel<<<blocks_for(count), kThreads, 0, stream>>>(
      count, sources("sum_fixed_order_relu", nsrc, src), dst);
}

void accumulate_fixed_order(std::size_t count, int nsrc, const float* const* src, float* dst, cudaStream_t stream) {
  if (count == 0 || nsrc <= 0) return;
  accumulate_fixed_order_kernel<<<blocks_for(count), kThreads, 0, stream>>>(
      count, sources("accumulate_fixed_order", nsrc, src), dst);
}

void concat_fwd(int n, int nparts, const float* const* parts, const std::int64_t* part_elems, float* y,
                cudaStream_t stream) {
  const Parts<const float*> p = parts_of("concat_fwd", nparts, parts, part_elems);
  const size_t count = static_cast<size_t>(n > 0 ? n : 0) * static_cast<size_t>(p.offset[nparts > 0 ? nparts : 0]);
  if (count == 0) return;
  concat_fwd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(static_cast<size_t>(n), p, y);
}

void concat_bwd_data(int n, int nparts, const float* dy, const std::int64_t* part_elems, float* const* parts,
                     cudaStream_t stream) {
  const Parts<float*> p = parts_of("concat_bwd_data", nparts, parts, part_elems);
  const size_t count = static_cast<size_t>(n > 0 ? n : 0) * static_cast<size_t>(p.offset[nparts > 0 ? nparts : 0]);
  if (count == 0) return;
  concat_bwd_data_kernel<<<blocks_for(count), kThreads, 0, stream>>>(static_cast<size_t>(n), dy, p);
}

}  // namespace dtnn::kernels::cuda
