// SPDX-License-Identifier: Apache-2.0
#include "models/buckets.hpp"

namespace dtnn {

int BucketPolicy::close() {
  open_elements_ = 0;
  open_gradients_ = 0;
  return 1;
}

int BucketPolicy::add(std::size_t elements) {
  open_elements_ += elements;
  ++open_gradients_;
  return open_elements_ * sizeof(float) >= options_.bytes_ ? close() : 0;
}

int BucketPolicy::layer_boundary(std::size_t to_come) {
  if (options_.tail_buckets_ == 0 || open_gradients_ == 0 || open_elements_ < to_come) return 0;
  return close();
}

int BucketPolicy::end_step() { return open_gradients_ > 0 ? close() : 0; }

std::vector<std::vector<std::size_t>> plan_buckets(const std::vector<std::vector<GradientSize>>& layers,
                                                   const BucketOptions& options) {
  std::size_t to_come = 0;
  for (const auto& layer : layers) {
    for (const GradientSize& g : layer) to_come += g.elements;
  }
  BucketPolicy policy(options);
  std::vector<std::vector<std::size_t>> buckets;
  std::vector<std::size_t> open;
  auto close = [&] {
    buckets.push_back(std::move(open));
    open.clear();
  };
  std::size_t index = 0;
  for (const auto& layer : layers) {
    for (const GradientSize& g : layer) {
      to_come -= g.elements;
      if (g.summed) {
        open.push_back(index);
        if (policy.add(g.elements)) close();
      }
      ++index;
    }
    if (policy.layer_boundary(to_come)) close();
  }
  if (policy.end_step()) close();
  return buckets;
}

}  // namespace dtnn
