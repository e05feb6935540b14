// SPDX-License-Identifier: Apache-2.0
#include "codelets/relu.hpp"
#include "cuda_test_util.hpp"

namespace dtnn {
namespace {

using testing_cuda::compare_cpu_cuda;
using testing_cuda::random_tensor;

TEST(CudaReluTest, ForwardAndBackwardMatchCpu) {
  DTNN_REQUIRE_CUDA();
  Tensor x = random_tensor({37, 3, 5, 7}, 3, 1);
  Tensor dy = random_tensor({37, 3, 5, 7}, 3, 2);
  Tensor y({37, 3, 5, 7}, 3), dx({37, 3, 5, 7}, 3);
  const codelets::TaskTag tag{"relu"};
  compare_cpu_cuda(
      [&] {
        for (int t = 0; t < x.tiles(); ++t) {
          codelets::submit_relu_fwd(tag, x, y, t);
          codelets::submit_relu_bwd_data(tag, y, dy, dx, t);
        }
      },
      {&y, &dx}, 0.0, 0.0);
}

TEST(CudaReluTest, PastOneGridMatchesCpu) {
  DTNN_REQUIRE_CUDA();
  const Shape shape{1, testing_cuda::kPastOneGrid};
  Tensor x = random_tensor(shape, 1, 3);
  Tensor dy = random_tensor(shape, 1, 4);
  Tensor y(shape, 1), dx(shape, 1);
  const codelets::TaskTag tag{"relu"};
  compare_cpu_cuda(
      [&] {
        codelets::submit_relu_fwd(tag, x, y, 0);
        codelets::submit_relu_bwd_data(tag, y, dy, dx, 0);
      },
      {&y, &dx}, 0.0, 0.0);
}

// The ReLU fused after a residual Add: its gradient added to the other path's share of dx in one task.
TEST(CudaReluTest, BackwardAddedToTheOtherPathMatchesCpu) {
  DTNN_REQUIRE_CUDA();
  for (const Shape& shape : {Shape{37, 3, 5, 7}, Shape{1, testing_cuda::kPastOneGrid}}) {
    const int tiles = shape[0] > 1 ? 3 : 1;
    Tensor x = random_tensor(shape, tiles, 5);
    Tensor dy = random_tensor(shape, tiles, 6);
    Tensor other = random_tensor(shape, tiles, 7);
    Tensor y(shape, tiles), dx(shape, tiles);
    const codelets::TaskTag tag{"block"};
    compare_cpu_cuda(
        [&] {
          for (int t = 0; t < x.tiles(); ++t) {
            codelets::submit_relu_fwd(tag, x, y, t);
            codelets::submit_relu_bwd_data_add(tag, "bwd_data", y, dy, other, dx, t);
          }
        },
        {&y, &dx}, 0.0, 0.0);
  }
}

}  // namespace
}  // namespace dtnn
