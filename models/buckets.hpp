// SPDX-License-Identifier: Apache-2.0
// Gradient buckets of data-parallel training: which gradients are summed over the ranks together. Gradients join
// the open bucket in the order the backward pass finishes them; a bucket closes once it holds bytes() (PyTorch
// DDP's rule), and with tail buckets also at a layer boundary once it holds at least as many elements as the
// step's gradients still to come, so buckets shrink towards the first layers and the step's last reduction, which
// no backward computation is left to hide, is small. The rule sees sizes only, which depend on the model alone:
// every rank makes the same buckets, as matched collectives require.
#pragma once

#include <cstddef>
#include <vector>

namespace dtnn {

struct BucketOptions {
  BucketOptions& bytes(std::size_t b) { bytes_ = b; return *this; }
  // true: close at a layer boundary once the bucket holds as much as what is still to come; false: on size only
  // (as DDP).
  BucketOptions& tail_buckets(bool on) { tail_buckets_ = on; return *this; }
  std::size_t bytes_ = std::size_t{25} << 20;  // PyTorch DDP's default bucket
  bool tail_buckets_ = true;
};

// The rule, one decision at a time, as the backward pass of a step goes (one policy per step).
class BucketPolicy {
 public:
  explicit BucketPolicy(BucketOptions options) : options_(options) {}

  // A gradient of `elements` floats joins the open bucket. 1: the bucket closes after it (it reached bytes()).
  int add(std::size_t elements);
  // One layer's gradients were all added; `to_come` elements of the step's gradients remain. 1: the open bucket
  // closes here (tail buckets).
  int layer_boundary(std::size_t to_come);
  // The step's last gradient was added. 1: the open bucket, which holds gradients, closes.
  int end_step();

 private:
  int close();

  BucketOptions options_;
  std::size_t open_elements_ = 0;
  int open_gradients_ = 0;
};

// One gradient of a step, as plan_buckets sees it.
struct GradientSize {
  std::size_t elements = 0;
  int summed = 1;  // 0: already summed over the ranks (synchronised BatchNorm): in no bucket, yet still "to come"
};

// One step's buckets at once, by the rule above: `layers` holds each layer's gradients in the order the backward
// pass finishes them (last layer first). Returns the buckets in order, each as indices into the flattened list of
// gradients.
std::vector<std::vector<std::size_t>> plan_buckets(const std::vector<std::vector<GradientSize>>& layers,
                                                   const BucketOptions& options);

}  // namespace dtnn
