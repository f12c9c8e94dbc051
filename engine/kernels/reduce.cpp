// The reductions' kernels: the plan of a reduction, the sum (in double: in eight lanes along a
// contiguous row, in row blocks down the rows, or in row-major order), max/min with their
// arg-positions, and argmax.
#include "engine/kernels/reduce.h"

#include <algorithm>
#include <cmath>

#include "engine/kernels/check.h"
#include "engine/kernels/parallel.h"
#include "engine/kernels/rows.h"

namespace ag {

namespace {

// For output element o, visits the flat input offsets it folds, in row-major order:
// visit(o, offset). Parallel over output elements.
template <typename Visit>
void for_each_reduced(const Shape& in_shape, const ReducePlan& plan, Visit&& visit, int64_t out_count) {
  const Shape strides = contiguous_strides(in_shape);
  std::vector<int64_t> kept_dims, reduced_dims;
  for (int64_t d = 0; d < static_cast<int64_t>(in_shape.size()); ++d)
    (plan.reduced[d] ? reduced_dims : kept_dims).push_back(d);
  parallel_for(out_count, plan.reduced_count, [&](int64_t o) {
    int64_t base = 0;
    int64_t rest = o;
    for (size_t k = kept_dims.size(); k-- > 0;) {
      const int64_t d = kept_dims[k];
      base += (rest % in_shape[d]) * strides[d];
      rest /= in_shape[d];
    }
    for (int64_t r = 0; r < plan.reduced_count; ++r) {
      int64_t offset = base;
      int64_t rest_r = r;
      for (size_t k = reduced_dims.size(); k-- > 0;) {
        const int64_t d = reduced_dims[k];
        offset += (rest_r % in_shape[d]) * strides[d];
        rest_r /= in_shape[d];
      }
      visit(o, offset);
    }
  });
}

// Over the whole tensor the gradient is split evenly among the elements equal to the extreme
// (NaNs, if it is NaN), as in PyTorch: each of them gets 1/count in `hot`.
template <typename T>
void split_among_ties(const T* px, int64_t n, T value, T* hot) {
  auto tied = [&](T v) { return v == value || (std::isnan(v) && std::isnan(value)); };
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += tied(px[i]);
  for (int64_t i = 0; i < n; ++i) hot[i] = tied(px[i]) ? T(1) / static_cast<T>(count) : T(0);
}

// Each of `rows` contiguous rows of `size` summed into out (times scale), as sums_in_chunks adds.
template <typename T>
void sum_rows(const T* px, int64_t rows, int64_t size, double scale, T* po) {
  const std::vector<double> totals = sums_in_chunks(
      rows, size, 1, [px, size](int64_t row, int64_t i) { return static_cast<double>(px[row * size + i]); });
  for (int64_t row = 0; row < rows; ++row) po[row] = static_cast<T>(totals[row] * scale);
}

}  // namespace

ReducePlan plan_reduce(std::string_view op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  check_floating(op, "input", x);
  AG_CHECK(!dims.empty(), "{}: expected at least one dim (use the overload without dims to reduce everything)", op);
  ReducePlan plan;
  plan.reduced.assign(x.dim(), false);
  for (int64_t dim : dims) {
    const int64_t d = normalize_dim(op, dim, x.dim());
    if (x.dim() == 0) continue;  // a 0-d tensor reduces over "dim 0" to itself
    AG_CHECK(!plan.reduced[d], "{}: dim {} appears twice in the dims to reduce", op, d);
    plan.reduced[d] = true;
  }
  plan.kept_shape = x.shape();
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (plan.reduced[d]) {
      plan.reduced_count *= x.shape()[d];
      plan.kept_shape[d] = 1;
    }
    if (!plan.reduced[d] || keepdim) plan.out_shape.push_back(plan.kept_shape[d]);
  }
  return plan;
}

ReducePlan plan_reduce_all(const Tensor& x) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
  if (dims.empty()) dims.push_back(0);
  return plan_reduce("reduce", x, dims, false);
}

// out[o] = scale · Σ x over output element o's reduced positions, summed in double: contiguous
// rows in lanes and chunks (sum_rows), a sum down rows in row blocks (Note [column sums in row
// blocks]), any other set of dims in row-major order.
Tensor sum_kernel(const Tensor& x, const ReducePlan& plan, double scale) {
  Tensor out = empty(plan.out_shape, x.dtype());
  const std::optional<RowView> block = block_view(x.shape(), plan.reduced);
  dispatch_floating(x.dtype(), "sum", [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    if (block) {
      // Plain copies, not a structured binding: clang 14 (the fuzz build) cannot capture those.
      const int64_t outer = block->outer, reduced = block->size, inner = block->inner;
      if (inner == 1) return sum_rows(px, outer, reduced, scale, po);
      // Note [column sums in row blocks]: each of the outer groups sums its reduced rows of inner.
      const std::vector<double> totals = column_sums_in_row_blocks(
          outer, reduced, inner, 1, inner,
          [&](int64_t i, int64_t first, int64_t last, int64_t begin, int64_t end, double* sums) {
            for (int64_t r = first; r < last; ++r) {
              const T* row = px + (i * reduced + r) * inner;
              for (int64_t j = begin; j < end; ++j) sums[j] += row[j];
            }
          });
      for (int64_t o = 0; o < outer * inner; ++o) po[o] = static_cast<T>(totals[o] * scale);
      return;
    }
    std::vector<double> acc(out.numel(), 0.0);
    for_each_reduced(
        x.shape(), plan, [&](int64_t o, int64_t i) { acc[o] += px[i]; }, out.numel());
    for (int64_t o = 0; o < out.numel(); ++o) po[o] = static_cast<T>(acc[o] * scale);
  });
  return out;
}

Extreme extreme_kernel(std::string_view op, const Tensor& x, const ReducePlan& plan, bool is_max, bool split_ties) {
  AG_CHECK(plan.reduced_count > 0, "{}: cannot reduce an empty dimension (input shape {})", op, shape_str(x.shape()));
  Tensor out = empty(plan.out_shape, x.dtype());
  Tensor one_hot = zeros(x.shape(), x.dtype());
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    std::vector<int64_t> best(out.numel(), -1);
    for_each_reduced(
        x.shape(), plan,
        [&](int64_t o, int64_t i) {
          const T v = px[i];
          int64_t& b = best[o];  // the first NaN wins, as in PyTorch
          if (b < 0 || (is_max ? v > px[b] : v < px[b]) || (std::isnan(v) && !std::isnan(px[b]))) b = i;
        },
        out.numel());
    T* hot = one_hot.data<T>();
    for (int64_t o = 0; o < out.numel(); ++o) {
      po[o] = px[best[o]];
      hot[best[o]] = T(1);
    }
    if (split_ties) split_among_ties(px, x.numel(), po[0], hot);
  });
  return {out, one_hot};
}

Tensor argmax_kernel(const Tensor& x, int64_t dim, const ReducePlan& plan) {
  AG_CHECK(plan.reduced_count > 0, "argmax: cannot reduce an empty dimension (input shape {})", shape_str(x.shape()));
  Tensor out = empty(plan.out_shape, DType::i64);
  const int64_t d = normalize_dim("argmax", dim, x.dim());
  const int64_t stride = x.dim() == 0 ? 1 : contiguous_strides(x.shape())[d];
  const int64_t size = x.dim() == 0 ? 1 : x.shape()[d];
  dispatch_floating(x.dtype(), "argmax", [&]<typename T>() {
    const T* px = x.data<T>();
    std::vector<int64_t> best(out.numel(), -1);
    for_each_reduced(
        x.shape(), plan,
        [&](int64_t o, int64_t i) {
          if (best[o] < 0 || px[i] > px[best[o]]) best[o] = i;
        },
        out.numel());
    int64_t* po = out.data<int64_t>();
    for (int64_t o = 0; o < out.numel(); ++o) po[o] = (best[o] / stride) % size;
  });
  return out;
}

}  // namespace ag
