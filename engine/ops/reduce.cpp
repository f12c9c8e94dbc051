// Reductions (sum, mean, max, min over dims or the whole tensor) and the broadcast pair
// broadcast_to / sum_to, which are each other's backward. Kernels: engine/kernels/reduce.cpp.
#include "engine/ops/reduce.h"

#include <cmath>

#include "engine/autograd.h"
#include "engine/kernels/broadcast.h"
#include "engine/kernels/reduce.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/shape.h"
#include "engine/registry.h"

namespace ag {

namespace {

// Grad of a reduced output spread back over the input's shape: g (out shape) → x's shape.
Tensor spread(const Tensor& grad, const Shape& kept_shape, const Shape& in_shape) {
  return broadcast_to(reshape(grad, kept_shape), in_shape);
}

Tensor sum_over(const Tensor& x, const ReducePlan& plan) {
  Tensor out = sum_kernel(x, plan, 1.0);
  record(out, {"SumBackward", {.formula = "out = Σ x  →  dx = g broadcast back to x's shape"}}, {x}, {},
         [kept = plan.kept_shape, in = x.shape()](const BackwardContext& c) {
           // out = Σ_dims x
           return std::vector<Tensor>{spread(c.grad, kept, in)};
         });
  return out;
}

Tensor mean_over(const Tensor& x, const ReducePlan& plan) {
  const double count = static_cast<double>(plan.reduced_count);
  Tensor out = sum_kernel(x, plan, count == 0 ? NAN : 1.0 / count);
  record(out, {"MeanBackward", {.formula = "out = Σ x / n  →  dx = g / n broadcast back to x's shape"}}, {x}, {},
         [kept = plan.kept_shape, in = x.shape(), count](const BackwardContext& c) {
           // out = Σ_dims x / count
           return std::vector<Tensor>{mul(spread(c.grad, kept, in), 1.0 / count)};
         });
  return out;
}

// Max (or min) over the plan's dims; the gradient goes to the first extreme element (or, with
// split_ties, evenly to all of them), marked by a weight tensor of x's shape saved in the forward.
Tensor extreme_over(std::string_view op, const Tensor& x, const ReducePlan& plan, bool is_max, bool split_ties) {
  Extreme e = extreme_kernel(op, x, plan, is_max, split_ties);
  record(e.values,
         is_max
             ? OpKind{"MaxBackward",
                      {.formula = "out = max x  →  dx = g at the arg-max (shared among tied elements), 0 elsewhere"}}
             : OpKind{"MinBackward",
                      {.formula = "out = min x  →  dx = g at the arg-min (shared among tied elements), 0 elsewhere"}},
         {x}, {e.one_hot}, [kept = plan.kept_shape, in = x.shape()](const BackwardContext& c) {
           // out = max_dims x  →  dx = g at the arg-max (shared among ties over all dims), 0 elsewhere
           return std::vector<Tensor>{mul(spread(c.grad, kept, in), c.saved[0])};
         });
  return e.values;
}

}  // namespace

Tensor sum(const Tensor& x) { return sum_over(x, plan_reduce_all(x)); }
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return sum_over(x, plan_reduce("sum", x, dims, keepdim));
}
Tensor mean(const Tensor& x) { return mean_over(x, plan_reduce_all(x)); }
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return mean_over(x, plan_reduce("mean", x, dims, keepdim));
}
Tensor max(const Tensor& x) { return extreme_over("max", x, plan_reduce_all(x), true, true); }
Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_over("max", x, plan_reduce("max", x, {dim}, keepdim), true, false);
}
Tensor min(const Tensor& x) { return extreme_over("min", x, plan_reduce_all(x), false, true); }
Tensor min(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_over("min", x, plan_reduce("min", x, {dim}, keepdim), false, false);
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return argmax_kernel(x, dim, plan_reduce("argmax", x, {dim}, keepdim));
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  AG_CHECK(x.defined(), "broadcast_to: the input is undefined");
  AG_CHECK(broadcast_shapes("broadcast_to", x.shape(), shape) == shape, "broadcast_to: cannot broadcast {} to {}",
           shape_str(x.shape()), shape_str(shape));
  if (x.shape() == shape) return x;
  Tensor out = empty(shape, x.dtype());
  dispatch_floating(x.dtype(), "broadcast_to", [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for_each_broadcast<1>(shape, {x.shape()}, [&](int64_t i, const std::array<int64_t, 1>& at) { po[i] = px[at[0]]; });
  });
  record(out, {"BroadcastToBackward", {.formula = "out = x broadcast  →  dx = g summed to x's shape"}}, {x}, {},
         [in = x.shape()](const BackwardContext& c) {
           // out = x broadcast to shape
           return std::vector<Tensor>{sum_to(c.grad, in)};
         });
  return out;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  AG_CHECK(x.defined(), "sum_to: the input is undefined");
  if (x.shape() == shape) return x;
  AG_CHECK(broadcast_shapes("sum_to", shape, x.shape()) == x.shape(),
           "sum_to: shape {} does not broadcast to the input's shape {}", shape_str(shape), shape_str(x.shape()));
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && x.shape()[d] != 1)) dims.push_back(d);
  Tensor reduced = dims.empty() ? x : sum(x, dims, true);
  return reshape(reduced, shape);
}

void register_reduce_ops(Registry& registry) {
  const std::vector<std::vector<Shape>> shapes = {{{3, 4}}, {{2, 3, 5}}, {{1}}, {{7}}};
  const Domain distinct{.distinct = true};
  registry.add({"sum", [](const auto& in) { return sum(in[0]); }, real_inputs(), shapes});
  registry.add({"sum_dims",
                [](const auto& in) {
                  return sum(in[0], {0, -1}, false);
                },
                real_inputs(),
                {{{3, 4}}, {{2, 3, 5}}, {{1, 1}}}});
  registry.add({"sum_keepdim", [](const auto& in) { return sum(in[0], {-1}, true); }, real_inputs(), shapes});
  registry.add({"mean", [](const auto& in) { return mean(in[0]); }, real_inputs(), shapes});
  registry.add({"mean_dims", [](const auto& in) { return mean(in[0], {0}, true); }, real_inputs(), shapes});
  registry.add({"max", [](const auto& in) { return max(in[0]); }, real_inputs(distinct), shapes});
  registry.add({"max_dim", [](const auto& in) { return max(in[0], -1, false); }, real_inputs(distinct), shapes});
  registry.add({"min", [](const auto& in) { return min(in[0]); }, real_inputs(distinct), shapes});
  registry.add({"min_dim", [](const auto& in) { return min(in[0], 0, true); }, real_inputs(distinct), shapes});
  registry.add({"broadcast_to",
                [](const auto& in) {
                  return broadcast_to(in[0], {2, 3, 4});
                },
                real_inputs(),
                {{{3, 4}}, {{3, 1}}, {{4}}, {{}}}});
  registry.add({"sum_to",
                [](const auto& in) {
                  return sum_to(in[0], {3, 1});
                },
                real_inputs(),
                {{{3, 4}}, {{2, 3, 5}}, {{3, 1}}}});
}

}  // namespace ag
