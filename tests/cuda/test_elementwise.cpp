// SPDX-License-Identifier: Apache-2.0
// CUDA element-wise tasks against their CPU versions: activations, softmax, the fused losses, Add, concatenation,
// the option-A shortcut and copy. Tolerances: the tasks without arithmetic, and Add (the CPU's order of additions),
// must agree bitwise; the others differ where CUDA's expf, tanhf, expm1f and erfcf (at most 2 to 4 ulp) differ from
// glibc's, and where a row's double sum runs in a tree on the GPU instead of the CPU's order.
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include "codelets/activation.hpp"
#include "codelets/copy.hpp"
#include "codelets/cpu/kernels.hpp"
#include "codelets/loss.hpp"
#include "codelets/merge.hpp"
#include "codelets/shortcut_pad.hpp"
#include "codelets/softmax.hpp"
#include "cuda_test_util.hpp"

namespace dtnn {
namespace {

using testing_cuda::all_close;
using testing_cuda::poison_on_device;
using testing_cuda::random_values;
using testing_cuda::run_on;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor tensor_of(Shape shape, int tiles, const std::vector<float>& values) {
  Tensor t(std::move(shape), tiles);
  t.copy_from(values);
  return t;
}

// NaN and infinities match exactly (all_close lets an infinity pass against any infinity).
::testing::AssertionResult same_non_finite(const std::vector<float>& cpu, const std::vector<float>& gpu) {
  for (std::size_t i = 0; i < cpu.size() && i < gpu.size(); ++i) {
    if (std::isinf(cpu[i]) || std::isinf(gpu[i])) {
      if (cpu[i] != gpu[i]) {
        return ::testing::AssertionFailure() << "element " << i << ": cpu " << cpu[i] << ", cuda " << gpu[i];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// compare_cpu_cuda with the infinities checked too; the outputs are fully overwritten by `submit`.
void compare(const std::function<void()>& submit, const std::vector<Tensor*>& outputs, double rtol, double atol) {
  std::vector<std::vector<float>> cpu;
  run_on(runtime::Device::kCpu, submit);
  for (Tensor* t : outputs) cpu.push_back(t->to_vector());
  poison_on_device(outputs);  // a stale value must not pass for the CUDA result
  run_on(runtime::Device::kCuda, submit);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const std::vector<float> gpu = outputs[i]->to_vector();
    EXPECT_TRUE(all_close(cpu[i], gpu, rtol, atol)) << "output " << i;
    EXPECT_TRUE(same_non_finite(cpu[i], gpu)) << "output " << i;
  }
}

// Values in [lo, hi] with special values sprinkled at fixed places (none where `stride` is 0).
std::vector<float> values_with_specials(std::int64_t n, std::uint32_t seed, float lo, float hi,
                                        std::int64_t stride = 97) {
  std::vector<float> v = random_values(n, seed, lo, hi);
  const float specials[] = {kNaN, kInf, -kInf, -0.0f, 0.0f, 1e-40f, -1e-40f, 100.0f, -100.0f, 30.0f, -30.0f};
  if (stride > 0) {
    std::size_t k = 0;
    for (std::int64_t i = 5; i < n; i += stride, ++k) {
      v[static_cast<std::size_t>(i)] = specials[k % std::size(specials)];
    }
  }
  return v;
}

// ---- Activations ----

struct ActivationCase {
  const char* name;
  codelets::ActivationSpec spec;
};

TEST(CudaActivationTest, ForwardAndBackwardMatchCpu) {
  DTNN_REQUIRE_CUDA();
  const ActivationCase cases[] = {
      {"sigmoid", {codelets::ActivationKind::kSigmoid, 0.0f}},
      {"tanh", {codelets::ActivationKind::kTanh, 0.0f}},
      {"leaky_relu", {codelets::ActivationKind::kLeakyRelu, 0.1f}},
      {"elu", {codelets::ActivationKind::kElu, 1.3f}},
      {"gelu", {codelets::ActivationKind::kGelu, 0.0f}},
  };
  const Shape shape{37, 3, 5, 7};
  const std::int64_t n = numel(shape);
  Tensor x = tensor_of(shape, 3, values_with_specials(n, 11, -6.0f, 6.0f));
  Tensor dy = tensor_of(shape, 3, random_values(n, 12));
  for (const ActivationCase& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor y(shape, 3), dx(shape, 3);
    const codelets::TaskTag tag{c.name};
    // Forward alone first: the backward of sigmoid and tanh reads y, which CPU and CUDA compute each their own.
    compare([&] {
      for (int t = 0; t < x.tiles(); ++t) codelets::submit_activation_fwd(tag, c.spec, x, y, t);
    }, {&y}, 4e-6, 1e-30);
    compare([&] {
      for (int t = 0; t < x.tiles(); ++t) {
        codelets::submit_activation_fwd(tag, c.spec, x, y, t);
        codelets::submit_activation_bwd_data(tag, c.spec, x, y, dy, dx, t);
      }
    }, {&dx}, 4e-6, 5e-7);
  }
}

// One task per pass over more elements than one grid covers.
TEST(CudaActivationTest, PastOneGridMatchesCpu) {
  DTNN_REQUIRE_CUDA();
  const ActivationCase cases[] = {
      {"sigmoid", {codelets::ActivationKind::kSigmoid, 0.0f}},
      {"gelu", {codelets::ActivationKind::kGelu, 0.0f}},
  };
  const Shape shape{1, testing_cuda::kPastOneGrid};
  const std::int64_t n = numel(shape);
  Tensor x = tensor_of(shape, 1, values_with_specials(n, 13, -6.0f, 6.0f, 100003));
  Tensor dy = tensor_of(shape, 1, random_values(n, 14));
  for (const ActivationCase& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor y(shape, 1), dx(shape, 1);
    const codelets::TaskTag tag{c.name};
    compare([&] { codelets::submit_activation_fwd(tag, c.spec, x, y, 0); }, {&y}, 4e-6, 1e-30);
    compare([&] {
      codelets::submit_activation_fwd(tag, c.spec, x, y, 0);
      codelets::submit_activation_bwd_data(tag, c.spec, x, y, dy, dx, 0);
    }, {&dx}, 4e-6, 5e-7);
  }
}

// ---- Softmax ----

// Shapes that take each CUDA path: a thread per channel column (wide planes, or few channels) and a block per column
// (narrow planes with many channels).
TEST(CudaSoftmaxTest, ForwardAndBackwardMatchCpu) {
  DTNN_REQUIRE_CUDA();
  struct Case {
    Shape shape;
    int tiles;
  };
  const Case cases[] = {{{29, 10}, 3}, {{13, 1000}, 3}, {{37, 6, 5, 7}, 3}, {{11, 70, 3, 3}, 3}, {{4, 1}, 2}};
  std::uint32_t seed = 20;
  for (const Case& c : cases) {
    SCOPED_TRACE(to_string(c.shape));
    const auto channels = static_cast<int>(c.shape[1]);
    const std::int64_t n = numel(c.shape);
    Tensor x = tensor_of(c.shape, c.tiles, values_with_specials(n, ++seed, -20.0f, 20.0f, 331));
    Tensor dy = tensor_of(c.shape, c.tiles, random_values(n, ++seed));
    Tensor y(c.shape, c.tiles), dx(c.shape, c.tiles);
    const codelets::TaskTag tag{"softmax"};
    compare([&] {
      for (int t = 0; t < x.tiles(); ++t) codelets::submit_softmax_fwd(tag, channels, x, y, t);
    }, {&y}, 4e-6, 1e-30);
    // dy - sum(dy * y) cancels where one channel dominates, hence an absolute tolerance.
    compare([&] {
      for (int t = 0; t < x.tiles(); ++t) {
        codelets::submit_softmax_fwd(tag, channels, x, y, t);
        codelets::submit_softmax_bwd_data(tag, channels, y, dy, dx, t);
      }
    }, {&dx}, 1e-5, 1e-6);
  }
}

// ---- Losses ----

// Logits on a coarse grid, so that rows hold ties (argmax and top-5 must break them as the CPU does), a row of equal
// logits, and targets one-hot, smoothed, or with a tie of their own.
std::vector<float> tied_logits(int n, int classes, std::uint32_t seed, float range) {
  std::vector<float> v = random_values(static_cast<std::int64_t>(n) * classes, seed, -range, range);
  for (float& x : v) x = std::round(x * 4.0f) / 4.0f;
  for (int j = 0; j < classes; ++j) v[static_cast<std::size_t>(j)] = 0.5f;  // row 0: all equal
  return v;
}

std::vector<float> categorical_targets(int n, int classes, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> label(0, classes - 1);
  std::vector<float> t(static_cast<std::size_t>(n) * classes, 0.0f);
  for (int i = 0; i < n; ++i) {
    float* row = t.data() + static_cast<std::size_t>(i) * classes;
    const int l = label(gen);
    if (i % 5 == 3 && classes > 1) {
      // Label smoothing 0.1.
      for (int j = 0; j < classes; ++j) row[j] = 0.1f / static_cast<float>(classes);
      row[l] += 0.9f;
    } else if (i % 7 == 4 && classes > 1) {
      row[l] = 0.5f;
      row[(l + 1) % classes] = 0.5f;
    } else {
      row[l] = 1.0f;
    }
  }
  return t;
}

std::vector<float> binary_targets(int n, int classes, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::bernoulli_distribution on(0.3);
  std::vector<float> t(static_cast<std::size_t>(n) * classes);
  for (float& v : t) v = on(gen) ? 1.0f : 0.0f;
  return t;
}

void compare_loss(codelets::LossKind kind, int n, int classes, int tiles, std::vector<float> logit_values,
                  const std::vector<float>& target_values) {
  Tensor logits = tensor_of({n, classes}, tiles, logit_values);
  Tensor targets = tensor_of({n, classes}, tiles, target_values);
  Tensor dlogits({n, classes}, tiles);
  Tensor stats({tiles, kLossStats}, tiles);
  const float grad_scale = 1.0f / static_cast<float>(n);
  // Metrics: counts must agree exactly (rtol 1e-5 of at most n is below 1); loss and errors are double sums.
  // dlogits: (p - t) / n with p from expf, to ~3e-7 of p, where p - t may cancel: an absolute error well below
  // the scale (>= 1/300 here) times any misplaced value.
  compare([&] {
    for (int t = 0; t < tiles; ++t) {
      codelets::submit_loss_fwd_bwd({"loss"}, kind, logits, targets, grad_scale, dlogits, stats, t);
    }
  }, {&dlogits, &stats}, 1e-5, 1e-7);
}

TEST(CudaLossTest, SoftmaxCrossEntropyMatchesCpu) {
  DTNN_REQUIRE_CUDA();
  struct Case {
    int n, classes, tiles;
  };
  for (const Case c : {Case{37, 10, 3}, Case{9, 1000, 2}, Case{5, 1, 2}, Case{300, 7, 1}}) {
    SCOPED_TRACE(testing::Message() << c.n << " x " << c.classes);
    compare_loss(codelets::LossKind::kCategoricalCrossEntropy, c.n, c.classes, c.tiles,
                 tied_logits(c.n, c.classes, 31, 3.0f), categorical_targets(c.n, c.classes, 32));
  }
}

TEST(CudaLossTest, SigmoidBinaryCrossEntropyMatchesCpu) {
  DTNN_REQUIRE_CUDA();
  struct Case {
    int n, classes, tiles;
  };
  for (const Case c : {Case{37, 10, 3}, Case{9, 1000, 2}, Case{5, 1, 2}}) {
    SCOPED_TRACE(testing::Message() << c.n << " x " << c.classes);
    std::vector<float> z = tied_logits(c.n, c.classes, 41, 8.0f);
    for (std::size_t i = 7; i < z.size(); i += 13) z[i] = i % 2 ? 40.0f : -40.0f;
    compare_loss(codelets::LossKind::kBinaryCrossEntropy, c.n, c.classes, c.tiles, z,
                 binary_targets(c.n, c.classes, 42));
  }
}

// A NaN logit: at index 0 the argmax is 0 whatever follows, elsewhere it is skipped; the row's loss is NaN.
TEST(CudaLossTest, NanLogitsGiveTheCpuMetrics) {
  DTNN_REQUIRE_CUDA();
  const int n = 6, classes = 12;
  std::vector<float> z = tied_logits(n, classes, 51, 3.0f);
  z[static_cast<std::size_t>(1 * classes + 0)] = kNaN;
  z[static_cast<std::size_t>(2 * classes + 5)] = kNaN;
  z[static_cast<std::size_t>(4 * classes + 3)] = kInf;
  for (const codelets::LossKind kind :
       {codelets::LossKind::kCategoricalCrossEntropy, codelets::LossKind::kBinaryCrossEntropy}) {
    SCOPED_TRACE(codelets::to_string(kind));
    compare_loss(kind, n, classes, 2, z,
                 kind == codelets::LossKind::kBinaryCrossEntropy ? binary_targets(n, classes, 52)
                                                                  : categorical_targets(n, classes, 52));
  }
}

// ---- Add, concatenation, shortcut, copy: bitwise ----

TEST(CudaMergeTest, AddMatchesCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  // 9 inputs take two tasks: a sum of kMaxMergeParts, then an accumulation of the rest.
  for (const int count : {1, 3, codelets::kMaxMergeParts, 9}) {
    for (const Shape& shape : {Shape{37, 3, 5, 7}, Shape{5, 1001}}) {
      SCOPED_TRACE(testing::Message() << count << " inputs of " << to_string(shape));
      std::vector<Tensor> inputs;
      std::vector<const Tensor*> ptrs;
      for (int i = 0; i < count; ++i) {
        inputs.push_back(tensor_of(shape, 3, values_with_specials(numel(shape), 60 + i, -1.0f, 1.0f,
                                                                  i == 1 ? 211 : 0)));
      }
      for (const Tensor& t : inputs) ptrs.push_back(&t);
      Tensor out(shape, 3);
      compare([&] {
        for (int t = 0; t < out.tiles(); ++t) codelets::submit_add({"add"}, "add", ptrs, out, t);
      }, {&out}, 0.0, 0.0);
    }
  }
}

// The residual Add with its ReLU fused (add_relu): one task of up to kMaxMergeParts inputs.
TEST(CudaMergeTest, AddWithReluMatchesCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  for (const int count : {1, 2, codelets::kMaxMergeParts}) {
    for (const Shape& shape : {Shape{37, 3, 5, 7}, Shape{1, testing_cuda::kPastOneGrid}}) {
      SCOPED_TRACE(testing::Message() << count << " inputs of " << to_string(shape));
      const int tiles = shape[0] > 1 ? 3 : 1;
      std::vector<Tensor> inputs;
      std::vector<const Tensor*> ptrs;
      for (int i = 0; i < count; ++i) {
        inputs.push_back(tensor_of(shape, tiles, values_with_specials(numel(shape), 80 + i, -1.0f, 1.0f,
                                                                      i == 1 ? 211 : 0)));
      }
      for (const Tensor& t : inputs) ptrs.push_back(&t);
      Tensor out(shape, tiles);
      compare([&] {
        for (int t = 0; t < out.tiles(); ++t) codelets::submit_add_relu({"add"}, ptrs, out, t);
      }, {&out}, 0.0, 0.0);
    }
  }
}

TEST(CudaMergeTest, ConcatForwardAndBackwardMatchCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  struct Case {
    std::vector<Shape> parts;
    Shape whole;
    int tiles;
  };
  const Case cases[] = {
      {{{37, 2, 5, 7}, {37, 1, 5, 7}, {37, 4, 5, 7}}, {37, 7, 5, 7}, 3},
      {{{9, 3}, {9, 1}, {9, 11}}, {9, 15}, 2},
      {{{5, 1}, {5, 2}, {5, 3}, {5, 4}, {5, 5}, {5, 6}, {5, 7}}, {5, 28}, 2},
      {{{4, 6, 3, 3}}, {4, 6, 3, 3}, 2},
  };
  std::uint32_t seed = 70;
  for (const Case& c : cases) {
    SCOPED_TRACE(to_string(c.whole));
    std::vector<Tensor> parts, grads;
    std::vector<const Tensor*> in;
    std::vector<Tensor*> out;
    for (const Shape& s : c.parts) {
      parts.push_back(tensor_of(s, c.tiles, random_values(numel(s), ++seed)));
      grads.emplace_back(s, c.tiles);
    }
    for (const Tensor& p : parts) in.push_back(&p);
    for (Tensor& g : grads) out.push_back(&g);
    Tensor y(c.whole, c.tiles);
    Tensor dy = tensor_of(c.whole, c.tiles, random_values(numel(c.whole), ++seed));
    const codelets::TaskTag tag{"concat"};
    compare([&] {
      for (int t = 0; t < y.tiles(); ++t) codelets::submit_concat_fwd(tag, in, y, t);
    }, {&y}, 0.0, 0.0);
    compare([&] {
      for (int t = 0; t < dy.tiles(); ++t) codelets::submit_concat_bwd_data(tag, dy, out, t);
    }, out, 0.0, 0.0);
  }
}

TEST(CudaMergeTest, PastOneGridMatchesCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  const std::int64_t n = testing_cuda::kPastOneGrid;
  std::vector<Tensor> inputs;
  std::vector<const Tensor*> ptrs;
  for (int i = 0; i < 3; ++i) inputs.push_back(tensor_of({1, n}, 1, random_values(n, 65 + i)));
  for (const Tensor& t : inputs) ptrs.push_back(&t);
  Tensor out({1, n}, 1);
  compare([&] { codelets::submit_add({"add"}, "add", ptrs, out, 0); }, {&out}, 0.0, 0.0);
  // Concatenation and its backward, the whole past one grid, a part that is not.
  const Tensor& a = inputs[0];
  Tensor b = tensor_of({1, 7}, 1, random_values(7, 68));
  Tensor y({1, n + 7}, 1);
  Tensor dy = tensor_of({1, n + 7}, 1, random_values(n + 7, 69));
  Tensor da({1, n}, 1), db({1, 7}, 1);
  const codelets::TaskTag tag{"concat"};
  compare([&] { codelets::submit_concat_fwd(tag, {&a, &b}, y, 0); }, {&y}, 0.0, 0.0);
  compare([&] { codelets::submit_concat_bwd_data(tag, dy, {&da, &db}, 0); }, {&da, &db}, 0.0, 0.0);
}

TEST(CudaShortcutPadTest, ForwardAndBackwardMatchCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  struct Case {
    int n, c, h, w, k, stride, tiles;
  };
  std::uint32_t seed = 80;
  for (const Case& c : {Case{37, 3, 7, 5, 7, 2, 3}, Case{6, 4, 4, 4, 4, 1, 2}, Case{5, 2, 9, 10, 6, 3, 2},
                        Case{4, 16, 8, 8, 32, 2, 4}}) {
    ShortcutPadShape sh{1, c.c, c.h, c.w, c.k, c.stride};
    SCOPED_TRACE(testing::Message() << c.c << "x" << c.h << "x" << c.w << " -> " << c.k << " stride " << c.stride);
    const Shape in{c.n, c.c, c.h, c.w};
    const Shape outs{c.n, c.k, sh.out_h(), sh.out_w()};
    Tensor x = tensor_of(in, c.tiles, random_values(numel(in), ++seed));
    Tensor dy = tensor_of(outs, c.tiles, random_values(numel(outs), ++seed));
    Tensor y(outs, c.tiles), dx(in, c.tiles);
    const codelets::TaskTag tag{"shortcut"};
    compare([&] {
      for (int t = 0; t < x.tiles(); ++t) {
        codelets::submit_shortcut_pad_fwd(tag, sh, x, y, t);
        codelets::submit_shortcut_pad_bwd_data(tag, sh, dy, dx, t);
      }
    }, {&y, &dx}, 0.0, 0.0);
  }
}

TEST(CudaShortcutPadTest, PastOneGridMatchesCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  // 32 channels of 512 x 2050 to 64 of 256 x 1025: 16.8 M outputs, 33.6 M inputs.
  const ShortcutPadShape sh{1, 32, 512, 2050, 64, 2};
  const Shape in{1, 32, 512, 2050};
  const Shape outs{1, 64, sh.out_h(), sh.out_w()};
  ASSERT_GT(numel(outs), testing_cuda::kOneGrid);
  Tensor x = tensor_of(in, 1, random_values(numel(in), 85));
  Tensor dy = tensor_of(outs, 1, random_values(numel(outs), 86));
  Tensor y(outs, 1), dx(in, 1);
  const codelets::TaskTag tag{"shortcut"};
  compare([&] {
    codelets::submit_shortcut_pad_fwd(tag, sh, x, y, 0);
    codelets::submit_shortcut_pad_bwd_data(tag, sh, dy, dx, 0);
  }, {&y, &dx}, 0.0, 0.0);
}

TEST(CudaCopyTest, MatchesCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  const Shape from{37, 3, 5, 7};
  Tensor src = tensor_of(from, 3, values_with_specials(numel(from), 90, -1.0f, 1.0f));
  Tensor dst({37, 105}, 3);
  compare([&] {
    for (int t = 0; t < src.tiles(); ++t) codelets::submit_copy({"flatten"}, "fwd", src, dst, t);
  }, {&dst}, 0.0, 0.0);
}

TEST(CudaCopyTest, PastOneGridMatchesCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  const std::int64_t n = testing_cuda::kPastOneGrid;
  Tensor src = tensor_of({1, n}, 1, values_with_specials(n, 91, -1.0f, 1.0f, 100003));
  Tensor dst({1, n}, 1);
  compare([&] { codelets::submit_copy({"flatten"}, "fwd", src, dst, 0); }, {&dst}, 0.0, 0.0);
}

}  // namespace
}  // namespace dtnn
