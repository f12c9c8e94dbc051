// Matrix products like torch.matmul: 1-D operands are promoted to matrices (a vector on the left
// becomes a (1, K) row, on the right a (K, 1) column, and the added dim is removed from the result);
// N-D operands are stacks of matrices whose batch dims broadcast. transpose_a / transpose_b read an
// operand's last two dims swapped, without a copy: Q·Kᵀ is matmul(q, k, false, true).
#include <algorithm>
#include <bit>
#include <vector>

#include "engine/autograd.h"
#include "engine/kernels/broadcast.h"
#include "engine/kernels/dnnl_compat.h"
#include "engine/kernels/fast.h"
#include "engine/kernels/onednn.h"
#include "engine/ops.h"
#include "engine/registry.h"

namespace ag {

namespace {

// The shapes of one product. "Stored" shapes are the operands' own (promoted) shapes; the flags
// say whether the kernel reads their last two dims swapped.
struct MatmulPlan {
  Shape a_shape;    // a promoted: (..., M, K), or (..., K, M) when ta
  Shape b_shape;    // b promoted: (..., K, N), or (..., N, K) when tb
  Shape batch;      // the broadcast batch dims
  Shape out_shape;  // batch + (M, N), without the dims added by promotion
  int64_t m = 0, k = 0, n = 0;
  bool ta = false, tb = false;  // false for a 1-D operand: a vector is its own transpose
};

std::string operand_str(const Tensor& t, bool transposed) { return shape_str(t.shape()) + (transposed ? "ᵀ" : ""); }

MatmulPlan plan_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  AG_CHECK(a.defined() && b.defined(), "matmul: an operand is undefined");
  AG_CHECK(a.dim() >= 1 && b.dim() >= 1,
           "matmul: both operands need at least 1 dim, got {} @ {} (use mul to scale by a 0-d tensor)",
           shape_str(a.shape()), shape_str(b.shape()));
  AG_CHECK(is_floating(a.dtype()) && is_floating(b.dtype()),
           "matmul: expected floating operands (f32 or f64), got {} {} @ {} {}", dtype_name(a.dtype()),
           shape_str(a.shape()), dtype_name(b.dtype()), shape_str(b.shape()));
  AG_CHECK(a.dtype() == b.dtype(), "matmul: dtypes differ: {} {} @ {} {} (convert one with ag::to)",
           dtype_name(a.dtype()), shape_str(a.shape()), dtype_name(b.dtype()), shape_str(b.shape()));
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
// time so that their sums advance together instead of waiting on each other's adds.
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
// few rows (a token at a time in generation), where oneDNN 2.6's brgemm takes 13–16 µs for
// (1,128) @ (128,512)ᵀ against about 2 µs here.
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

}  // namespace

Tensor matmul_forward(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, double scale) {
  return run_matmul(a, b, plan_matmul(a, b, transpose_a, transpose_b), scale);
}

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  const MatmulPlan plan = plan_matmul(a, b, transpose_a, transpose_b);
  Tensor out = run_matmul(a, b, plan, 1.0);
  record(out, "MatmulBackward", {a, b}, {a, b}, [plan](const BackwardContext& c) {
    // out = A @ B, with A = a or aᵀ (ta) and B = b or bᵀ (tb), 1-D operands promoted
    //   →  dA = G @ Bᵀ and dB = Aᵀ @ G, summed over the batch dims an operand was broadcast along.
    const Tensor& a = c.saved[0];
    const Tensor& b = c.saved[1];
    const Tensor a_p = reshape(a, plan.a_shape);  // (..., M, K) or (..., K, M)
    const Tensor b_p = reshape(b, plan.b_shape);  // (..., K, N) or (..., N, K)
    Shape g_shape = plan.batch;
    g_shape.push_back(plan.m);
    g_shape.push_back(plan.n);
    const Tensor g = reshape(c.grad, g_shape);  // (batch, M, N)
    Tensor da, db;
    if (c.needs_grad[0]) {
      // dA = G @ Bᵀ; when a is stored transposed, da = dAᵀ = B @ Gᵀ.
      da = plan.ta ? matmul(b_p, g, plan.tb, true) : matmul(g, b_p, false, !plan.tb);
      da = reshape(sum_to(da, plan.a_shape), a.shape());
    }
    if (c.needs_grad[1]) {
      const bool b_unbatched = numel(Shape(plan.b_shape.begin(), plan.b_shape.end() - 2)) == 1;
      if (b_unbatched && !plan.batch.empty() && !plan.ta) {
        // One matrix b under a batch of a (a Linear layer): fold the batch into the rows,
        // dB = A_flatᵀ @ G_flat, one product instead of a batch of them summed.
        const int64_t rows = numel(plan.batch) * plan.m;
        const Tensor a_flat = reshape(a_p, {rows, plan.k});  // (rows, K)
        const Tensor g_flat = reshape(g, {rows, plan.n});    // (rows, N)
        db = plan.tb ? matmul(g_flat, a_flat, true, false) : matmul(a_flat, g_flat, true, false);
      } else {
        // dB = Aᵀ @ G; when b is stored transposed, db = dBᵀ = Gᵀ @ A.
        db = plan.tb ? matmul(g, a_p, true, plan.ta) : matmul(a_p, g, !plan.ta, false);
        db = sum_to(db, plan.b_shape);
      }
      db = reshape(db, b.shape());
    }
    return std::vector<Tensor>{da, db};
  });
  return out;
}

void register_matmul_ops(Registry& registry) {
  auto product = [](bool ta, bool tb) {
    return [ta, tb](const std::vector<Tensor>& in) { return matmul(in[0], in[1], ta, tb); };
  };
  // Shapes are the operands' stored shapes: for matmul_ta, a is (K, M).
  registry.add(
      {"matmul",
       product(false, false),
       real_inputs(),
       {{{3, 4}, {4, 5}}, {{5, 7}, {7, 3}}, {{1, 1}, {1, 1}}, {{1, 4}, {4, 1}}, {{4, 1}, {1, 3}}, {{3, 1}, {1, 1}}}});
  registry.add({"matmul_vector",
                product(false, false),
                real_inputs(),
                {{{4}, {4, 3}}, {{3, 4}, {4}}, {{5}, {5}}, {{1}, {1}}, {{3}, {2, 3, 2}}, {{2, 3, 4}, {4}}}});
  registry.add({"matmul_batched",
                product(false, false),
                real_inputs(),
                {{{2, 3, 4}, {2, 4, 5}},
                 {{2, 1, 3, 4}, {5, 4, 6}},
                 {{2, 3, 4}, {4, 5}},
                 {{3, 4}, {2, 4, 5}},
                 {{1, 3, 2}, {3, 2, 2}},
                 {{3, 1, 2, 3}, {1, 2, 3, 2}}}});
  const std::vector<std::vector<Shape>> ta_shapes = {
      {{4, 3}, {4, 5}}, {{1, 1}, {1, 2}}, {{4}, {4, 3}}, {{2, 4, 3}, {4, 5}}, {{2, 1, 4, 3}, {3, 4, 2}}};
  const std::vector<std::vector<Shape>> tb_shapes = {
      {{3, 4}, {5, 4}}, {{2, 1}, {1, 1}}, {{3, 4}, {4}}, {{2, 3, 4}, {5, 4}}, {{2, 1, 3, 4}, {3, 2, 4}}};
  const std::vector<std::vector<Shape>> tatb_shapes = {
      {{4, 3}, {5, 4}}, {{1, 2}, {3, 1}}, {{2, 4, 3}, {5, 4}}, {{4, 3}, {2, 5, 4}}, {{2, 1, 4, 3}, {3, 2, 4}}};
  registry.add({"matmul_ta", product(true, false), real_inputs(), ta_shapes});
  registry.add({"matmul_tb", product(false, true), real_inputs(), tb_shapes});
  registry.add({"matmul_tatb", product(true, true), real_inputs(), tatb_shapes});
}

}  // namespace ag
