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
