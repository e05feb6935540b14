// SPDX-License-Identifier: Apache-2.0
// Thread-local working memory of the CPU kernels (convgemm's packing blocks, Winograd's transformed tiles).
#pragma once

#include <cstddef>
#include <memory>
#include <new>

namespace dtnn::kernels::cpu {

// 64-byte aligned floats that only grow, so that steady-state training allocates nothing.
class AlignedFloats {
 public:
  float* reserve(std::size_t count) {
    if (count > capacity_) {
      data_.reset(static_cast<float*>(::operator new (count * sizeof(float), std::align_val_t{64})));
      capacity_ = count;
    }
    return data_.get();
  }
  // Gives the memory back (the next reserve allocates again).
  void release() {
    data_.reset();
    capacity_ = 0;
  }

 private:
  struct Release {
    void operator()(float* p) const { ::operator delete (p, std::align_val_t{64}); }
  };
  std::unique_ptr<float, Release> data_;
  std::size_t capacity_ = 0;
};

}  // namespace dtnn::kernels::cpu
