// Reductions without recording: which dims a reduction folds, and the kernels over such a plan.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

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

// Σ f(p[i]) over [0, n) in double, in eight lanes (lane l takes every eighth element from l)
// added in a fixed order at the end: independent sums the compiler vectorises, and the same bits
// on any machine and thread count.
template <typename T, typename F>
double sum_in_lanes(const T* p, int64_t n, F f) {
  constexpr int64_t kLanes = 8;
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += f(static_cast<double>(p[i + l]));
  for (int64_t l = 0; i < n; ++i, ++l) lanes[l] += f(static_cast<double>(p[i]));
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
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
