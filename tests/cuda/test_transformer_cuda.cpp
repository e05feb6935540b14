// SPDX-License-Identifier: Apache-2.0
// The transformer codelets on a CUDA worker against the same tasks on a CPU worker: attention (causal, key padding,
// dropout), LayerNorm, embedding, positional table, GELU (tanh), token cross-entropy, the in-order dense weight
// gradient, gradient clipping; then whole training steps of gpt_tiny (without and with dropout).
//
// What must agree how: the kernels without a reduction, and the gradients that add rows in batch order with the CPU's
// fp32 operations (LayerNorm's, the tables', the in-order bias), bit for bit; the GEMMs (cuBLAS against BLIS) and the
// row reductions that run in a tree on the GPU, to a tolerance: 1e-4 of each output's largest magnitude where GEMMs
// sum up to a few hundred products of values in [-1, 1] (rounding is ~1e-6 of that scale, a wrong index or a missing
// term O(1) of it), tighter where only a double sum's rounding differs. And every CUDA result repeats bit for bit on a
// second run, and does not change with the tile count where the design says so (docs/design.md).
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "codelets/activation.hpp"
#include "codelets/attention.hpp"
#include "codelets/dense.hpp"
#include "codelets/embedding.hpp"
#include "codelets/grad_clip.hpp"
#include "codelets/layer_norm.hpp"
#include "codelets/loss.hpp"
#include "codelets/positional.hpp"
#include "core/loss_stats.hpp"
#include "cuda_test_util.hpp"
#include "io/dataset.hpp"
#include "models/optimizers.hpp"
#include "models/training.hpp"
#include "models/zoo.hpp"

namespace dtnn {
namespace {

using testing_cuda::all_close;
using testing_cuda::random_tensor;
using testing_cuda::random_values;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kGemmTol = 1e-4;

using Values = std::vector<std::vector<float>>;

// Runs `submit` with its tasks on workers of one kind and returns `outputs`. Every output is poisoned first where
// the tasks will write it (NaN on the host for the CPU, testing_cuda's poison on the GPU), so that an element a
// body leaves unwritten cannot pass; then the read-write ones get their starting values back from `reset` (an empty
// entry: a write-only output).
Values run_on(runtime::Device device, const std::function<void()>& submit, const std::vector<Tensor*>& outputs,
              const Values& reset = {}) {
  if (device == runtime::Device::kCuda) {
    testing_cuda::poison_on_device(outputs);
  } else {
    for (Tensor* t : outputs) t->copy_from(std::vector<float>(static_cast<std::size_t>(t->numel()), kNaN));
  }
  for (std::size_t i = 0; i < reset.size() && i < outputs.size(); ++i) {
    if (!reset[i].empty()) outputs[i]->copy_from(reset[i]);
  }
  testing_cuda::run_on(device, submit);
  Values values;
  for (Tensor* t : outputs) values.push_back(t->to_vector());
  return values;
}

// Equal bits, or NaN on both sides (a NaN's payload is no part of the contract).
::testing::AssertionResult same_bits(const std::vector<float>& cpu, const std::vector<float>& gpu) {
  if (cpu.size() != gpu.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << cpu.size() << " vs " << gpu.size();
  }
  std::size_t differing = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const bool same = std::bit_cast<std::uint32_t>(cpu[i]) == std::bit_cast<std::uint32_t>(gpu[i]) ||
                      (std::isnan(cpu[i]) && std::isnan(gpu[i]));
    if (!same && differing++ == 0) first = i;
  }
  if (differing > 0) {
    return ::testing::AssertionFailure() << differing << " of " << cpu.size() << " values differ, first at " << first
                                         << ": " << cpu[first] << " vs " << gpu[first];
  }
  return ::testing::AssertionSuccess();
}

double largest_magnitude(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

// How one output is compared: bitwise, or within rel of its largest CPU magnitude (plus atol).
struct Check {
  const char* name;
  int bitwise;
  double rel = 0.0;
  double atol = 0.0;
};

// CPU, then CUDA twice: each output against the CPU's as its Check says, and the second CUDA run against the first
// bit for bit.
void compare(const std::function<void()>& submit, const std::vector<Tensor*>& outputs,
             const std::vector<Check>& checks, const Values& reset = {}) {
  ASSERT_EQ(outputs.size(), checks.size());
  const Values cpu = run_on(runtime::Device::kCpu, submit, outputs, reset);
  const Values gpu = run_on(runtime::Device::kCuda, submit, outputs, reset);
  const Values again = run_on(runtime::Device::kCuda, submit, outputs, reset);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Check& c = checks[i];
    if (c.bitwise != 0) {
      EXPECT_TRUE(same_bits(cpu[i], gpu[i])) << c.name;
    } else {
      const double scale = largest_magnitude(cpu[i]);
      EXPECT_TRUE(all_close(cpu[i], gpu[i], c.rel, c.rel * scale + c.atol)) << c.name << " (scale " << scale << ")";
    }
    EXPECT_TRUE(same_bits(gpu[i], again[i])) << c.name << ": two CUDA runs differ";
  }
}

Tensor ids_tensor(Shape shape, int tiles, const std::vector<std::int32_t>& ids) {
  Tensor t(std::move(shape), TensorOptions().dtype(DType::kInt32).tiles(tiles));
  t.copy_from_values<std::int32_t>(ids);
  return t;
}

Tensor tensor_of(Shape shape, int tiles, const std::vector<float>& values) {
  Tensor t(std::move(shape), tiles);
  t.copy_from(values);
  return t;
}

// ---- Attention ----

struct AttentionCase {
  const char* name;
  int n;
  int tiles;
  int seq;
  int heads;
  int head_dim;
  int causal;
  double dropout;  // 0: none
  int masked;      // a key-padding mask: sample 0 pads its last keys, sample 1 every key, the others none
};

AttentionShape shape_of(const AttentionCase& c) {
  AttentionShape a;
  a.seq = c.seq;
  a.heads = c.heads;
  a.head_dim = c.head_dim;
  a.causal = c.causal;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  return a;
}

std::vector<std::int32_t> padding_of(int n, int seq) {
  std::vector<std::int32_t> pad(static_cast<std::size_t>(n * seq), 0);
  for (int s = 0; s < seq; ++s) {
    if (s >= seq - 3) pad[static_cast<std::size_t>(s)] = 1;
    if (n > 1) pad[static_cast<std::size_t>(seq + s)] = 1;
  }
  return pad;
}

void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

// seq 33 and 70 take a warp's lanes past one key each; 7 heads' widths are no multiple of anything.
const AttentionCase kAttentionCases[] = {
    {"Plain", 3, 2, 7, 2, 4, 0, 0.0, 0},
    {"Causal", 4, 3, 33, 3, 8, 1, 0.0, 0},
    {"CausalDropout", 2, 2, 16, 2, 16, 1, 0.1, 0},
    {"Masked", 4, 3, 33, 2, 5, 0, 0.0, 1},
    {"MaskedCausalDropout", 3, 1, 70, 4, 6, 1, 0.2, 1},
    {"OneHeadOneKey", 2, 2, 1, 1, 3, 1, 0.3, 0},
};

class CudaAttentionTest : public ::testing::TestWithParam<AttentionCase> {};

// Forward (probabilities before dropout, context) and backward-data (dq, dk, dv side by side) on several tiles.
TEST_P(CudaAttentionTest, ForwardAndBackwardMatchCpu) {
  DTNN_REQUIRE_CUDA();
  const AttentionCase& c = GetParam();
  const AttentionShape a = shape_of(c);
  const std::int64_t e = static_cast<std::int64_t>(c.heads) * c.head_dim;
  Tensor qkv = random_tensor({c.n, c.seq, 3 * e}, c.tiles, 31);
  Tensor dctx = random_tensor({c.n, c.seq, e}, c.tiles, 32);
  Tensor pad = ids_tensor({c.n, c.seq}, c.tiles, padding_of(c.n, c.seq));
  Tensor probs({c.n, c.heads, c.seq, c.seq}, c.tiles), ctx({c.n, c.seq, e}, c.tiles);
  Tensor dqkv({c.n, c.seq, 3 * e}, c.tiles);
  const codelets::DropoutDraw draw{77, 5, c.dropout};
  const codelets::DropoutDraw* drop = c.dropout > 0.0 ? &draw : nullptr;
  const codelets::TaskTag tag{c.name};
  compare(
      [&] {
        for (int t = 0; t < c.tiles; ++t) {
          codelets::submit_attention_fwd(tag, a, drop, qkv, probs, ctx, t, c.masked != 0 ? &pad : nullptr);
          codelets::submit_attention_bwd_data(tag, a, drop, qkv, probs, dctx, dqkv, t);
        }
      },
      {&probs, &ctx, &dqkv},
      {{"probs", 0, kGemmTol, 1e-7}, {"ctx", 0, kGemmTol, 1e-7}, {"dqkv", 0, kGemmTol, 1e-7}});
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttentionTest, ::testing::ValuesIn(kAttentionCases),
                         [](const ::testing::TestParamInfo<AttentionCase>& info) {
                           return std::string(info.param.name);
                         });

// A sample's CUDA results do not depend on the tile holding it: 1 tile against 3, bit for bit (seq and E even, as
// codelets/cuda/attention.hpp asks).
TEST(CudaAttentionTileTest, TheTileCountChangesNoBit) {
  DTNN_REQUIRE_CUDA();
  const AttentionCase c{"tiles", 5, 3, 12, 2, 4, 1, 0.1, 1};
  const AttentionShape a = shape_of(c);
  const std::int64_t e = static_cast<std::int64_t>(c.heads) * c.head_dim;
  const std::vector<float> qkv_values = random_values(c.n * c.seq * 3 * e, 41);
  const std::vector<float> dctx_values = random_values(c.n * c.seq * e, 42);
  const codelets::DropoutDraw draw{3, 9, c.dropout};
  auto run = [&](int tiles) {
    Tensor qkv = tensor_of({c.n, c.seq, 3 * e}, tiles, qkv_values);
    Tensor dctx = tensor_of({c.n, c.seq, e}, tiles, dctx_values);
    Tensor pad = ids_tensor({c.n, c.seq}, tiles, padding_of(c.n, c.seq));
    Tensor probs({c.n, c.heads, c.seq, c.seq}, tiles), ctx({c.n, c.seq, e}, tiles), dqkv({c.n, c.seq, 3 * e}, tiles);
    return run_on(
        runtime::Device::kCuda,
        [&] {
          for (int t = 0; t < tiles; ++t) {
            codelets::submit_attention_fwd({"attn"}, a, &draw, qkv, probs, ctx, t, &pad);
            codelets::submit_attention_bwd_data({"attn"}, a, &draw, qkv, probs, dctx, dqkv, t);
          }
        },
        {&probs, &ctx, &dqkv});
  };
  const Values one = run(1);
  const Values three = run(3);
  for (std::size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(same_bits(one[i], three[i])) << "output " << i;
}

// ---- LayerNorm ----

struct LayerNormCase {
  Shape shape;  // (n, positions, width)
  int tiles;
  int affine;
};

// Every pass on several tiles: the row statistics are double sums in a tree on the GPU, so a mean or rstd may round
// to the neighbouring float (and everything downstream by as little).
TEST(CudaLayerNormTest, AllPassesMatchCpu) {
  DTNN_REQUIRE_CUDA();
  for (const LayerNormCase& k : {LayerNormCase{{5, 3, 37}, 3, 1}, LayerNormCase{{4, 6, 100}, 2, 0},
                                 LayerNormCase{{3, 2, 8}, 3, 1}, LayerNormCase{{2, 5, 1}, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << to_string(k.shape) << ", " << k.tiles << " tiles, affine " << k.affine);
    const std::int64_t width = k.shape[2];
    Tensor x = random_tensor(k.shape, k.tiles, 51, -1.0f, 3.0f);
    Tensor dy = random_tensor(k.shape, k.tiles, 52);
    Tensor w = random_tensor({width}, 1, 53, 0.5f, 1.5f);
    Tensor b = random_tensor({width}, 1, 54);
    Tensor y(k.shape, k.tiles), dx(k.shape, k.tiles), stats({k.shape[0], k.shape[1], 2}, k.tiles);
    Tensor dw({width}), db({width});
    const codelets::TaskTag tag{"ln"};
    const Tensor* wp = k.affine != 0 ? &w : nullptr;
    const Tensor* bp = k.affine != 0 ? &b : nullptr;
    compare(
        [&] {
          for (int t = 0; t < k.tiles; ++t) {
            codelets::submit_layer_norm_fwd(tag, 1e-5f, x, wp, bp, y, stats, t);
            codelets::submit_layer_norm_bwd_data(tag, x, stats, wp, dy, dx, t);
            codelets::submit_layer_norm_bwd_weights(tag, x, stats, dy, dw, db, t);
          }
        },
        {&y, &stats, &dx, &dw, &db},
        {{"y", 0, 1e-5, 1e-7}, {"stats", 0, 1e-6, 1e-7}, {"dx", 0, 1e-5, 1e-7}, {"dw", 0, 1e-5, 1e-7},
         {"db", 1}});
  }
}

// Given the same statistics, the weight gradients are the CPU's bits: the rows of every tile added in batch order.
TEST(CudaLayerNormTest, WeightGradientsFromGivenStatisticsMatchCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  const Shape shape{7, 3, 45};
  const int tiles = 3;
  Tensor x = random_tensor(shape, tiles, 61, -2.0f, 2.0f);
  Tensor dy = random_tensor(shape, tiles, 62);
  std::vector<float> st = random_values(7 * 3 * 2, 63, 0.5f, 2.0f);
  for (std::size_t i = 0; i < st.size(); i += 2) st[i] -= 1.25f;  // means around 0, rstd in [0.5, 2]
  Tensor stats = tensor_of({7, 3, 2}, tiles, st);
  Tensor dw({45}), db({45});
  compare(
      [&] {
        for (int t = 0; t < tiles; ++t) codelets::submit_layer_norm_bwd_weights({"ln"}, x, stats, dy, dw, db, t);
      },
      {&dw, &db}, {{"dw", 1}, {"db", 1}});
}

// ---- Embedding and the positional table ----

// Repeated ids, padding_idx rows (no gradient), three tiles; the gradient written from zeros and added onto a tied
// head's (onto_existing).
TEST(CudaEmbeddingTest, LookupAndTableGradientMatchCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  const int n = 7, seq = 5, num = 23, dim = 37, padding_idx = 4, tiles = 3;
  std::vector<std::int32_t> id_values(static_cast<std::size_t>(n * seq));
  for (std::size_t i = 0; i < id_values.size(); ++i) id_values[i] = static_cast<std::int32_t>((i * 7 + i / 3) % num);
  id_values[3] = padding_idx;
  Tensor ids = ids_tensor({n, seq}, tiles, id_values);
  Tensor w = random_tensor({num, dim}, 1, 71);
  Tensor dy = random_tensor({n, seq, dim}, tiles, 72);
  Tensor y({n, seq, dim}, tiles), dw({num, dim}), dw_onto({num, dim});
  const std::vector<float> existing = random_values(num * dim, 73);
  const codelets::TaskTag tag{"wte"};
  compare(
      [&] {
        for (int t = 0; t < tiles; ++t) {
          codelets::submit_embedding_fwd(tag, ids, w, y, t);
          codelets::submit_embedding_bwd_weights(tag, ids, dy, padding_idx, dw, t);
          codelets::submit_embedding_bwd_weights(tag, ids, dy, -1, dw_onto, t, 1);
        }
      },
      {&y, &dw, &dw_onto}, {{"y", 1}, {"dw", 1}, {"dw onto existing", 1}}, {{}, {}, existing});
}

// An id outside the table cannot throw on the GPU (the CPU's DataError): its row reads NaN, and the gradient skips
// it, as the CPU's does.
TEST(CudaEmbeddingTest, AnIdOutsideTheTableGivesANanRowAndNoGradient) {
  DTNN_REQUIRE_CUDA();
  const int rows = 4, num = 6, dim = 3;
  const std::vector<std::int32_t> id_values{2, num + 5, -1, 2};
  Tensor ids = ids_tensor({rows, 1}, 1, id_values);
  const std::vector<float> table = random_values(num * dim, 81);
  Tensor w = tensor_of({num, dim}, 1, table);
  const std::vector<float> g = random_values(rows * dim, 82);
  Tensor dy = tensor_of({rows, 1, dim}, 1, g);
  Tensor y({rows, 1, dim}, 1), dw({num, dim});
  const Values got = run_on(
      runtime::Device::kCuda,
      [&] {
        codelets::submit_embedding_fwd({"wte"}, ids, w, y, 0);
        codelets::submit_embedding_bwd_weights({"wte"}, ids, dy, -1, dw, 0);
      },
      {&y, &dw});
  std::vector<float> want_y(static_cast<std::size_t>(rows * dim), kNaN);
  std::vector<float> want_dw(static_cast<std::size_t>(num * dim), 0.0f);
  for (int i : {0, 3}) {
    for (int j = 0; j < dim; ++j) {
      want_y[static_cast<std::size_t>(i * dim + j)] = table[static_cast<std::size_t>(2 * dim + j)];
      want_dw[static_cast<std::size_t>(2 * dim + j)] += g[static_cast<std::size_t>(i * dim + j)];
    }
  }
  EXPECT_TRUE(same_bits(want_y, got[0]));
  EXPECT_TRUE(same_bits(want_dw, got[1]));
}

// The table added to each sample's positions, and its gradient (rows past seq zero) summed in batch order.
TEST(CudaPositionalTest, AddAndTableGradientMatchCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  const int n = 5, seq = 6, max_len = 9, dim = 11, tiles = 3;
  Tensor x = random_tensor({n, seq, dim}, tiles, 91);
  Tensor table = random_tensor({max_len, dim}, 1, 92);
  Tensor dy = random_tensor({n, seq, dim}, tiles, 93);
  Tensor y({n, seq, dim}, tiles), dw({max_len, dim});
  compare(
      [&] {
        for (int t = 0; t < tiles; ++t) {
          codelets::submit_positional_add_fwd({"wpe"}, x, table, y, t);
          codelets::submit_positional_bwd_weights({"wpe"}, dy, dw, t);
        }
      },
      {&y, &dw}, {{"y", 1}, {"dw", 1}});
}

// ---- GELU (tanh) ----

// GPT-2's activation, in the CPU's form x / (1 + exp(-2u)): expf against the CPU's polynomial exp (a few ulp) and
// the products the two fuse differently.
TEST(CudaGeluTanhTest, ForwardAndBackwardMatchCpu) {
  DTNN_REQUIRE_CUDA();
  const Shape shape{13, 8, 33};
  const std::int64_t n = 13 * 8 * 33;
  std::vector<float> xv = random_values(n, 101, -6.0f, 6.0f);
  xv[0] = 0.0f;
  xv[1] = -0.0f;
  xv[2] = 30.0f;
  xv[3] = -30.0f;
  Tensor x = tensor_of(shape, 3, xv);
  Tensor dy = random_tensor(shape, 3, 102);
  Tensor y(shape, 3), dx(shape, 3);
  const codelets::ActivationSpec spec{codelets::ActivationKind::kGeluTanh, 0.0f};
  compare(
      [&] {
        for (int t = 0; t < 3; ++t) {
          codelets::submit_activation_fwd({"gelu"}, spec, x, y, t);
          codelets::submit_activation_bwd_data({"gelu"}, spec, x, y, dy, dx, t);
        }
      },
      {&y, &dx}, {{"y", 0, 4e-6, 1e-30}, {"dx", 0, 4e-6, 5e-7}});
}

// ---- Token cross-entropy ----

struct TokenLossCase {
  int n;
  int seq;
  int vocab;
  int tiles;
  float smoothing;
};

// Targets with ignored positions, label smoothing or not, vocabularies under and over a block's threads; the stats
// (counts exact, loss and errors double sums) and the gradient. Ties among the logits (a coarse grid) make the
// argmax's first-index rule count.
TEST(CudaTokenLossTest, MatchesCpuWithIgnoredTargetsAndSmoothing) {
  DTNN_REQUIRE_CUDA();
  for (const TokenLossCase& k : {TokenLossCase{3, 7, 11, 2, 0.0f}, TokenLossCase{4, 5, 300, 3, 0.1f},
                                 TokenLossCase{2, 9, 129, 1, 1.0f}}) {
    SCOPED_TRACE(::testing::Message() << k.n << " x " << k.seq << " over " << k.vocab << ", smoothing " << k.smoothing);
    const std::int64_t rows = static_cast<std::int64_t>(k.n) * k.seq;
    std::vector<float> z = random_values(rows * k.vocab, 111, -4.0f, 4.0f);
    for (float& v : z) v = std::round(v * 4.0f) / 4.0f;
    std::vector<std::int32_t> targets(static_cast<std::size_t>(rows));
    for (std::size_t i = 0; i < targets.size(); ++i) {
      targets[i] = i % 5 == 2 ? -100 : static_cast<std::int32_t>((i * 13) % static_cast<std::size_t>(k.vocab));
    }
    Tensor logits = tensor_of({k.n, k.seq, k.vocab}, k.tiles, z);
    Tensor tg = ids_tensor({k.n, k.seq}, k.tiles, targets);
    Tensor dlogits({k.n, k.seq, k.vocab}, k.tiles), stats({k.tiles, kTokenLossStats}, k.tiles);
    const TokenXentParams params{-100, k.smoothing};
    const float scale = 1.0f / static_cast<float>(rows);
    compare(
        [&] {
          for (int t = 0; t < k.tiles; ++t) {
            codelets::submit_token_xent_fwd_bwd({"loss"}, params, logits, tg, scale, dlogits, stats, t);
          }
        },
        {&dlogits, &stats}, {{"dlogits", 0, 1e-5, 1e-7}, {"stats", 0, 1e-5, 1e-7}});
  }
}

// A target outside the vocabulary cannot throw on the GPU (the CPU's DataError): its row counts with a NaN loss and
// a NaN gradient, which the training step's finiteness check reports; the other rows are unaffected.
TEST(CudaTokenLossTest, ATargetOutsideTheVocabularyGivesANanLoss) {
  DTNN_REQUIRE_CUDA();
  const int rows = 3, vocab = 5;
  Tensor logits = random_tensor({rows, vocab}, 1, 121);
  Tensor tg = ids_tensor({rows}, 1, {1, vocab, -100});
  Tensor dlogits({rows, vocab}, 1), stats({1, kTokenLossStats}, 1);
  const Values got = run_on(
      runtime::Device::kCuda,
      [&] { codelets::submit_token_xent_fwd_bwd({"loss"}, TokenXentParams{}, logits, tg, 1.0f, dlogits, stats, 0); },
      {&dlogits, &stats});
  EXPECT_TRUE(std::isnan(got[1][kLossSum]));
  EXPECT_EQ(got[1][kCounted], 2.0f);
  for (int j = 0; j < vocab; ++j) {
    EXPECT_FALSE(std::isnan(got[0][static_cast<std::size_t>(j)])) << "row 0, class " << j;
    EXPECT_TRUE(std::isnan(got[0][static_cast<std::size_t>(vocab + j)])) << "row 1, class " << j;
    EXPECT_EQ(got[0][static_cast<std::size_t>(2 * vocab + j)], 0.0f) << "row 2 (ignored), class " << j;
  }
}

// ---- Dense weight gradients in batch order ----

void submit_in_order(const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db) {
  for (int t = 0; t < x.tiles(); ++t) codelets::submit_dense_bwd_weights_in_order({"proj"}, x, dy, dw, db, t);
}

// One GEMM per sample onto the sum so far, tile after tile: the CPU's dw to GEMM rounding, its db bit for bit; and
// on the GPU the same bits for 1 and 3 tiles (rows x in and rows x out multiples of 4, as codelets/cuda/dense.cu
// asks).
TEST(CudaDenseInOrderTest, MatchesCpuAndTheTileCountChangesNoBit) {
  DTNN_REQUIRE_CUDA();
  const int n = 5, rows = 8, in = 12, out = 20;
  const std::vector<float> xv = random_values(n * rows * in, 131);
  const std::vector<float> dyv = random_values(n * rows * out, 132);
  for (int bias : {1, 0}) {
    SCOPED_TRACE(::testing::Message() << "bias " << bias);
    Tensor x = tensor_of({n, rows, in}, 3, xv), dy = tensor_of({n, rows, out}, 3, dyv);
    Tensor dw({out, in}), db({out});
    Tensor* dbp = bias != 0 ? &db : nullptr;
    std::vector<Tensor*> outputs{&dw};
    std::vector<Check> checks{{"dw", 0, kGemmTol, 1e-7}};
    if (bias != 0) {
      outputs.push_back(&db);
      checks.push_back({"db", 1});
    }
    compare([&] { submit_in_order(x, dy, dw, dbp); }, outputs, checks);

    Tensor x1 = tensor_of({n, rows, in}, 1, xv), dy1 = tensor_of({n, rows, out}, 1, dyv);
    Tensor dw1({out, in}), db1({out});
    Tensor* db1p = bias != 0 ? &db1 : nullptr;
    const Values three = run_on(runtime::Device::kCuda, [&] { submit_in_order(x, dy, dw, dbp); }, {&dw, &db});
    const Values one = run_on(runtime::Device::kCuda, [&] { submit_in_order(x1, dy1, dw1, db1p); }, {&dw1, &db1});
    EXPECT_TRUE(same_bits(three[0], one[0])) << "dw, 3 tiles against 1";
    if (bias != 0) {
      EXPECT_TRUE(same_bits(three[1], one[1])) << "db, 3 tiles against 1";
    }
  }
}

// ---- Gradient clipping ----

double accumulated(const std::vector<float>& two_floats) {
  double v = 0.0;
  std::memcpy(&v, two_floats.data(), sizeof v);
  return v;
}

// The sum of squares over three gradients (one past a launch's grid), then the clip of each: the sums are doubles
// in a tree on the GPU, so the norms agree to double rounding and the clipped values to fp32 rounding.
TEST(CudaGradClipTest, NormAndClipMatchCpu) {
  DTNN_REQUIRE_CUDA();
  const std::int64_t big = testing_cuda::kPastOneGrid;
  const std::vector<float> g1v = random_values(1000, 141), g2v = random_values(big, 142, -0.01f, 0.01f);
  const std::vector<float> g3v = random_values(7, 143);
  Tensor g1 = tensor_of({1000}, 1, g1v), g2 = tensor_of({big}, 1, g2v), g3 = tensor_of({7}, 1, g3v);
  Tensor acc({2});
  auto submit = [&] {
    codelets::submit_grad_sum_of_squares({"g1"}, g1, acc, true);
    codelets::submit_grad_sum_of_squares({"g2"}, g2, acc, false);
    codelets::submit_grad_sum_of_squares({"g3"}, g3, acc, false);
    for (Tensor* g : {&g1, &g2, &g3}) codelets::submit_clip_grad({"clip"}, acc, 1.0f, *g);
  };
  const Values reset{{}, g1v, g2v, g3v};
  const Values cpu = run_on(runtime::Device::kCpu, submit, {&acc, &g1, &g2, &g3}, reset);
  const Values gpu = run_on(runtime::Device::kCuda, submit, {&acc, &g1, &g2, &g3}, reset);
  const Values again = run_on(runtime::Device::kCuda, submit, {&acc, &g1, &g2, &g3}, reset);
  const double want = accumulated(cpu[0]);
  EXPECT_GT(std::sqrt(want), 1.0) << "the case must clip";
  // The terms are exact squares, all positive: the two orders' sums differ by rounding, ~1e-13 of the total; one
  // missing or doubled term would be ~1e-8 of it.
  EXPECT_NEAR(accumulated(gpu[0]), want, 1e-10 * want);
  for (std::size_t i = 1; i < cpu.size(); ++i) {
    EXPECT_TRUE(all_close(cpu[i], gpu[i], 1e-6, 1e-12)) << "gradient " << i;
  }
  for (std::size_t i = 0; i < gpu.size(); ++i) EXPECT_TRUE(same_bits(gpu[i], again[i])) << "output " << i;
}

// Given one accumulator, the clip is the CPU's arithmetic: the same bits; and a norm under max_norm changes nothing.
TEST(CudaGradClipTest, ClipFromAGivenNormMatchesCpuBitwise) {
  DTNN_REQUIRE_CUDA();
  const std::vector<float> gv = random_values(5000, 151);
  for (double norm_squared : {37.5, 0.25}) {
    SCOPED_TRACE(::testing::Message() << "squared norm " << norm_squared);
    std::vector<float> acc_values(2);
    std::memcpy(acc_values.data(), &norm_squared, sizeof norm_squared);
    Tensor acc = tensor_of({2}, 1, acc_values);
    Tensor g({5000});
    compare([&] { codelets::submit_clip_grad({"clip"}, acc, 1.0f, g); }, {&g}, {{"g", 1}}, {gv});
    if (norm_squared < 1.0) {
      EXPECT_TRUE(same_bits(g.to_vector(), gv)) << "clipped under max_norm";
    }
  }
}

// ---- Whole training steps ----

struct Trained {
  std::map<std::string, std::vector<float>> values;
  double loss = 0.0;
};

// Two steps of SGD with momentum (linear in the gradients: Adam's first step, about lr sign(g), would turn a
// rounding of a gradient near 0 into a difference of 2 lr), clipped to a norm the gradients exceed, batch 4 in 2
// tiles: every codelet of a language model's step, each task on a worker of the kind asked for but loading the
// tokens (gather_tokens reads the host's token stream).
Trained train_lm(int dropout, runtime::Device device) {
  models::TransformerLmOptions o;
  o.context = 16;
  o.d_model = 32;
  o.num_heads = 2;
  o.layers = 2;
  o.tied = true;
  o.dropout = dropout != 0 ? 0.1 : 0.0;
  Sequential model = dropout != 0 ? models::transformer_lm(o) : models::gpt_tiny();
  model.build({16}, 7);
  const io::Dataset data = io::synthetic_token_dataset(8, 16, 256, 21);
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  History h;
  runtime::Tracer::start();
  {
    testing_cuda::OnDevice on(device);
    h = fit(model, sgd, data,
            FitOptions().batch_size(4).tiles(2).shuffle(false).steps_per_epoch(2).seed(5).clip_grad_norm(0.5f)
                .verbose(false));
  }
  runtime::Engine::current()->wait_all();
  runtime::Tracer::stop();
  const starpu_worker_archtype want = device == runtime::Device::kCuda ? STARPU_CUDA_WORKER : STARPU_CPU_WORKER;
  int on_device = 0;
  for (const runtime::TraceEvent& e : runtime::Tracer::events()) {
    const bool right = e.worker >= 0 && starpu_worker_get_type(e.worker) == want;
    on_device += right ? 1 : 0;
    EXPECT_TRUE(right || e.codelet == "gather_tokens")
        << e.name << " (codelet " << e.codelet << ") ran on worker " << e.worker << ", expected a "
        << testing_cuda::worker_kind(device) << " worker";
  }
  EXPECT_GT(on_device, 0);
  Trained t;
  t.loss = h.epochs.back().loss;
  for (const auto& np : model.named_parameters()) t.values[np.name] = np.parameter->value.to_vector();
  return t;
}

class CudaTransformerStepTest : public ::testing::TestWithParam<int> {};

TEST_P(CudaTransformerStepTest, GptTinyEqualsTheCpuStepWithinTolerance) {
  DTNN_REQUIRE_CUDA();
  const int dropout = GetParam();
  const Trained cpu = train_lm(dropout, runtime::Device::kCpu);
  const Trained gpu = train_lm(dropout, runtime::Device::kCuda);
  EXPECT_NEAR(cpu.loss, gpu.loss, 1e-4 * std::max(1.0, std::abs(cpu.loss)));
  ASSERT_EQ(cpu.values.size(), gpu.values.size());
  for (const auto& [key, want] : cpu.values) {
    // Two steps of fp32 arithmetic in other orders (cuBLAS's GEMMs, the rows' tree sums): 1e-4 of the tensor's
    // largest magnitude.
    const double scale = std::max(1e-3, largest_magnitude(want));
    EXPECT_TRUE(all_close(want, gpu.values.at(key), 0.0, 1e-4 * scale)) << key;
  }
}

INSTANTIATE_TEST_SUITE_P(Dropout, CudaTransformerStepTest, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param != 0 ? "WithDropout" : "WithoutDropout");
                         });

}  // namespace
}  // namespace dtnn
