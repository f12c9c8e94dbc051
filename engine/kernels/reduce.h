// Reductions without recording: which dims a reduction folds, and the kernels over such a plan.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/kernels/parallel.h"
#include "engine/tensor.h"

namespace ag {

// Which dims a reduction removes, and the shapes around it.
struct ReducePlan {
  std::vector<bool> reduced;  // per input dim
  Shape kept_shape;           // input shape with reduced dims set to 1 (keepdim result)
  Shape out_shape;            // keepdim ? kept_shape : kept_shape without the reduced dims
  int64_t reduced_count = 1;  // elements folded into each output element
};

// Checks x (floating) and dims (in range, none twice, at least one); a 0-d x reduces to itself.
ReducePlan plan_reduce(std::string_view op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim);
ReducePlan plan_reduce_all(const Tensor& x);  // every dim

// Eight lanes' total (an array, or a vector of eight doubles) in one fixed order.
template <typename Lanes>
double lanes_total(const Lanes& v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

// Σ term(i) over [0, n) in double, in eight lanes (lane l takes every eighth i from l) added in a
// fixed order at the end: independent sums the compiler vectorises, and the same bits on any
// machine and thread count.
template <typename Term>
[[gnu::always_inline]] inline double sum_terms_in_lanes(int64_t n, Term term) {
  constexpr int64_t kLanes = 8;
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += term(i + l);
  for (int64_t l = 0; i < n; ++i, ++l) lanes[l] += term(i);
  return lanes_total(lanes);
}

// Σ f(p[i]) over [0, n), as sum_terms_in_lanes adds.
template <typename T, typename F>
[[gnu::always_inline]] inline double sum_in_lanes(const T* p, int64_t n, F f) {
  return sum_terms_in_lanes(n, [&](int64_t i) { return f(static_cast<double>(p[i])); });
}

// The totals of `rows` sums of `size` terms each, term(row, i) for i in [0, size): each row cut into
// fixed chunks of kSumChunk added in lanes (sum_terms_in_lanes), every row's chunks in one parallel
// region, each row's chunk sums added in order. A long sum (a loss, a full sum) runs on every
// thread with the same bits at any thread count. cost_per_term: rough element-operations of one term.
inline constexpr int64_t kSumChunk = 1 << 16;
template <typename Term>
std::vector<double> sums_in_chunks(int64_t rows, int64_t size, int64_t cost_per_term, Term term) {
  const int64_t chunks = std::max<int64_t>(1, (size + kSumChunk - 1) / kSumChunk);  // per row
  std::vector<double> partial(rows * chunks), totals(rows, 0.0);
  parallel_for(rows * chunks, std::min(size, kSumChunk) * cost_per_term, [&](int64_t c) {
    const int64_t row = c / chunks, first = c % chunks * kSumChunk;
    partial[c] = sum_terms_in_lanes(std::min(size - first, kSumChunk), [&](int64_t i) { return term(row, first + i); });
  });
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t c = 0; c < chunks; ++c) totals[row] += partial[row * chunks + c];
  return totals;
}

// Note [column sums in row blocks]
// A sum down the rows of (rows, cols) values, per column, is taken in double in fixed blocks of
// kSumRowBlock rows: each block's rows added in order into the block's own sums, then the blocks'
// sums added in block order. The blocks do not depend on the thread count, so the rows are split
// between threads (each thread's memory contiguous, where splitting the columns had each thread
// read half of every row) and any thread count gives the same bits. Up to kSumRowBlock rows it is
// the sum in row order. sum_kernel, linear's bias gradient and layer norm's affine gradients all
// sum this way, so a fused kernel gives the bits of the composition it replaces.
inline constexpr int64_t kSumRowBlock = 64;

// The totals of `groups` independent sums down (rows, cols) values as the Note says, `per_column`
// sums for each column (layer norm takes two): laid out (groups, per_column, cols).
// add_rows(group, first, last, begin, end, sums) adds the group's rows [first, last), columns
// [begin, end), into sums[k · cols + j] (zeroed); a fused kernel does its per-row work there, in the
// same pass. Columns are cut into chunks too, which changes no sum: wide rows few in number still
// split between threads. cost_per_row: rough element-operations of one row.
inline constexpr int64_t kSumColumnChunk = 2048;
template <typename AddRows>
std::vector<double> column_sums_in_row_blocks(int64_t groups, int64_t rows, int64_t cols, int64_t per_column,
                                              int64_t cost_per_row, AddRows&& add_rows) {
  const int64_t blocks = (rows + kSumRowBlock - 1) / kSumRowBlock;
  const int64_t chunks = std::max<int64_t>(1, (cols + kSumColumnChunk - 1) / kSumColumnChunk);
  const int64_t chunk_width = (cols + chunks - 1) / chunks, block_size = per_column * cols;
  std::vector<double> block_sums(groups * blocks * block_size, 0.0), totals(groups * block_size, 0.0);
  const auto columns = [&](int64_t chunk) {
    return std::pair{chunk * chunk_width, std::min(cols, (chunk + 1) * chunk_width)};
  };
  parallel_for(groups * blocks * chunks, std::min(rows, kSumRowBlock) * cost_per_row / chunks, [&](int64_t task) {
    const int64_t chunk = task % chunks, block = task / chunks % blocks, group = task / chunks / blocks;
    const auto [begin, end] = columns(chunk);
    const int64_t first = block * kSumRowBlock;
    add_rows(group, first, std::min(rows, first + kSumRowBlock), begin, end,
             block_sums.data() + (group * blocks + block) * block_size);
  });
  parallel_for(groups * chunks, blocks * per_column * chunk_width, [&](int64_t task) {
    const int64_t group = task / chunks;
    const auto [begin, end] = columns(task % chunks);
    for (int64_t block = 0; block < blocks; ++block)
      for (int64_t k = 0; k < per_column; ++k) {
        const double* sums = block_sums.data() + (group * blocks + block) * block_size + k * cols;
        double* total = totals.data() + group * block_size + k * cols;
        for (int64_t j = begin; j < end; ++j) total[j] += sums[j];
      }
  });
  return totals;
}

// out[o] = scale · Σ x over output element o's reduced positions.
Tensor sum_kernel(const Tensor& x, const ReducePlan& plan, double scale);

// Max (or min) over the plan's dims, and a tensor of x's shape that is 1 at the first extreme
// element of each output (or, with split_ties, 1/count at each of the tied extremes).
struct Extreme {
  Tensor values;
  Tensor one_hot;
};
Extreme extreme_kernel(std::string_view op, const Tensor& x, const ReducePlan& plan, bool is_max, bool split_ties);

// The position along dim of the first maximum, i64.
Tensor argmax_kernel(const Tensor& x, int64_t dim, const ReducePlan& plan);

}  // namespace ag
