// The matrix product's kernels: the reference loops, the few-rows dot products and the oneDNN
// path, chosen by size (thresholds measured in tools/bench/README.md).
#include "engine/kernels/matmul.h"

#include <algorithm>
#include <bit>
#include <vector>

#include "engine/kernels/broadcast.h"
#include "engine/kernels/check.h"
#include "engine/kernels/dnnl_compat.h"
#include "engine/kernels/onednn.h"

namespace ag {

namespace {

std::string operand_str(const Tensor& t, bool transposed) { return shape_str(t.shape()) + (transposed ? "ᵀ" : ""); }

}  // namespace

MatmulPlan plan_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  check_floating("matmul", "left operand", a);
  check_floating("matmul", "right operand", b);
  AG_CHECK(a.dim() >= 1 && b.dim() >= 1,
           "matmul: both operands need at least 1 dim, got {} @ {} (use mul to scale by a 0-d tensor)",
           shape_str(a.shape()), shape_str(b.shape()));
  check_same_dtype("matmul", a, b);
  MatmulPlan p;
  p.ta = transpose_a && a.dim() >= 2;
  p.tb = transpose_b && b.dim() >= 2;
  p.a_shape = a.shape();
  if (a.dim() == 1) p.a_shape.insert(p.a_shape.begin(), 1);  // (K) → (1, K)
  p.b_shape = b.shape();
  if (b.dim() == 1) p.b_shape.push_back(1);  // (K) → (K, 1)
  const size_t ra = p.a_shape.size(), rb = p.b_shape.size();
  p.m = p.ta ? p.a_shape[ra - 1] : p.a_shape[ra - 2];
  const int64_t ka = p.ta ? p.a_shape[ra - 2] : p.a_shape[ra - 1];
  const int64_t kb = p.tb ? p.b_shape[rb - 1] : p.b_shape[rb - 2];
  p.n = p.tb ? p.b_shape[rb - 2] : p.b_shape[rb - 1];
  AG_CHECK(ka == kb, "matmul: inner dimensions differ: {} @ {}", operand_str(a, p.ta), operand_str(b, p.tb));
  p.k = ka;

  const Shape batch_a(p.a_shape.begin(), p.a_shape.end() - 2);
  const Shape batch_b(p.b_shape.begin(), p.b_shape.end() - 2);
  const size_t rank = std::max(batch_a.size(), batch_b.size());
  p.batch.resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - batch_a.size() ? 1 : batch_a[i - (rank - batch_a.size())];
    const int64_t db = i < rank - batch_b.size() ? 1 : batch_b[i - (rank - batch_b.size())];
    AG_CHECK(da == db || da == 1 || db == 1,
             "matmul: batch dims {} and {} cannot be broadcast ({} vs {} at batch dim {}) in {} @ {}",
             shape_str(batch_a), shape_str(batch_b), da, db, i, shape_str(a.shape()), shape_str(b.shape()));
    p.batch[i] = da == 1 ? db : da;
  }
  p.out_shape = p.batch;
  if (a.dim() >= 2) p.out_shape.push_back(p.m);
  if (b.dim() >= 2) p.out_shape.push_back(p.n);
  return p;
}

// out (batch, M, N) = scale · A @ B, each output row computed by one thread: no sums across
// threads, so the result does not depend on the thread count. Rows of at least 16 outputs
// accumulate row-wise (out[i, :] += A[i, k] · B[k, :], vectorised); shorter rows, the
// attention heads' (T, head_dim) products, take one dot product per output, four outputs at a

namespace {

template <typename T>
void matmul_kernel(const T* pa, const T* pb, T* po, const MatmulPlan& p, T scale) {
  const int64_t M = p.m, K = p.k, N = p.n;
  const Shape batch_a(p.a_shape.begin(), p.a_shape.end() - 2);
  const Shape batch_b(p.b_shape.begin(), p.b_shape.end() - 2);
  const Shape stride_a = broadcast_strides(batch_a, p.batch);  // in matrices
  const Shape stride_b = broadcast_strides(batch_b, p.batch);
  const int64_t batch_rank = static_cast<int64_t>(p.batch.size());
  const int64_t matrices = numel(p.batch);
  std::vector<int64_t> matrices_a(matrices), matrices_b(matrices);  // per output matrix, its operands
  for (int64_t m = 0; m < matrices; ++m) {
    int64_t rest = m;
    for (int64_t d = batch_rank - 1; d >= 0; --d) {
      const int64_t index = rest % p.batch[d];
      rest /= p.batch[d];
      matrices_a[m] += index * stride_a[d];
      matrices_b[m] += index * stride_b[d];
    }
  }
  // A(i, k) = A[i·a_i + k·a_k] and B(k, j) = B[k·b_k + j·b_j], whichever way each is stored.
  const int64_t a_i = p.ta ? 1 : K, a_k = p.ta ? M : 1;
  const int64_t b_k = p.tb ? 1 : N, b_j = p.tb ? K : 1;
  parallel_for_ranges(matrices * M, K * N, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin, matrix = begin / M, i = begin % M; row < end; ++row) {
      const T* A = pa + matrices_a[matrix] * M * K + i * a_i;  // row i of A
      const T* B = pb + matrices_b[matrix] * K * N;
      T* out = po + row * N;  // (N)
      if (N >= 16 && !p.tb) {
        std::fill(out, out + N, T(0));
        for (int64_t k = 0; k < K; ++k) {
          const T av = A[k * a_k];
          const T* brow = B + k * N;
          for (int64_t j = 0; j < N; ++j) out[j] += av * brow[j];
        }
        for (int64_t j = 0; j < N; ++j) out[j] *= scale;
      } else {
        auto dots = [&]<int W>(int64_t j) {  // out[j, j + W) as W dot products advancing together
          T acc[W] = {};
          for (int64_t k = 0; k < K; ++k) {
            const T av = A[k * a_k];
            const T* b = B + k * b_k + j * b_j;  // B(k, j)
            for (int w = 0; w < W; ++w) acc[w] += av * b[w * b_j];
          }
          for (int w = 0; w < W; ++w) out[j + w] = acc[w] * scale;
        };
        int64_t j = 0;
        for (; j + 4 <= N; j += 4) dots.template operator()<4>(j);
        if (j + 2 <= N) dots.template operator()<2>(j), j += 2;
        if (j < N) dots.template operator()<1>(j);
      }
      if (++i == M) i = 0, ++matrix;
    }
  });
}

// Below this many multiply-adds (batch·M·K·N) the loops above beat oneDNN's ~1 µs per call
// (tools/bench: BM_Matmul at 8³ … 32³; see tools/bench/README.md).
constexpr int64_t kOneDnnMatmulMin = 8192;

// A stored operand (…, r, c) as oneDNN reads it: padded with leading 1s to the batch rank, and
// with its last two dims swapped through the strides when transposed (no copy).
onednn::Dims operand_dims(const Shape& stored, size_t batch_rank, bool transposed, onednn::Dims& strides) {
  onednn::Dims dims(batch_rank + 2 - stored.size(), 1);
  dims.insert(dims.end(), stored.begin(), stored.end());
  strides = contiguous_strides(dims);
  if (transposed) {
    std::swap(dims[batch_rank], dims[batch_rank + 1]);
    std::swap(strides[batch_rank], strides[batch_rank + 1]);
  }
  return dims;
}

// out = scale · A @ B on oneDNN; false if oneDNN does not take this problem.
bool matmul_onednn(const float* pa, const float* pb, float* po, const MatmulPlan& plan, float scale) {
  MatmulPlan p = plan;
  if (!p.ta && !p.batch.empty() && numel(Shape(p.b_shape.begin(), p.b_shape.end() - 2)) == 1) {
    // One matrix b under a batch of a (a Linear layer): fold the batch into the rows of A.
    p.m *= numel(p.batch);
    p.a_shape = {p.m, p.k};                                   // (batch·M, K)
    p.b_shape = Shape(p.b_shape.end() - 2, p.b_shape.end());  // (K, N) or (N, K)
    p.batch.clear();
  }
  const size_t rank = p.batch.size();
  onednn::Dims a_strides, b_strides;
  const onednn::Dims a_dims = operand_dims(p.a_shape, rank, p.ta, a_strides);  // (batch…, M, K)
  const onednn::Dims b_dims = operand_dims(p.b_shape, rank, p.tb, b_strides);  // (batch…, K, N)
  onednn::Dims c_dims = p.batch;                                               // (batch…, M, N)
  c_dims.insert(c_dims.end(), {p.m, p.n});
  onednn::Key key{static_cast<int64_t>(onednn::Op::matmul), p.ta, p.tb, std::bit_cast<int32_t>(scale)};
  key.insert(key.end(), a_dims.begin(), a_dims.end());
  key.insert(key.end(), b_dims.begin(), b_dims.end());
  const int64_t multiply_adds = numel(p.batch) * p.m * p.n * p.k;
  onednn::Primitive* primitive = onednn::cached(std::move(key), multiply_adds, [&] {
    return onednn::make_matmul(onednn::f32_desc(a_dims, a_strides), onednn::f32_desc(b_dims, b_strides),
                               onednn::f32_desc(c_dims), scale);
  });
  if (primitive == nullptr) return false;
  onednn::execute(*primitive, {{DNNL_ARG_SRC, pa}, {DNNL_ARG_WEIGHTS, pb}, {DNNL_ARG_DST, po}});
  return true;
}

// out (rows, N) = scale · A (rows, K) @ Bᵀ, B stored (N, K): one contiguous dot product per
// output, four outputs at a time (four independent vector sums). For a Linear layer on one or a
// few rows (a token at a time in generation), where oneDNN 2.6's brgemm is several times slower
// (tools/bench/README.md, "Thresholds").
[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void dots_with_rows(const float* a, const float* b,
                                                                                        float* out, int64_t K,
                                                                                        int64_t first, int64_t last,
                                                                                        float scale) {
  int64_t j = first;
  for (; j + 4 <= last; j += 4) {
    const float *b0 = b + j * K, *b1 = b0 + K, *b2 = b1 + K, *b3 = b2 + K;
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int64_t k = 0; k < K; ++k) {
      s0 += a[k] * b0[k];
      s1 += a[k] * b1[k];
      s2 += a[k] * b2[k];
      s3 += a[k] * b3[k];
    }
    out[j] = s0 * scale, out[j + 1] = s1 * scale, out[j + 2] = s2 * scale, out[j + 3] = s3 * scale;
  }
  for (; j < last; ++j) {
    const float* bj = b + j * K;
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < K; ++k) s += a[k] * bj[k];
    out[j] = s * scale;
  }
}

constexpr int64_t kFewRowsMax = 4;

// A few rows of A against one B stored transposed, as dots_with_rows does them; false otherwise.
bool few_rows_matmul(const Tensor& a, const Tensor& b, Tensor& out, const MatmulPlan& p, float scale) {
  const int64_t rows = numel(p.batch) * p.m;
  if (a.dtype() != DType::f32 || !p.tb || p.ta || rows > kFewRowsMax || b.dim() != 2) return false;
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    parallel_for_ranges(p.n, p.k, [&](int64_t first, int64_t last) {
      dots_with_rows(pa + r * p.k, pb, po + r * p.n, p.k, first, last, scale);
    });
  return true;
}

}  // namespace

Tensor run_matmul(const Tensor& a, const Tensor& b, const MatmulPlan& plan, double scale) {
  Tensor out = empty(plan.out_shape, a.dtype());
  const bool big = numel(plan.batch) * plan.m * plan.k * plan.n >= kOneDnnMatmulMin;
  if (big && few_rows_matmul(a, b, out, plan, static_cast<float>(scale))) return out;
  if (a.dtype() == DType::f32 && big &&
      matmul_onednn(a.data<float>(), b.data<float>(), out.data<float>(), plan, static_cast<float>(scale)))
    return out;
  dispatch_floating(a.dtype(), "matmul", [&]<typename T>() {
    matmul_kernel<T>(a.data<T>(), b.data<T>(), out.data<T>(), plan, static_cast<T>(scale));
  });
  return out;
}

Tensor matmul_forward(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, double scale) {
  return run_matmul(a, b, plan_matmul(a, b, transpose_a, transpose_b), scale);
}

}  // namespace ag
