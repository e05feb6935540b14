// SPDX-License-Identifier: Apache-2.0
// Attention after codelets/cpu/attention.cpp: the same GEMMs (cuBLAS here, column-major: a row-major matrix with row
// stride ld is, to cuBLAS, its transpose with leading dimension ld), the same softmax arithmetic (sums of the
// exponentials in double, the inverse rounded to float once), the same dropout draws.
#include "codelets/cuda/attention.hpp"
#include "codelets/cuda/dropout_draw.cuh"
#include "codelets/cuda/launch.cuh"
#include "codelets/cuda/warp_reduce.cuh"
#include "core/cuda_check.hpp"

namespace dtnn::kernels::cuda {
namespace {

using std::size_t;

constexpr int kWarp = detail::kWarpLanes;
constexpr int kRowsPerBlock = kThreads / kWarp;

// What a row's kernels need of the dropout: the stream of the sample's row in the batch, and the params.
struct Drop {
  DropoutParams params;
  std::uint64_t key;
  int on;
};

// One warp per row of one sample's probabilities [heads, seq, seq] (rows = heads x seq), in place: the scores become
// the softmax over the keys that are neither padded nor (causal) after the query, the others 0; a row with no key
// left is all 0 (with padding only: without, every row keeps its own key). With dropout, dropped = p * mask, the mask
// of element (h seq + r) seq + c as kernels::cpu::attention_fwd draws it.
__global__ void softmax_rows_kernel(int rows, int seq, int causal, const std::int32_t* __restrict__ padded, Drop drop,
                                    float* __restrict__ p, float* __restrict__ dropped) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int first = static_cast<int>(blockIdx.x) * kRowsPerBlock + static_cast<int>(threadIdx.x) / kWarp;
  for (int row = first; row < rows; row += static_cast<int>(gridDim.x) * kRowsPerBlock) {
    const int r = row % seq;  // the query
    const int keys = causal != 0 ? r + 1 : seq;
    const size_t base = static_cast<size_t>(row) * static_cast<size_t>(seq);
    float* pr = p + base;
    float m = -INFINITY;
    for (int c = lane; c < keys; c += kWarp) {
      if (padded == nullptr || padded[c] == 0) m = pr[c] > m ? pr[c] : m;
    }
    m = detail::warp_max(m);
    double sum = 0.0;
    for (int c = lane; c < seq; c += kWarp) {
      const bool valid = c < keys && (padded == nullptr || padded[c] == 0);
      const float e = valid ? expf(pr[c] - m) : 0.0f;
      pr[c] = e;
      sum += static_cast<double>(e);
    }
    sum = detail::warp_sum(sum);
    // As the CPU: 1 / sum without padding (never 0 there), 0 for an empty row with it.
    const float inv = padded == nullptr || sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
    // The keys after a causal query are 0 whatever inv is (as the CPU, even for a row of NaN scores).
    for (int c = lane; c < seq; c += kWarp) {
      const float v = c < keys ? pr[c] * inv : 0.0f;
      pr[c] = v;
      if (drop.on != 0) {
        const float mask = detail::mask_of(detail::draw(drop.key, base + static_cast<size_t>(c)), drop.params);
        dropped[base + static_cast<size_t>(c)] = __fmul_rn(v, mask);
      }
    }
  }
}

// Backward's dropped probabilities of one sample: dropped = p * mask over its heads x seq x seq elements.
__global__ void drop_kernel(size_t count, Drop drop, const float* __restrict__ p, float* __restrict__ dropped) {
  DTNN_GRID_STRIDE(e, count) { dropped[e] = __fmul_rn(p[e], detail::mask_of(detail::draw(drop.key, e), drop.params)); }
}

// One warp per row of one sample's score gradients, in place: ds = dp * mask (with dropout), then the softmax's
// backward ds = p (ds - sum_c p ds) scale, the dot in double as on the CPU (products of floats are exact in double,
// so fused or not they round alike).
__global__ void softmax_bwd_rows_kernel(int rows, int seq, float scale, Drop drop, const float* __restrict__ p,
                                        float* __restrict__ ds) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int first = static_cast<int>(blockIdx.x) * kRowsPerBlock + static_cast<int>(threadIdx.x) / kWarp;
  for (int row = first; row < rows; row += static_cast<int>(gridDim.x) * kRowsPerBlock) {
    const size_t base = static_cast<size_t>(row) * static_cast<size_t>(seq);
    const float* pr = p + base;
    float* dr = ds + base;
    double dot = 0.0;
    for (int c = lane; c < seq; c += kWarp) {
      float g = dr[c];
      if (drop.on != 0) {
        g = __fmul_rn(g, detail::mask_of(detail::draw(drop.key, base + static_cast<size_t>(c)), drop.params));
        dr[c] = g;
      }
      dot += static_cast<double>(pr[c]) * static_cast<double>(g);
    }
    const auto shift = static_cast<float>(detail::warp_sum(dot));
    for (int c = lane; c < seq; c += kWarp) dr[c] = __fmul_rn(__fmul_rn(pr[c], dr[c] - shift), scale);
  }
}

unsigned row_blocks(int rows) {
  const int blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return static_cast<unsigned>(blocks < static_cast<int>(kMaxBlocks) ? blocks : static_cast<int>(kMaxBlocks));
}

// The worker's cuBLAS handle is shared by every codelet of the worker: the state that changes results is set on each
// call. The default math mode never lowers fp32 GEMMs to TF32.
void prepare(cublasHandle_t cublas, const char* what) {
  DTNN_CUBLAS_CHECK(cublasSetMathMode(cublas, CUBLAS_DEFAULT_MATH), what);
  DTNN_CUBLAS_CHECK(cublasSetPointerMode(cublas, CUBLAS_POINTER_MODE_HOST), what);
}

// One operand of a batch over the heads: its first head's matrix, leading dimension and the step between heads.
struct Operand {
  const float* ptr;
  int ld;
  long long stride;
};

// C_h = alpha op(A_h) op(B_h) for the heads h of one sample, column-major as cuBLAS sees it, beta = 0.
void heads_gemm(cublasHandle_t cublas, int heads, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                float alpha, Operand a, Operand b, float* c, int ldc, long long stride_c, const char* what) {
  const float beta = 0.0f;
  DTNN_CUBLAS_CHECK(cublasSgemmStridedBatched(cublas, ta, tb, m, n, k, &alpha, a.ptr, a.ld, a.stride, b.ptr, b.ld,
                                              b.stride, &beta, c, ldc, stride_c, heads),
                    what);
}

// The sizes of one sample.
struct Sizes {
  int s;       // seq
  int d;       // head_dim
  int e;       // heads x head_dim
  int row;     // 3E: the row stride of qkv
  size_t qkv;  // floats of a sample of qkv, probs, ctx
  size_t probs;
  size_t ctx;
};

Sizes sizes_of(const AttentionShape& a) {
  Sizes z{};
  z.s = a.seq;
  z.d = a.head_dim;
  z.e = a.heads * a.head_dim;
  z.row = 3 * z.e;
  z.qkv = static_cast<size_t>(z.s) * static_cast<size_t>(z.row);
  z.probs = static_cast<size_t>(a.heads) * static_cast<size_t>(z.s) * static_cast<size_t>(z.s);
  z.ctx = static_cast<size_t>(z.s) * static_cast<size_t>(z.e);
  return z;
}

Drop drop_of(const DropoutParams* drop, std::int64_t row) {
  Drop d{};
  if (drop == nullptr) return d;
  d.params = *drop;
  d.key = detail::row_key(drop->seed, drop->step, row);
  d.on = 1;
  return d;
}

}  // namespace

std::size_t attention_scratch_bytes(const AttentionShape& a, AttentionPass pass, int dropout) {
  const size_t buffers = (pass == AttentionPass::kBackward ? 1 : 0) + (dropout != 0 ? 1 : 0);
  return buffers * sizes_of(a).probs * sizeof(float);
}

void attention_fwd(const AttentionShape& a, int n, std::int64_t first_row, const DropoutParams* drop,
                   const float* qkv, float* probs, float* ctx, const std::int32_t* key_padding, void* scratch,
                   cublasHandle_t cublas, cudaStream_t stream) {
  if (n <= 0 || a.heads <= 0 || a.seq <= 0 || a.head_dim <= 0) return;
  const Sizes z = sizes_of(a);
  const int rows = a.heads * z.s;
  auto* dropped = static_cast<float*>(scratch);
  prepare(cublas, "attention_fwd");
  for (int i = 0; i < n; ++i) {
    const float* sample = qkv + static_cast<size_t>(i) * z.qkv;
    float* p = probs + static_cast<size_t>(i) * z.probs;
    // p_h = scale q_h k_h^T: column-major p_h^T (keys x queries) = (k_h^T)^T q_h^T, where the row-major head slices
    // q_h, k_h (seq x d, row stride 3E) are to cuBLAS q_h^T, k_h^T (d x seq, ld 3E); the heads d columns apart.
    heads_gemm(cublas, a.heads, CUBLAS_OP_T, CUBLAS_OP_N, z.s, z.s, z.d, a.scale, {sample + z.e, z.row, z.d},
               {sample, z.row, z.d}, p, z.s, static_cast<long long>(z.s) * z.s, "attention_fwd scores");
    const Drop dr = drop_of(drop, first_row + i);
    const std::int32_t* padded = key_padding != nullptr ? key_padding + static_cast<size_t>(i) * z.s : nullptr;
    softmax_rows_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(rows, z.s, a.causal, padded, dr, p, dropped);
    DTNN_CUDA_CHECK(cudaGetLastError(), "attention_fwd softmax");
    // ctx_h = w_h v_h: column-major ctx_h^T (d x seq, ld E) = v_h^T (d x seq, ld 3E) w_h^T (w_h row-major, ld seq).
    const float* w = dr.on != 0 ? dropped : p;
    heads_gemm(cublas, a.heads, CUBLAS_OP_N, CUBLAS_OP_N, z.d, z.s, z.s, 1.0f, {sample + 2 * z.e, z.row, z.d},
               {w, z.s, static_cast<long long>(z.s) * z.s}, ctx + static_cast<size_t>(i) * z.ctx, z.e, z.d,
               "attention_fwd context");
  }
}

void attention_bwd_data(const AttentionShape& a, int n, std::int64_t first_row, const DropoutParams* drop,
                        const float* qkv, const float* probs, const float* dctx, float* dqkv, void* scratch,
                        cublasHandle_t cublas, cudaStream_t stream) {
  if (n <= 0 || a.heads <= 0 || a.seq <= 0 || a.head_dim <= 0) return;
  const Sizes z = sizes_of(a);
  const int rows = a.heads * z.s;
  const long long plane = static_cast<long long>(z.s) * z.s;
  auto* ds = static_cast<float*>(scratch);
  float* dropped = ds + z.probs;
  prepare(cublas, "attention_bwd_data");
  for (int i = 0; i < n; ++i) {
    const float* sample = qkv + static_cast<size_t>(i) * z.qkv;
    float* dsample = dqkv + static_cast<size_t>(i) * z.qkv;
    const float* dc = dctx + static_cast<size_t>(i) * z.ctx;
    const float* p = probs + static_cast<size_t>(i) * z.probs;
    const Drop dr = drop_of(drop, first_row + i);
    const float* w = p;
    if (dr.on != 0) {
      drop_kernel<<<blocks_for(z.probs), kThreads, 0, stream>>>(z.probs, dr, p, dropped);
      DTNN_CUDA_CHECK(cudaGetLastError(), "attention_bwd_data dropout");
      w = dropped;
    }
    // dv_h = w_h^T dctx_h: column-major dv_h^T (d x seq, ld 3E) = dctx_h^T (d x seq, ld E) w_h, w_h^T as stored.
    heads_gemm(cublas, a.heads, CUBLAS_OP_N, CUBLAS_OP_T, z.d, z.s, z.s, 1.0f, {dc, z.e, z.d}, {w, z.s, plane},
               dsample + 2 * z.e, z.row, z.d, "attention_bwd_data dv");
    // dp_h = dctx_h v_h^T: column-major dp_h^T (seq x seq) = (v_h^T)^T dctx_h^T.
    heads_gemm(cublas, a.heads, CUBLAS_OP_T, CUBLAS_OP_N, z.s, z.s, z.d, 1.0f, {sample + 2 * z.e, z.row, z.d},
               {dc, z.e, z.d}, ds, z.s, plane, "attention_bwd_data dp");
    softmax_bwd_rows_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(rows, z.s, a.scale, dr, p, ds);
    DTNN_CUDA_CHECK(cudaGetLastError(), "attention_bwd_data softmax");
    // dq_h = ds_h k_h: column-major dq_h^T (d x seq, ld 3E) = k_h^T ds_h^T (ds_h row-major, ld seq).
    heads_gemm(cublas, a.heads, CUBLAS_OP_N, CUBLAS_OP_N, z.d, z.s, z.s, 1.0f, {sample + z.e, z.row, z.d},
               {ds, z.s, plane}, dsample, z.row, z.d, "attention_bwd_data dq");
    // dk_h = ds_h^T q_h: column-major dk_h^T (d x seq, ld 3E) = q_h^T ds_h.
    heads_gemm(cublas, a.heads, CUBLAS_OP_N, CUBLAS_OP_T, z.d, z.s, z.s, 1.0f, {sample, z.row, z.d},
               {ds, z.s, plane}, dsample + z.e, z.row, z.d, "attention_bwd_data dk");
  }
}

}  // namespace dtnn::kernels::cuda
