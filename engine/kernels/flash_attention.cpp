#include "engine/kernels/flash_attention.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/dtype.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/exp.h"
#include "engine/kernels/parallel.h"

namespace ag::kernels {

namespace {

// Rows of queries and of keys per block: a (64, 64) score block and (64, d) operands stay in L1/L2.
constexpr int64_t kQueryBlock = 64, kKeyBlock = 64;

// ---- Block products ----

// c (m, n) += a (m, k) @ b (k, n), or = when overwrite. a's element (i, p) is at a[i·a_row + p·a_col]
// (so a transposed block is read in place); b and c are row-major with leading dims ldb, ldc.
template <typename F>
struct Gemm {
  const F* a;
  int64_t a_row, a_col;
  const F* b;
  int64_t ldb;
  F* c;
  int64_t ldc;
  int64_t m, n, k;
  bool overwrite = false;
};

// Columns [j0, n) of the product in plain loops: f64, machines without AVX2, and narrow tails.
template <typename F>
void gemm_columns(const Gemm<F>& g, int64_t j0) {
  for (int64_t i = 0; i < g.m; ++i) {
    F* c = g.c + i * g.ldc;  // (n)
    if (g.overwrite) std::fill(c + j0, c + g.n, F(0));
    for (int64_t p = 0; p < g.k; ++p) {
      const F a = g.a[i * g.a_row + p * g.a_col];
      const F* b = g.b + p * g.ldb;  // (n)
#pragma omp simd
      for (int64_t j = j0; j < g.n; ++j) c[j] += a * b[j];
    }
  }
}

using f32x8 = float __attribute__((vector_size(32)));
using f32x16 = float __attribute__((vector_size(64)));

// c[i:i+R, j:j+N·lanes] in R·N vector registers, one pass over k.
template <typename V, int R, int N>
[[gnu::always_inline]] inline void gemm_tile(const Gemm<float>& g, int64_t i, int64_t j) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  V acc[R][N];
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < N; ++n) {
      acc[r][n] = V{};
      if (!g.overwrite) std::memcpy(&acc[r][n], g.c + (i + r) * g.ldc + j + n * kLanes, sizeof(V));
    }
  const float* a = g.a + i * g.a_row;
  for (int64_t p = 0; p < g.k; ++p) {
    V b[N];
    for (int n = 0; n < N; ++n) std::memcpy(&b[n], g.b + p * g.ldb + j + n * kLanes, sizeof(V));
    for (int r = 0; r < R; ++r) {
      const float a_rp = a[r * g.a_row + p * g.a_col];
      for (int n = 0; n < N; ++n) acc[r][n] += a_rp * b[n];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < N; ++n) std::memcpy(g.c + (i + r) * g.ldc + j + n * kLanes, &acc[r][n], sizeof(V));
}

template <typename V, int R, int N>
[[gnu::always_inline]] inline void gemm_column_strip(const Gemm<float>& g, int64_t j) {
  int64_t i = 0;
  for (; i + R <= g.m; i += R) gemm_tile<V, R, N>(g, i, j);
  for (; i < g.m; ++i) gemm_tile<V, 1, N>(g, i, j);
}

// Strips two vectors wide, then one, then plain loops for what is left.
template <typename V, int R>
[[gnu::always_inline]] inline void gemm_vectorised(const Gemm<float>& g) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  int64_t j = 0;
  for (; j + 2 * kLanes <= g.n; j += 2 * kLanes) gemm_column_strip<V, R, 2>(g, j);
  for (; j + kLanes <= g.n; j += kLanes) gemm_column_strip<V, R, 1>(g, j);
  if (j < g.n) gemm_columns(g, j);
}

// Runtime dispatch (GCC function multiversioning, feature lists: an arch= version could not inline
// the templates). Tiles of 2 vectors × 4 rows (AVX2: 8 of its 16 registers) or × 8 rows (AVX-512:
// 16 of its 32), leaving registers for the b loads.
[[gnu::target("default")]] void block_gemm(const Gemm<float>& g) { gemm_columns(g, 0); }
[[gnu::target("avx2,fma")]] void block_gemm(const Gemm<float>& g) { gemm_vectorised<f32x8, 4>(g); }
[[gnu::target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]] void block_gemm(const Gemm<float>& g) {
  gemm_vectorised<f32x16, 8>(g);
}
void block_gemm(const Gemm<double>& g) { gemm_columns(g, 0); }

// The same product with its operands rounded to bf16 (round-to-nearest-even, as to(x, DType::bf16))
// and summed in f32 by AVX512_BF16's vdpbf16ps, which adds two products (k and k+1) per f32 lane:
// a is packed as (m, k/2) pairs, b as (k/2, n, 2) so a lane's two k values sit side by side; an
// odd k is padded with a zero. Tiles of 8 rows × 16 columns; the last columns under a mask.
struct Bf16Packs {
  std::vector<uint16_t> a, b;
};

void pack_bf16_operands(const Gemm<float>& g, int64_t pairs, int64_t padded_n, Bf16Packs& packs) {
  packs.a.assign(g.m * pairs * 2, 0);  // (m, pairs, 2)
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t p = 0; p < g.k; ++p) packs.a[i * pairs * 2 + p] = bf16_bits_from_f32(g.a[i * g.a_row + p * g.a_col]);
  packs.b.assign(pairs * padded_n * 2, 0);  // (pairs, padded_n, 2)
  for (int64_t p = 0; p < g.k; ++p)
    for (int64_t j = 0; j < g.n; ++j)
      packs.b[((p / 2) * padded_n + j) * 2 + p % 2] = bf16_bits_from_f32(g.b[p * g.ldb + j]);
}

template <int R>
[[gnu::target("avx512bf16,avx512f,avx512bw,avx512vl,avx512dq"), gnu::always_inline]] inline void bf16_tile(
    const Gemm<float>& g, const Bf16Packs& packs, int64_t pairs, int64_t padded_n, int64_t i, int64_t j) {
  const __mmask16 columns = g.n - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (g.n - j)) - 1);
  __m512 acc[R];
  for (int r = 0; r < R; ++r)
    acc[r] = g.overwrite ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(columns, g.c + (i + r) * g.ldc + j);
  const auto* a_pairs = reinterpret_cast<const int32_t*>(packs.a.data());  // (m, pairs)
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512bh b = (__m512bh)_mm512_loadu_si512(packs.b.data() + (p * padded_n + j) * 2);  // 16 lanes × 2
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)_mm512_set1_epi32(a_pairs[(i + r) * pairs + p]), b);
  }
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(g.c + (i + r) * g.ldc + j, columns, acc[r]);
}

[[gnu::target("avx512bf16,avx512f,avx512bw,avx512vl,avx512dq")]] void block_gemm_bf16(const Gemm<float>& g) {
  thread_local Bf16Packs packs;
  const int64_t pairs = (g.k + 1) / 2, padded_n = (g.n + 15) / 16 * 16;
  pack_bf16_operands(g, pairs, padded_n, packs);
  for (int64_t j = 0; j < g.n; j += 16) {
    int64_t i = 0;
    for (; i + 8 <= g.m; i += 8) bf16_tile<8>(g, packs, pairs, padded_n, i, j);
    for (; i < g.m; ++i) bf16_tile<1>(g, packs, pairs, padded_n, i, j);
  }
}

// One block product of problem p: bf16 operands when p asks for them (f32 only).
template <typename F>
void product(const FlashProblem<F>& p, const Gemm<F>& g) {
  if constexpr (std::is_same_v<F, float>) {
    if (p.bf16) return block_gemm_bf16(g);
  }
  block_gemm(g);
}

// dst (cols, rows) = scale · src (rows, cols)ᵀ, src with leading dim ld.
template <typename F>
void transpose_scaled(const F* src, int64_t ld, int64_t rows, int64_t cols, F scale, F* dst) {
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r) dst[c * rows + r] = scale * src[r * ld + c];
}

// ---- Row passes over a score block ----

template <typename F>
[[gnu::always_inline]] inline F row_max_body(const F* row, int64_t n) {
  F max = -std::numeric_limits<F>::infinity();
#pragma omp simd reduction(max : max)
  for (int64_t j = 0; j < n; ++j) max = row[j] > max ? row[j] : max;
  return max;
}

// row = e^(row − shift) in place; returns its sum.
template <typename F>
[[gnu::always_inline]] inline F exp_row_body(F* row, int64_t n, F shift) {
  F sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    row[j] = exp_or_zero(row[j] - shift);
    sum += row[j];
  }
  return sum;
}

// dp = p ⊙ (dp − dot): the softmax backward of one row.
template <typename F>
[[gnu::always_inline]] inline void softmax_grad_row_body(const F* p, F* dp, int64_t n, F dot) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - dot);
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] float row_max(const float* row, int64_t n) {
  return row_max_body(row, n);
}
[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] float exp_row(float* row, int64_t n, float shift) {
  return exp_row_body(row, n, shift);
}
[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void softmax_grad_row(const float* p, float* dp,
                                                                                          int64_t n, float dot) {
  softmax_grad_row_body(p, dp, n, dot);
}
double row_max(const double* row, int64_t n) { return row_max_body(row, n); }
double exp_row(double* row, int64_t n, double shift) { return exp_row_body(row, n, shift); }
void softmax_grad_row(const double* p, double* dp, int64_t n, double dot) { softmax_grad_row_body(p, dp, n, dot); }

// ---- Masks ----

// Where the block of queries [i0, i0+rows) against keys [j0, j0+cols) meets a mask.
template <typename F>
bool block_is_masked(const FlashProblem<F>& p, int64_t i0, int64_t j0, int64_t cols) {
  return (p.causal && j0 + cols - 1 > i0) || p.padded || p.takes_part || p.added;
}

template <typename F>
void mask_block(const FlashProblem<F>& p, F* s, int64_t bh, int64_t i0, int64_t rows, int64_t j0, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) mask_scores(p, s + i * cols, bh / p.H, bh % p.H, i0 + i, j0, cols);
}

// ---- Scheduling ----

// body(task, scratch) for every task, one scratch per thread. Tasks write disjoint outputs, so a
// dynamic schedule keeps results bit for bit (and balances the causal blocks' uneven work).
template <typename Scratch, typename Body>
void for_each_task(int64_t tasks, int64_t cost_per_task, const Scratch& prototype, Body&& body) {
  if (tasks * cost_per_task < kParallelGrain || tasks < 2 || omp_get_max_threads() == 1) {
    Scratch scratch = prototype;
    for (int64_t t = 0; t < tasks; ++t) body(t, scratch);
    return;
  }
#pragma omp parallel
  {
    Scratch scratch = prototype;
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < tasks; ++t) body(t, scratch);
  }
}

// ---- Forward ----

template <typename F>
struct ForwardScratch {
  std::vector<F> s, acc, max, sum;  // (Br, Bc), (Br, dv), (Br), (Br)
  explicit ForwardScratch(const FlashProblem<F>& p)
      : s(kQueryBlock * kKeyBlock), acc(kQueryBlock * p.dv), max(kQueryBlock), sum(kQueryBlock) {}
};

// The online softmax after one key block: s (rows, cols) holds its scores and becomes
// e^(s − new max); the running max, sum and acc (rows, dv) are rescaled to the new max.
template <typename F>
void online_softmax_update(F* s, int64_t rows, int64_t cols, int64_t dv, ForwardScratch<F>& w) {
  constexpr F kMinusInf = -std::numeric_limits<F>::infinity();
  for (int64_t i = 0; i < rows; ++i) {
    F* row = s + i * cols;  // (cols)
    const F new_max = std::max(w.max[i], row_max(row, cols));
    const F shift = new_max == kMinusInf ? F(0) : new_max;  // every key so far masked: all of row is -inf
    const F rescale = w.max[i] == kMinusInf ? F(0) : std::exp(w.max[i] - new_max);
    w.sum[i] = w.sum[i] * rescale + exp_row(row, cols, shift);
    w.max[i] = new_max;
    if (rescale != F(1))
      for (F* a = w.acc.data() + i * dv; a < w.acc.data() + (i + 1) * dv; ++a) *a *= rescale;
  }
}

// out = acc / sum, lse = max + log(sum); a row with every key masked gives NaN (or 0) and -inf.
template <typename F>
void finish_rows(const FlashProblem<F>& p, const ForwardScratch<F>& w, int64_t rows, F* out, F* lse) {
  for (int64_t i = 0; i < rows; ++i) {
    const F* acc = w.acc.data() + i * p.dv;  // (dv)
    if (w.sum[i] == F(0)) {
      std::fill(out + i * p.dv, out + (i + 1) * p.dv, p.zero_masked_rows ? F(0) : std::numeric_limits<F>::quiet_NaN());
      lse[i] = -std::numeric_limits<F>::infinity();
      continue;
    }
    const F inverse = F(1) / w.sum[i];
    for (int64_t c = 0; c < p.dv; ++c) out[i * p.dv + c] = acc[c] * inverse;
    lse[i] = w.max[i] + std::log(w.sum[i]);
  }
}

// Queries [i0, i0+rows) of head bh against every key they may see, one key block at a time;
// kt (B, H, d, S) holds scale · kᵀ.
template <typename F>
void forward_query_block(const FlashProblem<F>& p, const F* q, const F* kt, const F* v, F* out, F* lse, int64_t bh,
                         int64_t i0, ForwardScratch<F>& w) {
  const int64_t rows = std::min(kQueryBlock, p.T - i0);
  const F* q_block = q + (bh * p.T + i0) * p.d;  // (rows, d)
  const F* kt_head = kt + bh * p.d * p.S;        // (d, S)
  const F* v_head = v + bh * p.S * p.dv;         // (S, dv)
  std::fill(w.max.begin(), w.max.end(), -std::numeric_limits<F>::infinity());
  std::fill(w.sum.begin(), w.sum.end(), F(0));
  std::fill(w.acc.begin(), w.acc.end(), F(0));
  const int64_t key_end = p.causal ? std::min(p.S, i0 + rows) : p.S;  // causal: no key after the last query
  for (int64_t j0 = 0; j0 < key_end; j0 += kKeyBlock) {
    const int64_t cols = std::min(kKeyBlock, key_end - j0);
    product(p, Gemm<F>{q_block, p.d, 1, kt_head + j0, p.S, w.s.data(), cols, rows, cols, p.d, true});  // (rows, cols)
    if (block_is_masked(p, i0, j0, cols)) mask_block(p, w.s.data(), bh, i0, rows, j0, cols);
    online_softmax_update(w.s.data(), rows, cols, p.dv, w);
    product(p, Gemm<F>{w.s.data(), cols, 1, v_head + j0 * p.dv, p.dv, w.acc.data(), p.dv, rows, p.dv, cols});
  }
  finish_rows(p, w, rows, out + (bh * p.T + i0) * p.dv, lse + bh * p.T + i0);
}

// ---- Backward ----

template <typename F>
struct BackwardScratch {
  std::vector<F> kt, vt, s, ds, dk, dv, dot;  // (d, Bc), (dv, Bc), (Br, Bc) ×2, (Bc, d), (Bc, dv), (T)
  explicit BackwardScratch(const FlashProblem<F>& p)
      : kt(p.d * kKeyBlock),
        vt(p.dv * kKeyBlock),
        s(kQueryBlock * kKeyBlock),
        ds(kQueryBlock * kKeyBlock),
        dk(kKeyBlock * p.d),
        dv(kKeyBlock * p.dv),
        dot(p.T) {}
};

// Pointers to one head's rows.
template <typename F>
struct Head {
  const F *q, *k, *v, *out, *lse, *dout;
  F *dq, *dk, *dv;
};

// One key block [j0, j0+cols) against the query block [i0, i0+rows): recomputes the weights from
// lse and adds this block's part of dq (unscaled), dk and dv (in scratch).
template <typename F>
void backward_block(const FlashProblem<F>& p, const Head<F>& h, int64_t bh, int64_t i0, int64_t j0, int64_t cols,
                    BackwardScratch<F>& w) {
  const int64_t rows = std::min(kQueryBlock, p.T - i0);
  const F* q_block = h.q + i0 * p.d;         // (rows, d)
  const F* dout_block = h.dout + i0 * p.dv;  // (rows, dv)
  F* s = w.s.data();                         // (rows, cols)
  F* ds = w.ds.data();                       // (rows, cols)
  // forward: s = scale · q @ kᵀ + masks;  p = softmax(s) = e^(s − lse)
  product(p, Gemm<F>{q_block, p.d, 1, w.kt.data(), cols, s, cols, rows, cols, p.d, true});
  if (block_is_masked(p, i0, j0, cols)) mask_block(p, s, bh, i0, rows, j0, cols);
  for (int64_t i = 0; i < rows; ++i) {
    const F lse = h.lse[i0 + i];  // -inf: every key masked, no weight (shift +inf makes the row 0)
    exp_row(s + i * cols, cols, lse == -std::numeric_limits<F>::infinity() ? -lse : lse);
  }
  // forward: out = p @ v  →  dv += pᵀ @ dout, dp = dout @ vᵀ
  product(p, Gemm<F>{s, 1, cols, dout_block, p.dv, w.dv.data(), p.dv, cols, p.dv, rows});
  product(p, Gemm<F>{dout_block, p.dv, 1, w.vt.data(), cols, ds, cols, rows, cols, p.dv, true});
  // p = softmax(s)  →  ds = p ⊙ (dp − Σ dout ⊙ out)
  for (int64_t i = 0; i < rows; ++i) softmax_grad_row(s + i * cols, ds + i * cols, cols, w.dot[i0 + i]);
  // s = scale · q @ kᵀ  →  dq += ds @ k, dk += dsᵀ @ q (both scaled once at the end)
  product(p, Gemm<F>{ds, cols, 1, h.k + j0 * p.d, p.d, h.dq + i0 * p.d, p.d, rows, p.d, cols});
  product(p, Gemm<F>{ds, 1, cols, q_block, p.d, w.dk.data(), p.d, cols, p.d, rows});
}

// Σ dout ⊙ out per query row (in double: the sum's rounding would depend on vectorisation).
template <typename F>
void row_dots(const FlashProblem<F>& p, const Head<F>& h, F* dot) {
  for (int64_t i = 0; i < p.T; ++i) {
    double sum = 0;
    for (int64_t c = 0; c < p.dv; ++c) sum += double(h.dout[i * p.dv + c]) * double(h.out[i * p.dv + c]);
    dot[i] = static_cast<F>(sum);
  }
}

// One head: key blocks outside, query blocks inside (dk, dv accumulate in scratch; dq in place).
template <typename F>
void backward_head(const FlashProblem<F>& p, const Head<F>& h, int64_t bh, BackwardScratch<F>& w) {
  row_dots(p, h, w.dot.data());
  std::fill(h.dq, h.dq + p.T * p.d, F(0));
  for (int64_t j0 = 0; j0 < p.S; j0 += kKeyBlock) {
    const int64_t cols = std::min(kKeyBlock, p.S - j0);
    transpose_scaled(h.k + j0 * p.d, p.d, cols, p.d, p.scale, w.kt.data());  // scale · kᵀ: (d, cols)
    transpose_scaled(h.v + j0 * p.dv, p.dv, cols, p.dv, F(1), w.vt.data());  // vᵀ: (dv, cols)
    std::fill(w.dk.begin(), w.dk.end(), F(0));
    std::fill(w.dv.begin(), w.dv.end(), F(0));
    for (int64_t i0 = p.causal ? j0 : 0; i0 < p.T; i0 += kQueryBlock) backward_block(p, h, bh, i0, j0, cols, w);
    for (int64_t e = 0; e < cols * p.d; ++e) h.dk[j0 * p.d + e] = p.scale * w.dk[e];
    std::copy(w.dv.begin(), w.dv.begin() + cols * p.dv, h.dv + j0 * p.dv);
  }
  for (F* g = h.dq; g < h.dq + p.T * p.d; ++g) *g *= p.scale;
}

// ---- bf16 heads (Note [bf16 head kernel]) ----

// GCC 12's AVX-512 headers give these intrinsics _mm512_undefined_*() as their unused source
// operand, which -W(maybe-)uninitialized reports once they are inlined (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define AG_BF16_TARGET gnu::target("avx512bf16,avx512f,avx512bw,avx512vl,avx512dq")

// c (R rows × NV vectors of 16) = Σ_p a(r, p) · b(p, ·): a(r, p) is the int32 pair (two bf16) at
// a[r·a_row + p·a_col], b's row p is NV·16 pairs at b + p·ldb; vdpbf16ps sums each pair's two
// products into its f32 lane.
template <int R, int NV>
[[AG_BF16_TARGET, gnu::always_inline]] inline void pair_tile(const int32_t* a, int64_t a_row, int64_t a_col,
                                                             const int32_t* b, int64_t ldb, int64_t pairs, float* c,
                                                             int64_t ldc) {
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NV; ++n) acc[r][n] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh b_pairs[NV];
    for (int n = 0; n < NV; ++n) b_pairs[n] = (__m512bh)_mm512_loadu_si512(b + p * ldb + 16 * n);
    for (int r = 0; r < R; ++r) {
      const __m512bh a_pair = (__m512bh)_mm512_set1_epi32(a[r * a_row + p * a_col]);
      for (int n = 0; n < NV; ++n) acc[r][n] = _mm512_dpbf16_ps(acc[r][n], a_pair, b_pairs[n]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NV; ++n) _mm512_storeu_ps(c + r * ldc + 16 * n, acc[r][n]);
}

// c (rows, 16·NV) = a @ b in tiles: rows a multiple of 8 (of 4 when NV > 2, keeping 16 sums in
// registers).
template <int NV>
[[AG_BF16_TARGET]] void pair_product_nv(const int32_t* a, int64_t a_row, int64_t a_col, const int32_t* b, int64_t ldb,
                                        int64_t pairs, float* c, int64_t ldc, int64_t rows) {
  constexpr int R = NV > 2 ? 4 : 8;
  for (int64_t r = 0; r < rows; r += R) pair_tile<R, NV>(a + r * a_row, a_row, a_col, b, ldb, pairs, c + r * ldc, ldc);
}

// One block product of the head kernel: c (rows, 16·vectors) = a (rows, pairs) @ b (pairs, 16·vectors).
struct PairProduct {
  const int32_t* a;
  int64_t a_row, a_col;
  const int32_t* b;
  int64_t ldb, pairs;
  float* c;
  int64_t ldc, rows, vectors;
};

[[AG_BF16_TARGET]] void pair_product(const PairProduct& g) {
  switch (g.vectors) {
    case 1:
      return pair_product_nv<1>(g.a, g.a_row, g.a_col, g.b, g.ldb, g.pairs, g.c, g.ldc, g.rows);
    case 2:
      return pair_product_nv<2>(g.a, g.a_row, g.a_col, g.b, g.ldb, g.pairs, g.c, g.ldc, g.rows);
    case 3:
      return pair_product_nv<3>(g.a, g.a_row, g.a_col, g.b, g.ldb, g.pairs, g.c, g.ldc, g.rows);
    default:
      return pair_product_nv<4>(g.a, g.a_row, g.a_col, g.b, g.ldb, g.pairs, g.c, g.ldc, g.rows);
  }
}

// The part of a product that block r of 16 rows needs: inner pairs [lo, hi) and the result's columns
// from `column` (a multiple of 16) on; the columns before it are not written.
struct RowBlockPart {
  int64_t lo, hi, column;
};

// g in blocks of 16 rows, each over its part(r) alone: a causal head's products skip the terms its mask
// makes zero and the scores it never reads. Each element sums its pairs in pair_product's order.
template <typename Part>
[[AG_BF16_TARGET]] void product_by_row_blocks(const PairProduct& g, Part part) {
  for (int64_t r = 0; r < g.rows; r += 16) {
    const RowBlockPart at = part(r);
    if (at.column >= 16 * g.vectors) continue;
    pair_product({g.a + r * g.a_row + at.lo * g.a_col, g.a_row, g.a_col, g.b + at.lo * g.ldb + at.column, g.ldb,
                  at.hi - at.lo, g.c + r * g.ldc + at.column, g.ldc, 16, g.vectors - at.column / 16});
  }
}

// e^x in 16 lanes, as exp_nonpositive computes it (x below -87 gives e^-87: callers zero masked lanes).
[[AG_BF16_TARGET, gnu::always_inline]] inline __m512 exp_lanes(__m512 x) {
  using namespace cephes_exp;
  x = _mm512_max_ps(_mm512_set1_ps(-87.0f), x);  // a NaN x stays NaN (max returns its second operand)
  const __m512 n = _mm512_roundscale_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(kLog2e), _mm512_set1_ps(0.5f)),
                                        _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2High), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(kLn2Correction), r);
  __m512 p = _mm512_set1_ps(kP0);
  for (const float c : {kP1, kP2, kP3, kP4, kP5}) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  const __m512 e = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(e, n);
}

// 16 f32 lanes rounded to bf16 bits as bf16_bits_from_f32 rounds them, in the low halves of 32-bit lanes.
[[AG_BF16_TARGET, gnu::always_inline]] inline __m512i bf16_lanes(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
  return _mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_set1_epi32(0xFFFF));
}

// Lanes l of `even` and `odd` as the pairs (even_l, odd_l): two rows' values side by side.
[[AG_BF16_TARGET, gnu::always_inline]] inline __m512i pairs_of_rows(__m512 even, __m512 odd) {
  return _mm512_or_si512(bf16_lanes(even), _mm512_slli_epi32(bf16_lanes(odd), 16));
}

// Lanes 2l and 2l+1 of x as pair l: 8 pairs of one row's neighbouring values.
[[AG_BF16_TARGET, gnu::always_inline]] inline __m256i pairs_of_lanes(__m512 x) {
  return _mm512_cvtepi32_epi16(bf16_lanes(x));
}

// The head's operands, padded with zeros to whole vectors: rows to 16, columns to 16.
struct HeadSizes {
  int64_t T, S, d, dv;      // the problem's
  int64_t Tp, Sp, dp, dvp;  // padded
  int64_t call;             // which call of the kernel (head_kernel_calls)
};

// Per-thread scratch of the head kernel, sized for kBf16HeadMax (int32 arrays hold bf16 pairs).
struct HeadScratch {
  std::vector<uint16_t> q, k, v, dout;                     // (Tp, dp), (Sp, dp), (Sp, dvp), (Tp, dvp) bf16, zero padded
  std::vector<int32_t> q_by_pair;                          // (dp/2, Tp): q's pairs, column by column
  std::vector<int32_t> dout_by_pair;                       // (dvp/2, Tp)
  std::vector<int32_t> q_rows, k_rows, v_rows, dout_rows;  // (Tp/2, dp) …: pairs of rows
  std::vector<float> scores, dscores;                      // (Sp, Tp): a key per row, a query per lane
  std::vector<int32_t> p_by_key;                           // (Sp, Tp/2): each key's weights, pairs of queries
  std::vector<int32_t> ds_by_key;                          // (Sp, Tp/2): the same of the scores' gradient
  std::vector<int32_t> p_by_query;                         // (Sp/2, Tp): pairs of keys, a query per lane
  std::vector<float> added;                                // (Sp, Tp): the attn_mask block, or empty
  int64_t added_call = -1, added_at = -1;                  // the call and mask offset `added` holds
  std::vector<float> out;                                  // (Tp, max(dvp, dp))
  HeadScratch() {
    constexpr int64_t n = kBf16HeadMax * kBf16HeadMax;
    for (auto* x : {&q, &k, &v, &dout}) x->assign(n, 0);
    for (auto* x :
         {&q_by_pair, &dout_by_pair, &q_rows, &k_rows, &v_rows, &dout_rows, &p_by_key, &ds_by_key, &p_by_query})
      x->assign(n / 2, 0);
    for (auto* x : {&scores, &dscores, &out}) x->assign(n, 0);
  }
};

// The calling thread's scratch, allocated once: a call copies and allocates nothing.
HeadScratch& thread_scratch() {
  thread_local HeadScratch scratch;
  return scratch;
}

// Numbers the head kernel's calls: a thread's cached mask block belongs to one call only.
std::atomic<int64_t> head_kernel_calls{0};

// A call's sizes, and its number.
HeadSizes head_sizes(const FlashProblem<float>& p) {
  const auto up = [](int64_t n) { return (n + 15) / 16 * 16; };
  return {p.T, p.S, p.d, p.dv, up(p.T), up(p.S), up(p.d), up(p.dv), head_kernel_calls++};
}

// src (rows, cols_in) bf16 as a (rows_padded, cols) operand: src itself when it has those sizes,
// else copied into dst with zeros around.
const uint16_t* padded(const uint16_t* src, int64_t rows, int64_t cols_in, int64_t rows_padded, int64_t cols,
                       uint16_t* dst) {
  if (rows == rows_padded && cols_in == cols) return src;
  for (int64_t r = 0; r < rows_padded; ++r) {
    uint16_t* row = dst + r * cols;
    if (r < rows) std::copy(src + r * cols_in, src + (r + 1) * cols_in, row);
    std::fill(row + (r < rows ? cols_in : 0), row + cols, uint16_t(0));
  }
  return dst;
}

// src (rows, cols_in) f32, rows ld apart, rounded to bf16 (round_rows_to_bf16) as a (rows_padded, cols)
// operand in dst, with zeros around.
void bf16_operand(const float* src, int64_t ld, int64_t rows, int64_t cols_in, int64_t rows_padded, int64_t cols,
                  uint16_t* dst) {
  round_rows_to_bf16(src, ld, reinterpret_cast<BFloat16*>(dst), cols, rows, cols_in);
  if (cols_in < cols)
    for (int64_t r = 0; r < rows; ++r) std::fill(dst + r * cols + cols_in, dst + (r + 1) * cols, uint16_t(0));
  std::fill(dst + rows * cols, dst + rows_padded * cols, uint16_t(0));
}

// (rows, cols) bf16 → (rows/2, cols) pairs of rows (row 2r's value, row 2r+1's), cols a multiple of 16.
[[AG_BF16_TARGET]] void pair_rows(const uint16_t* x, int64_t rows, int64_t cols, int32_t* out) {
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t r = 0; r < rows / 2; ++r)
    for (int64_t c = 0; c < cols; c += 16) {
      const __m256i even = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 2 * r * cols + c));
      const __m256i odd = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + (2 * r + 1) * cols + c));
      const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(even), odd, 1);
      _mm512_storeu_si512(out + r * cols + c, _mm512_permutexvar_epi16(interleave, both));
    }
}

// dst (16, 16) = src (16, 16)ᵀ, 32-bit elements, rows ld_src and ld_dst apart.
[[AG_BF16_TARGET]] void transpose_16x16(const int32_t* src, int64_t ld_src, int32_t* dst, int64_t ld_dst) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(src + i * ld_src);
  for (int i = 0; i < 16; i += 2) {  // 32-bit interleaves of row pairs
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // 64-bit interleaves
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int h = 0; h < 16; h += 8)  // 128-bit lanes, then 256-bit halves
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_i32x4(r[h + i], r[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_shuffle_i32x4(r[h + i], r[h + i + 4], 0xDD);
    }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xDD);
  }
  for (int i = 0; i < 16; ++i) _mm512_storeu_si512(dst + i * ld_dst, r[i]);
}

// (rows, cols) bf16 → (cols/2, rows): each row's pairs of columns, a row per lane; rows a multiple of 16.
[[AG_BF16_TARGET]] void pairs_by_column(const uint16_t* x, int64_t rows, int64_t cols, int32_t* out) {
  const auto* pairs = reinterpret_cast<const int32_t*>(x);  // (rows, cols/2)
  const int64_t width = cols / 2;
  if (width % 16 == 0) {
    for (int64_t r = 0; r < rows; r += 16)
      for (int64_t c = 0; c < width; c += 16) transpose_16x16(pairs + r * width + c, width, out + c * rows + r, rows);
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) out[c * rows + r] = pairs[r * width + c];
}

// The attn_mask's (S, T) block of head (b, h) as additive values: -inf where a b8 mask leaves a key
// out, the float mask's values otherwise; kept while the next head reads the same block.
void added_block(const FlashProblem<float>& p, const HeadSizes& z, int64_t b, int64_t h, HeadScratch& w) {
  const int64_t* ms = p.mask_strides;
  const int64_t at = b * ms[0] + h * ms[1];
  if (z.call == w.added_call && at == w.added_at) return;
  w.added.assign(z.Sp * z.Tp, 0.0f);
  for (int64_t j = 0; j < z.S; ++j)
    for (int64_t i = 0; i < z.T; ++i) {
      const int64_t e = at + i * ms[2] + j * ms[3];
      w.added[j * z.Tp + i] =
          p.takes_part ? (p.takes_part[e] ? 0.0f : -std::numeric_limits<float>::infinity()) : p.added[e];
    }
  w.added_call = z.call;
  w.added_at = at;
}

// Queries [i0, i0+16) of a head: their lanes, the keys they may see (causal: none after the last of
// them) and the lanes past the head's queries.
struct QueryBlock {
  int64_t i0, keys;
  __m512i queries;
  __mmask16 padding;
};

// Under a causal mask query i sees the keys j <= i alone: the block of 16 queries from i0 sees the
// keys before keys_seen(i0), and the block of 16 keys from j0 is seen by the queries from
// first_query(j0) on (i0, j0 multiples of 16); the head's products skip the rest
// (product_by_row_blocks).
int64_t keys_seen(const FlashProblem<float>& p, const HeadSizes& z, int64_t i0) {
  return p.causal ? std::min(z.Sp, i0 + 16) : z.Sp;
}
int64_t first_query(const FlashProblem<float>& p, const HeadSizes& z, int64_t j0) {
  return p.causal ? std::min(z.Tp, j0) : 0;
}

[[AG_BF16_TARGET, gnu::always_inline]] inline QueryBlock query_block(const FlashProblem<float>& p, const HeadSizes& z,
                                                                     int64_t i0) {
  const __m512i queries = _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32(static_cast<int32_t>(i0)));
  return {i0, keys_seen(p, z, i0), queries,
          _mm512_cmpge_epi32_mask(queries, _mm512_set1_epi32(static_cast<int32_t>(z.T)))};
}

// The masked, scaled scores of the block's queries against key j (w.scores unscaled); -inf where a
// mask (or padding) leaves the key out.
[[AG_BF16_TARGET, gnu::always_inline]] inline __m512 masked_scores(const FlashProblem<float>& p, const HeadSizes& z,
                                                                   const HeadScratch& w, int64_t b, int64_t j,
                                                                   const QueryBlock& block) {
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  if (j >= z.S || (p.padded && p.padded[b * p.S + j])) return minus_inf;
  __m512 x = _mm512_mul_ps(_mm512_loadu_ps(w.scores.data() + j * z.Tp + block.i0), _mm512_set1_ps(p.scale));
  if (p.takes_part || p.added) x = _mm512_add_ps(x, _mm512_loadu_ps(w.added.data() + j * z.Tp + block.i0));
  __mmask16 hidden = block.padding;
  if (p.causal) hidden |= _mm512_cmplt_epi32_mask(block.queries, _mm512_set1_epi32(static_cast<int32_t>(j)));
  return _mm512_mask_blend_ps(hidden, x, minus_inf);
}

// e^(x − shift), 0 where x is -inf (a key left out) or the shift is (a query that sees no key); NaN
// stays NaN.
[[AG_BF16_TARGET, gnu::always_inline]] inline __m512 weights_of(__m512 x, __m512 shift) {
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __mmask16 kept =
      _mm512_cmp_ps_mask(x, minus_inf, _CMP_NEQ_UQ) & _mm512_cmp_ps_mask(shift, minus_inf, _CMP_NEQ_UQ);
  return _mm512_maskz_mov_ps(kept, exp_lanes(_mm512_sub_ps(x, shift)));
}

// A head's operands as the kernel reads them: padded where the sizes ask (else the inputs
// themselves), the output's f32 gradient rounded to bf16.
struct HeadOperands {
  const uint16_t *q, *k, *v, *dout;
};

HeadOperands head_operands(const HeadSizes& z, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                           const float* dout, int64_t ld_dout, HeadScratch& w) {
  if (dout) bf16_operand(dout, ld_dout, z.T, z.dv, z.Tp, z.dvp, w.dout.data());
  return {padded(q, z.T, z.d, z.Tp, z.dp, w.q.data()), padded(k, z.S, z.d, z.Sp, z.dp, w.k.data()),
          padded(v, z.S, z.dv, z.Sp, z.dvp, w.v.data()), dout ? w.dout.data() : nullptr};
}

// scoresᵀ (Sp, Tp) = k @ qᵀ, unscaled: a key per row (under a causal mask, the queries it meets).
void key_scores(const FlashProblem<float>& p, const HeadSizes& z, const HeadOperands& x, HeadScratch& w) {
  pairs_by_column(x.q, z.Tp, z.dp, w.q_by_pair.data());
  product_by_row_blocks({reinterpret_cast<const int32_t*>(x.k), z.dp / 2, 1, w.q_by_pair.data(), z.Tp, z.dp / 2,
                         w.scores.data(), z.Tp, z.Sp, z.Tp / 16},
                        [&](int64_t j0) {
                          return RowBlockPart{0, z.dp / 2, first_query(p, z, j0)};
                        });
}

[[AG_BF16_TARGET]] void head_forward_bf16(const FlashProblem<float>& p, const HeadSizes& z, int64_t bh,
                                          const uint16_t* q, const uint16_t* k, const uint16_t* v, float* out,
                                          uint16_t* out_bf16, int64_t ld_out, float* lse, HeadScratch& w) {
  const int64_t b = bh / p.H;
  const HeadOperands x = head_operands(z, q, k, v, nullptr, 0, w);
  pair_rows(x.v, z.Sp, z.dvp, w.v_rows.data());
  if (p.takes_part || p.added) added_block(p, z, b, bh % p.H, w);
  key_scores(p, z, x, w);
  // e = e^(scale · q kᵀ + masks − max) over the keys, 16 queries at a time, a query per lane, as
  // pairs of keys in bf16; the rows are divided by their sums after the product
  float* scores = w.dscores.data();  // (Sp, Tp)
  int32_t* e_pairs = w.p_by_query.data();
  alignas(64) float inverses[kBf16HeadMax];
  for (int64_t i0 = 0; i0 < z.Tp; i0 += 16) {
    const QueryBlock block = query_block(p, z, i0);
    __m512 max = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int64_t j = 0; j < block.keys; ++j) {
      const __m512 s = masked_scores(p, z, w, b, j, block);
      _mm512_storeu_ps(scores + j * z.Tp + i0, s);
      max = _mm512_max_ps(max, s);
    }
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < block.keys; j += 2) {
      const __m512 even = weights_of(_mm512_loadu_ps(scores + j * z.Tp + i0), max);
      const __m512 odd = weights_of(_mm512_loadu_ps(scores + (j + 1) * z.Tp + i0), max);
      sum = _mm512_add_ps(_mm512_add_ps(sum, even), odd);
      _mm512_storeu_si512(e_pairs + (j / 2) * z.Tp + i0, pairs_of_rows(even, odd));
    }
    const __mmask16 seen = _mm512_cmp_ps_mask(sum, _mm512_setzero_ps(), _CMP_NEQ_UQ);  // some key (or a NaN)
    _mm512_store_ps(inverses + i0, _mm512_maskz_div_ps(seen, _mm512_set1_ps(1.0f), sum));
    alignas(64) float maxes[16], sums[16];
    _mm512_store_ps(maxes, max);
    _mm512_store_ps(sums, sum);
    for (int64_t l = 0; l < 16 && i0 + l < z.T; ++l)
      lse[i0 + l] = sums[l] != 0 ? maxes[l] + std::log(sums[l]) : -std::numeric_limits<float>::infinity();
  }
  // out (Tp, dvp) = (e @ v) / Σ e: a query per row, pairs of the keys it sees
  product_by_row_blocks({e_pairs, 1, z.Tp, w.v_rows.data(), z.dvp, z.Sp / 2, w.out.data(), z.dvp, z.Tp, z.dvp / 16},
                        [&](int64_t i0) {
                          return RowBlockPart{0, keys_seen(p, z, i0) / 2, 0};
                        });
  for (int64_t i = 0; i < z.T; ++i) {
    float* row = out + i * ld_out;
    const float* product = w.out.data() + i * z.dvp;
    if (lse[i] == -std::numeric_limits<float>::infinity())
      std::fill(row, row + z.dv, p.zero_masked_rows ? 0.0f : std::numeric_limits<float>::quiet_NaN());
    else
      for (int64_t c = 0; c < z.dv; ++c) row[c] = product[c] * inverses[i];
  }
  if (out_bf16 != nullptr) round_rows_to_bf16(out, ld_out, reinterpret_cast<BFloat16*>(out_bf16), ld_out, z.T, z.dv);
}

// out (rows, cols), rows ld apart, = scale · product (rows, cols_padded): the product's rows cut to
// the output's width. Nothing when out is null (a gradient not asked for).
void scaled_rows(const float* product, int64_t rows, int64_t cols, int64_t cols_padded, float scale, float* out,
                 int64_t ld) {
  if (out == nullptr) return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * ld + c] = scale * product[r * cols_padded + c];
}

// Where a head's gradients go: its rows of dq, dk, dv, rows ld* apart; null where not asked for.
struct HeadGrads {
  float *dq, *dk, *dv;
  int64_t ldq, ldk, ldv;
};

[[AG_BF16_TARGET]] void head_backward_bf16(const FlashProblem<float>& p, const HeadSizes& z, int64_t bh,
                                           const uint16_t* q, const uint16_t* k, const uint16_t* v, const float* lse,
                                           const float* dout, int64_t ld_dout, const HeadGrads& g, HeadScratch& w) {
  const int64_t b = bh / p.H;
  const HeadOperands x = head_operands(z, q, k, v, dout, ld_dout, w);
  if (p.takes_part || p.added) added_block(p, z, b, bh % p.H, w);
  key_scores(p, z, x, w);
  // forward: out = p @ v  →  dpᵀ (Sp, Tp) = v @ doutᵀ
  pairs_by_column(x.dout, z.Tp, z.dvp, w.dout_by_pair.data());
  product_by_row_blocks({reinterpret_cast<const int32_t*>(x.v), z.dvp / 2, 1, w.dout_by_pair.data(), z.Tp, z.dvp / 2,
                         w.dscores.data(), z.Tp, z.Sp, z.Tp / 16},
                        [&](int64_t j0) {
                          return RowBlockPart{0, z.dvp / 2, first_query(p, z, j0)};
                        });
  // p = e^(s − lse)  →  ds = p ⊙ (dp − Σ_keys p ⊙ dp), as pairs of keys (for dq) and of queries (for dk)
  float* weights = w.scores.data();  // (Sp, Tp), over the scores as they are read
  const float* dps = w.dscores.data();
  int32_t *p_by_key = w.p_by_key.data(), *ds_by_key = w.ds_by_key.data(), *ds_by_query = w.p_by_query.data();
  for (int64_t i0 = 0; i0 < z.Tp; i0 += 16) {
    alignas(64) float shifts[16];
    for (int64_t l = 0; l < 16; ++l) shifts[l] = i0 + l < z.T ? lse[i0 + l] : -std::numeric_limits<float>::infinity();
    const __m512 shift = _mm512_load_ps(shifts);
    __m512 dot = _mm512_setzero_ps();
    const QueryBlock block = query_block(p, z, i0);
    for (int64_t j = 0; j < block.keys; ++j) {
      const __m512 weight = weights_of(masked_scores(p, z, w, b, j, block), shift);
      _mm512_storeu_ps(weights + j * z.Tp + i0, weight);
      dot = _mm512_fmadd_ps(weight, _mm512_loadu_ps(dps + j * z.Tp + i0), dot);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p_by_key + j * z.Tp / 2 + i0 / 2), pairs_of_lanes(weight));
    }
    for (int64_t j = 0; j < block.keys; j += 2) {
      const float* dp = dps + j * z.Tp + i0;
      const float* weight = weights + j * z.Tp + i0;
      const __m512 even = _mm512_mul_ps(_mm512_loadu_ps(weight), _mm512_sub_ps(_mm512_loadu_ps(dp), dot));
      const __m512 odd = _mm512_mul_ps(_mm512_loadu_ps(weight + z.Tp), _mm512_sub_ps(_mm512_loadu_ps(dp + z.Tp), dot));
      _mm512_storeu_si512(ds_by_query + (j / 2) * z.Tp + i0, pairs_of_rows(even, odd));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ds_by_key + j * z.Tp / 2 + i0 / 2), pairs_of_lanes(even));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ds_by_key + (j + 1) * z.Tp / 2 + i0 / 2), pairs_of_lanes(odd));
    }
  }
  // dv (Sp, dvp) = pᵀ @ dout: a key per row, pairs of queries
  pair_rows(x.dout, z.Tp, z.dvp, w.dout_rows.data());
  const auto queries_met = [&](int64_t j0) { return RowBlockPart{first_query(p, z, j0) / 2, z.Tp / 2, 0}; };
  product_by_row_blocks(
      {w.p_by_key.data(), z.Tp / 2, 1, w.dout_rows.data(), z.dvp, z.Tp / 2, w.out.data(), z.dvp, z.Sp, z.dvp / 16},
      queries_met);
  scaled_rows(w.out.data(), z.S, z.dv, z.dvp, 1.0f, g.dv, g.ldv);
  // s = scale · q kᵀ  →  dq (Tp, dp) = scale · ds @ k (a query per row, pairs of keys)
  pair_rows(x.k, z.Sp, z.dp, w.k_rows.data());
  product_by_row_blocks(
      {w.p_by_query.data(), 1, z.Tp, w.k_rows.data(), z.dp, z.Sp / 2, w.out.data(), z.dp, z.Tp, z.dp / 16},
      [&](int64_t i0) {
        return RowBlockPart{0, keys_seen(p, z, i0) / 2, 0};
      });
  scaled_rows(w.out.data(), z.T, z.d, z.dp, p.scale, g.dq, g.ldq);
  // dk (Sp, dp) = scale · dsᵀ @ q (a key per row, pairs of queries)
  pair_rows(x.q, z.Tp, z.dp, w.q_rows.data());
  product_by_row_blocks(
      {w.ds_by_key.data(), z.Tp / 2, 1, w.q_rows.data(), z.dp, z.Tp / 2, w.out.data(), z.dp, z.Sp, z.dp / 16},
      queries_met);
  scaled_rows(w.out.data(), z.S, z.d, z.dp, p.scale, g.dk, g.ldk);
}

#undef AG_BF16_TARGET
#pragma GCC diagnostic pop

}  // namespace

template <typename F>
void mask_scores(const FlashProblem<F>& p, F* scores, int64_t b, int64_t h, int64_t i, int64_t j0, int64_t count) {
  constexpr F kMinusInf = -std::numeric_limits<F>::infinity();
  const int64_t visible = p.causal ? std::clamp<int64_t>(i + 1 - j0, 0, count) : count;  // keys ≤ i
  std::fill(scores + visible, scores + count, kMinusInf);
  if (!p.padded && !p.takes_part && !p.added) return;
  const int64_t* ms = p.mask_strides;
  const int64_t mask_row = ms ? b * ms[0] + h * ms[1] + i * ms[2] : 0;
  for (int64_t j = 0; j < visible; ++j) {
    const int64_t key = j0 + j, at = ms ? mask_row + key * ms[3] : 0;
    if ((p.padded && p.padded[b * p.S + key]) || (p.takes_part && !p.takes_part[at])) {
      scores[j] = kMinusInf;
    } else if (p.added) {
      scores[j] += p.added[at];
    }
  }
}

template <typename F>
void flash_attention_forward(const FlashProblem<F>& p, const F* q, const F* k, const F* v, F* out, F* lse) {
  std::vector<F> kt(p.B * p.H * p.d * p.S);  // scale · kᵀ: (B, H, d, S)
  parallel_for(p.B * p.H, p.S * p.d, [&](int64_t bh) {
    transpose_scaled(k + bh * p.S * p.d, p.d, p.S, p.d, p.scale, kt.data() + bh * p.d * p.S);
  });
  const int64_t query_blocks = (p.T + kQueryBlock - 1) / kQueryBlock;
  const int64_t cost = kQueryBlock * p.S * (p.d + p.dv);
  for_each_task(p.B * p.H * query_blocks, cost, ForwardScratch<F>(p), [&](int64_t task, ForwardScratch<F>& w) {
    forward_query_block(p, q, kt.data(), v, out, lse, task / query_blocks, task % query_blocks * kQueryBlock, w);
  });
}

template <typename F>
void flash_attention_backward(const FlashProblem<F>& p, const F* q, const F* k, const F* v, const F* out, const F* lse,
                              const F* dout, F* dq, F* dk, F* dv) {
  const int64_t cost = p.T * p.S * 2 * (p.d + p.dv);
  for_each_task(p.B * p.H, cost, BackwardScratch<F>(p), [&](int64_t bh, BackwardScratch<F>& w) {
    const int64_t qo = bh * p.T * p.d, ko = bh * p.S * p.d, vo = bh * p.S * p.dv, oo = bh * p.T * p.dv;
    const Head<F> h{q + qo, k + ko, v + vo, out + oo, lse + bh * p.T, dout + oo, dq + qo, dk + ko, dv + vo};
    backward_head(p, h, bh, w);
  });
}

#define AG_FLASH_INSTANTIATE(F)                                                                                    \
  template void mask_scores(const FlashProblem<F>&, F*, int64_t, int64_t, int64_t, int64_t, int64_t);              \
  template void flash_attention_forward(const FlashProblem<F>&, const F*, const F*, const F*, F*, F*);             \
  template void flash_attention_backward(const FlashProblem<F>&, const F*, const F*, const F*, const F*, const F*, \
                                         const F*, F*, F*, F*);
// Note [heads by batch]
// The bf16 head kernel's heads cost the same (a causal mask cuts each alike), so they split between
// threads statically: each thread takes a contiguous range of the batch, the sequences whose rows it
// wrote in the products before (split by rows: Note [products split by thread]) and in the heads'
// split (parallel_for_ranges), and whose rows it reads in the products after. A dynamic schedule
// dealt the heads out alternately, half of each thread's operands in the other core's caches: on a
// 2-vCPU host whose vCPUs now and then sit far apart (a cache line's round trip between them 380 ns
// instead of 100), a bf16 Transformer step took 37.8 ms there against 36.3 with this split (medians; the
// same 32.4 ms where they sit close; tools/bench/README.md, "Near and far CPUs").
bool bf16_heads_fit(int64_t T, int64_t S, int64_t d, int64_t dv) {
  return T <= kBf16HeadMax && S <= kBf16HeadMax && d <= kBf16HeadMax && dv <= kBf16HeadMax;
}

void flash_attention_forward_bf16(const FlashProblem<float>& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                  const HeadsOut& out, float* lse, const Bf16HeadsOut& out_bf16) {
  AG_CHECK(
      out_bf16.data == nullptr || (out_bf16.batch == out.batch && out_bf16.head == out.head && out_bf16.row == out.row),
      "flash_attention_forward_bf16: the output's bf16 copy must be laid out as the output");
  const HeadSizes z = head_sizes(p);
  parallel_for(p.B * p.H, z.Tp * z.Sp * (z.dp + z.dvp), [&](int64_t bh) {  // Note [heads by batch]
    const int64_t b = bh / p.H, h = bh % p.H;
    head_forward_bf16(p, z, bh, q + bh * p.T * p.d, k + bh * p.S * p.d, v + bh * p.S * p.dv, out.at(b, h),
                      out_bf16.data ? out_bf16.at(b, h) : nullptr, out.row, lse + bh * p.T, thread_scratch());
  });
}

void flash_attention_backward_bf16(const FlashProblem<float>& p, const uint16_t* q, const uint16_t* k,
                                   const uint16_t* v, const float* lse, const HeadsIn& dout, const HeadsOut& dq,
                                   const HeadsOut& dk, const HeadsOut& dv) {
  const HeadSizes z = head_sizes(p);
  parallel_for(p.B * p.H, 3 * z.Tp * z.Sp * (z.dp + z.dvp), [&](int64_t bh) {  // Note [heads by batch]
    const int64_t b = bh / p.H, h = bh % p.H;
    const auto place = [&](const HeadsOut& g) { return g.data ? g.at(b, h) : nullptr; };
    const HeadGrads g{place(dq), place(dk), place(dv), dq.row, dk.row, dv.row};
    head_backward_bf16(p, z, bh, q + bh * p.T * p.d, k + bh * p.S * p.d, v + bh * p.S * p.dv, lse + bh * p.T,
                       dout.at(b, h), dout.row, g, thread_scratch());
  });
}

AG_FLASH_INSTANTIATE(float)
AG_FLASH_INSTANTIATE(double)
#undef AG_FLASH_INSTANTIATE

}  // namespace ag::kernels
