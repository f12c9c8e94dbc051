#include "engine/kernels/flash_attention.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/dtype.h"
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
AG_FLASH_INSTANTIATE(float)
AG_FLASH_INSTANTIATE(double)
#undef AG_FLASH_INSTANTIATE

}  // namespace ag::kernels
