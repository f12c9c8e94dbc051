// The matrix product's kernels: the reference loops, the few-rows dot products and the oneDNN
// path, chosen by size (thresholds measured in tools/bench/README.md).
#include "engine/kernels/matmul.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <exception>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/kernels/bf16.h"
#include "engine/kernels/broadcast.h"
#include "engine/kernels/check.h"
#include "engine/kernels/dnnl_compat.h"
#include "engine/kernels/onednn.h"
#include "engine/kernels/parallel.h"

namespace ag {

namespace {

std::string operand_str(const Tensor& t, bool transposed) { return shape_str(t.shape()) + (transposed ? "ᵀ" : ""); }

}  // namespace

MatmulPlan plan_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  if (a.dtype() != DType::bf16 || b.dtype() != DType::bf16) {  // bf16 pairs: autocast's products (engine/autocast.h)
    check_floating("matmul", "left operand", a);
    check_floating("matmul", "right operand", b);
  }
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

namespace {

// One matrix b under a batch of a, a not transposed (a Linear layer): the batch folds into the
// rows of A, (batch·M, K) @ (K, N). Fewer, taller products for either kernel.
void fold_batch_into_rows(MatmulPlan& p) {
  if (p.ta || p.batch.empty() || numel(Shape(p.b_shape.begin(), p.b_shape.end() - 2)) != 1) return;
  p.m *= numel(p.batch);
  p.a_shape = {p.m, p.k};                                   // (batch·M, K)
  p.b_shape = Shape(p.b_shape.end() - 2, p.b_shape.end());  // (K, N) or (N, K)
  p.batch.clear();
}

// Sixteen output columns, a vector register's worth in f32 on AVX-512 (GCC splits it into
// halves or quarters on narrower ISAs). Aligned as T, so loads and stores make no alignment
// assumption and a std::vector<T> can hold them.
constexpr int64_t kLanes = 16;
template <typename T>
struct LanesOf;
template <>
struct LanesOf<float> {
  typedef float type __attribute__((vector_size(kLanes * sizeof(float)), aligned(alignof(float))));
};
template <>
struct LanesOf<double> {
  typedef double type __attribute__((vector_size(kLanes * sizeof(double)), aligned(alignof(double))));
};
template <typename T>
using Lanes = typename LanesOf<T>::type;

// Rows of output per tile: the packing of B (k vectors) is repaid over this many rows.
constexpr int64_t kTileRows = 64;

// One product as the tiles read it: A(i, k) = a[i·a_i + k·a_k] and B(k, j) = b[k·b_k + j·b_j]
// within each matrix, whichever way each operand is stored.
template <typename T>
struct TiledProduct {
  const T* a;
  const T* b;
  T* out;
  const Shape* batch;
  Shape stride_a, stride_b;  // in matrices, under broadcasting; empty when a, b and out share the batch
  int64_t m, k, n, a_i, a_k, b_k, b_j;
  int64_t row_tiles, column_tiles;
  T scale;
};

// Tiles [first, last) of the product (tile = (matrix, column tile, row tile), row tile fastest):
// out(i, j0 + :) = scale · Σ_k A(i, k) · B(k, j0 + :), the sum in k order. B's 16 columns are
// packed into one vector per k (zero past N), then each row takes one broadcast multiply-add
// per k.
template <typename T>
[[gnu::always_inline]] inline void product_tiles(const TiledProduct<T>& p, int64_t first, int64_t last) {
  Lanes<T> on_stack[64];
  std::vector<T> on_heap;  // for longer sums
  Lanes<T>* packed = on_stack;
  if (p.k > 64) {
    on_heap.resize(p.k * kLanes);
    packed = reinterpret_cast<Lanes<T>*>(on_heap.data());
  }
  // The tile's (matrix, column tile, row tile), advanced like an odometer: no division per tile.
  int64_t row_tile = first % p.row_tiles, column_tile = first / p.row_tiles % p.column_tiles;
  int64_t matrix = first / p.row_tiles / p.column_tiles;
  bool pack = true;  // a new (matrix, column tile): pack its columns
  for (int64_t tile = first; tile < last; ++tile) {
    int64_t matrix_a = matrix, matrix_b = matrix;  // the operands' matrices behind output matrix `matrix`
    if (!p.stride_a.empty()) {
      matrix_a = matrix_b = 0;
      for (int64_t d = static_cast<int64_t>(p.batch->size()) - 1, rest = matrix; d >= 0; --d) {
        const int64_t index = rest % (*p.batch)[d];
        rest /= (*p.batch)[d];
        matrix_a += index * p.stride_a[d];
        matrix_b += index * p.stride_b[d];
      }
    }
    const int64_t i0 = row_tile * kTileRows, j0 = column_tile * kLanes;
    const int64_t rows = std::min(kTileRows, p.m - i0), columns = std::min(kLanes, p.n - j0);
    const T* a = p.a + matrix_a * p.m * p.k + i0 * p.a_i;
    const T* b = p.b + matrix_b * p.k * p.n + j0 * p.b_j;
    T* out = p.out + (matrix * p.m + i0) * p.n + j0;
    if (pack) {
      for (int64_t k = 0; k < p.k; ++k) {
        packed[k] = Lanes<T>{};
        for (int64_t j = 0; j < columns; ++j) packed[k][j] = b[k * p.b_k + j * p.b_j];
      }
    }
    pack = ++row_tile == p.row_tiles;
    if (pack) {
      row_tile = 0;
      if (++column_tile == p.column_tiles) column_tile = 0, ++matrix;
    }
    auto rows_together = [&]<int R>(int64_t i) {  // rows i … i+R-1: R independent sums
      Lanes<T> acc[R] = {};
      for (int64_t k = 0; k < p.k; ++k)
        for (int r = 0; r < R; ++r) acc[r] += a[(i + r) * p.a_i + k * p.a_k] * packed[k];
      for (int r = 0; r < R; ++r) {
        const Lanes<T> scaled = acc[r] * p.scale;
        T* row = out + (i + r) * p.n;
        if (columns == kLanes) {
          std::memcpy(row, &scaled, sizeof scaled);
        } else {  // a fixed trip count with a condition: a masked store, not a call to memcpy
          for (int j = 0; j < kLanes; ++j)
            if (j < columns) row[j] = scaled[j];
        }
      }
    };
    int64_t i = 0;
    for (; i + 4 <= rows; i += 4) rows_together.template operator()<4>(i);
    for (; i < rows; ++i) rows_together.template operator()<1>(i);
  }
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void product_tiles_f32(const TiledProduct<float>& p,
                                                                                           int64_t first,
                                                                                           int64_t last) {
  product_tiles(p, first, last);
}
[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void product_tiles_f64(
    const TiledProduct<double>& p, int64_t first, int64_t last) {
  product_tiles(p, first, last);
}

// out (batch, M, N) = scale · A @ B in tiles of up to 64 rows × 16 columns, each output computed
// by one tile with the sum in k order: the result does not depend on the thread count. For the
// products too small for oneDNN (the attention heads' (T, head_dim) products) and for f64.
template <typename T>
void matmul_kernel(const T* pa, const T* pb, T* po, MatmulPlan plan, T scale) {
  fold_batch_into_rows(plan);
  const MatmulPlan& p = plan;
  const int64_t M = p.m, K = p.k, N = p.n;
  const bool same_batch = std::equal(p.a_shape.begin(), p.a_shape.end() - 2, p.batch.begin(), p.batch.end()) &&
                          std::equal(p.b_shape.begin(), p.b_shape.end() - 2, p.batch.begin(), p.batch.end());
  auto strides = [&](const Shape& stored) {  // none when the batch is shared: no allocation on the common path
    return same_batch ? Shape{} : broadcast_strides(Shape(stored.begin(), stored.end() - 2), p.batch);
  };
  const TiledProduct<T> product{.a = pa,
                                .b = pb,
                                .out = po,
                                .batch = &p.batch,
                                .stride_a = strides(p.a_shape),
                                .stride_b = strides(p.b_shape),
                                .m = M,
                                .k = K,
                                .n = N,
                                .a_i = p.ta ? 1 : K,
                                .a_k = p.ta ? M : 1,
                                .b_k = p.tb ? 1 : N,
                                .b_j = p.tb ? K : 1,
                                .row_tiles = (M + kTileRows - 1) / kTileRows,
                                .column_tiles = (N + kLanes - 1) / kLanes,
                                .scale = scale};
  const int64_t tiles = numel(p.batch) * product.column_tiles * product.row_tiles;
  const int64_t multiply_adds_per_tile = std::min(kTileRows, M) * K * std::min(kLanes, N);
  parallel_for_ranges(tiles, multiply_adds_per_tile, [&](int64_t first, int64_t last) {
    if constexpr (std::is_same_v<T, float>) {
      product_tiles_f32(product, first, last);
    } else {
      product_tiles_f64(product, first, last);
    }
  });
}

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

// out = scale · A @ B on oneDNN for a plan whose batch is already folded, on the threads the
// product's size calls for (one inside a parallel region); false if oneDNN does not take this
// problem. A transposed A whose columns are `a_columns_apart` apart in memory is a share of a
// wider one's columns.
bool matmul_primitive(const void* pa, const void* pb, float* po, const MatmulPlan& p, float scale, bool bf16,
                      int64_t a_columns_apart = 0) {
  const size_t rank = p.batch.size();
  onednn::Dims a_strides, b_strides;
  const onednn::Dims a_dims = operand_dims(p.a_shape, rank, p.ta, a_strides);  // (batch…, M, K)
  if (a_columns_apart > 0) a_strides[rank + 1] = a_columns_apart;              // a transposed A's share of columns
  const onednn::Dims b_dims = operand_dims(p.b_shape, rank, p.tb, b_strides);  // (batch…, K, N)
  onednn::Dims c_dims = p.batch;                                               // (batch…, M, N)
  c_dims.insert(c_dims.end(), {p.m, p.n});
  const onednn::Op op = bf16 ? onednn::Op::matmul_bf16 : onednn::Op::matmul;
  onednn::Key key{static_cast<int64_t>(op), p.ta, p.tb, std::bit_cast<int32_t>(scale), a_columns_apart};
  key.insert(key.end(), a_dims.begin(), a_dims.end());
  key.insert(key.end(), b_dims.begin(), b_dims.end());
  const int64_t multiply_adds = numel(p.batch) * p.m * p.n * p.k;
  onednn::Primitive* primitive = onednn::cached(std::move(key), multiply_adds, [&] {
    auto operand = [bf16](const onednn::Dims& dims, const onednn::Dims& strides) {
      return bf16 ? onednn::bf16_desc(dims, strides) : onednn::f32_desc(dims, strides);
    };
    return onednn::make_matmul(operand(a_dims, a_strides), operand(b_dims, b_strides), onednn::f32_desc(c_dims), scale);
  });
  if (primitive == nullptr) return false;
  onednn::execute(*primitive, {{DNNL_ARG_SRC, pa}, {DNNL_ARG_WEIGHTS, pb}, {DNNL_ARG_DST, po}});
  return true;
}

// The plan's operands hold every matrix of its batch (no broadcast): the batch can be shared out.
bool holds_the_batch(const MatmulPlan& p) {
  const auto holds = [&](const Shape& stored) {
    return std::equal(stored.begin(), stored.end() - 2, p.batch.begin(), p.batch.end());
  };
  return holds(p.a_shape) && holds(p.b_shape);
}

// The product of `p` with its batch read as one dim of `matrices`, the operands' last two dims kept.
MatmulPlan share_of_batch(const MatmulPlan& p, int64_t matrices) {
  MatmulPlan share = p;
  share.batch = {matrices};
  share.a_shape = {matrices, p.a_shape[p.a_shape.size() - 2], p.a_shape.back()};
  share.b_shape = {matrices, p.b_shape[p.b_shape.size() - 2], p.b_shape.back()};
  return share;
}

// The rows [first, last) of the 2-D product `p`'s output: A's rows, or a transposed A's columns.
MatmulPlan share_of_rows(const MatmulPlan& p, int64_t first, int64_t last) {
  MatmulPlan share = p;
  share.m = last - first;
  share.a_shape = p.ta ? Shape{p.k, share.m} : Shape{share.m, p.k};
  share.out_shape = {share.m, p.n};
  return share;
}

}  // namespace

// Note [products split by thread] (matmul.h): worth it from 4 × `multiple` (64 rows, or 4 matrices)
// a thread and 4 grains of work.
bool products_split_by_thread(int64_t count, int64_t multiple, int64_t work) {
  const int threads = omp_get_max_threads();
  return threads > 1 && !omp_in_parallel() && count >= 4 * multiple * threads && work >= 4 * kParallelGrain;
}

bool shares_by_thread(int64_t count, int64_t multiple, const std::function<bool(int64_t, int64_t)>& share) {
  bool taken = true;
  std::exception_ptr failure;  // an exception may not leave an OpenMP region: carried out, then rethrown
#pragma omp parallel reduction(&& : taken)
  {
    const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    const int64_t first = share_start(count, thread, threads, multiple);
    const int64_t last = share_start(count, thread + 1, threads, multiple);
    try {
      if (first < last) taken = share(first, last);
    } catch (...) {
      taken = false;
#pragma omp critical(shares_by_thread_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  return taken;
}

namespace {

// out = scale · A @ B on oneDNN, A and B f32 or both bf16 (out f32); false if oneDNN does not
// take this problem (the caller's kernel then writes every output again).
bool matmul_onednn(const void* pa, const void* pb, float* po, const MatmulPlan& plan, float scale, bool bf16) {
  MatmulPlan p = plan;
  fold_batch_into_rows(p);
  const int64_t element = bf16 ? 2 : 4, matrices = numel(p.batch), work = matrices * p.m * p.n * p.k;
  const auto* a_bytes = static_cast<const char*>(pa);
  const auto* b_bytes = static_cast<const char*>(pb);
  if (p.batch.empty() && products_split_by_thread(p.m, 16, work))
    return shares_by_thread(p.m, 16, [&](int64_t first, int64_t last) {
      const int64_t a_offset = p.ta ? first : first * p.k;  // a transposed A: its columns are the rows
      return matmul_primitive(a_bytes + a_offset * element, pb, po + first * p.n, share_of_rows(p, first, last), scale,
                              bf16, p.ta ? p.m : 0);
    });
  if (!p.batch.empty() && holds_the_batch(p) && products_split_by_thread(matrices, 1, work))
    return shares_by_thread(matrices, 1, [&](int64_t first, int64_t last) {
      return matmul_primitive(a_bytes + first * p.m * p.k * element, b_bytes + first * p.k * p.n * element,
                              po + first * p.m * p.n, share_of_batch(p, last - first), scale, bf16);
    });
  return matmul_primitive(pa, pb, po, p, scale, bf16);
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

namespace {

// bf16 operands, f32 out: oneDNN's bf16 matmul (brgemm with AVX512_BF16 dot products); below its
// threshold, or where oneDNN does not take the problem, our loops on the operands widened to f32
// (exactly: the same products, summed in f32).
Tensor run_matmul_bf16(const Tensor& a, const Tensor& b, const MatmulPlan& plan, double scale) {
  Tensor out = empty(plan.out_shape, DType::f32);
  const bool big = numel(plan.batch) * plan.m * plan.k * plan.n >= kOneDnnMatmulMin;
  if (big && matmul_onednn(a.raw_data(), b.raw_data(), out.data<float>(), plan, static_cast<float>(scale), true))
    return out;
  matmul_kernel<float>(converted(a, DType::f32).data<float>(), converted(b, DType::f32).data<float>(),
                       out.data<float>(), plan, static_cast<float>(scale));
  return out;
}

}  // namespace

Tensor run_matmul(const Tensor& a, const Tensor& b, const MatmulPlan& plan, double scale) {
  if (a.dtype() == DType::bf16) return run_matmul_bf16(a, b, plan, scale);
  Tensor out = empty(plan.out_shape, a.dtype());
  const bool big = numel(plan.batch) * plan.m * plan.k * plan.n >= kOneDnnMatmulMin;
  if (big && few_rows_matmul(a, b, out, plan, static_cast<float>(scale))) return out;
  if (a.dtype() == DType::f32 && big &&
      matmul_onednn(a.data<float>(), b.data<float>(), out.data<float>(), plan, static_cast<float>(scale), false))
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
