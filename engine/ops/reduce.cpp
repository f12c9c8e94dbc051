// Reductions (sum, mean, max, min over dims or the whole tensor), one table row each (ReduceOp), and
// the broadcast pair broadcast_to / sum_to, which are each other's backward. Kernels:
// engine/kernels/reduce.cpp.
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

// A reduction as one table row: its forward over a plan's dims, what its derivative reads, and the
// derivative, which gets g already spread back over x's shape.
struct Reduced {
  Tensor values;
  Tensor saved;  // what the derivative reads besides g; undefined if nothing
};
struct ReduceOp {
  const char* node;     // "SumBackward"
  const char* formula;  // as the step page prints it
  // `whole`: over every dim, by the whole-tensor form (max and min share the gradient among ties).
  Reduced (*forward)(const Tensor& x, const ReducePlan& plan, bool whole);
  Tensor (*derivative)(const Tensor& spread_grad, const Tensor& saved, double reduced_count);
};

Tensor reduce(const ReduceOp& op, const Tensor& x, const ReducePlan& plan, bool whole) {
  Reduced r = op.forward(x, plan, whole);
  const auto backward = [derivative = op.derivative, kept = plan.kept_shape, in = x.shape(),
                         count = static_cast<double>(plan.reduced_count)](const BackwardContext& c) {
    return std::vector<Tensor>{derivative(spread(c.grad, kept, in), c.saved.empty() ? Tensor() : c.saved[0], count)};
  };
  // A node that saved nothing may run again without retain_graph (as in PyTorch): save only what there is.
  if (r.saved.defined())
    record(r.values, {op.node, {.formula = op.formula}}, {x}, {r.saved}, backward);
  else
    record(r.values, {op.node, {.formula = op.formula}}, {x}, {}, backward);
  return r.values;
}

// The table.

constexpr ReduceOp kSum{.node = "SumBackward",
                        .formula = "out = Σ x  →  dx = g broadcast back to x's shape",
                        .forward =
                            [](const Tensor& x, const ReducePlan& plan, bool) {
                              return Reduced{sum_kernel(x, plan, 1.0), {}};
                            },
                        .derivative =
                            [](const Tensor& g, const Tensor&, double) {
                              // out = Σ_dims x
                              return g;
                            }};

constexpr ReduceOp kMean{.node = "MeanBackward",
                         .formula = "out = Σ x / n  →  dx = g / n broadcast back to x's shape",
                         .forward =
                             [](const Tensor& x, const ReducePlan& plan, bool) {
                               const double count = static_cast<double>(plan.reduced_count);
                               return Reduced{sum_kernel(x, plan, count == 0 ? NAN : 1.0 / count), {}};
                             },
                         .derivative =
                             [](const Tensor& g, const Tensor&, double count) {
                               // out = Σ_dims x / count
                               return mul(g, 1.0 / count);
                             }};

// Max (or min): the gradient goes to the first extreme element (or, over the whole tensor, evenly to
// all of them), marked by a weight tensor of x's shape saved in the forward.
constexpr ReduceOp kMax{.node = "MaxBackward",
                        .formula = "out = max x  →  dx = g at the arg-max (shared among tied elements), 0 elsewhere",
                        .forward =
                            [](const Tensor& x, const ReducePlan& plan, bool whole) {
                              Extreme e = extreme_kernel("max", x, plan, true, whole);
                              return Reduced{e.values, e.one_hot};
                            },
                        .derivative =
                            [](const Tensor& g, const Tensor& one_hot, double) {
                              // out = max_dims x  →  dx = g at the arg-max (shared among ties over all dims), 0
                              // elsewhere
                              return mul(g, one_hot);
                            }};

constexpr ReduceOp kMin{.node = "MinBackward",
                        .formula = "out = min x  →  dx = g at the arg-min (shared among tied elements), 0 elsewhere",
                        .forward =
                            [](const Tensor& x, const ReducePlan& plan, bool whole) {
                              Extreme e = extreme_kernel("min", x, plan, false, whole);
                              return Reduced{e.values, e.one_hot};
                            },
                        .derivative =
                            [](const Tensor& g, const Tensor& one_hot, double) {
                              // out = min_dims x  →  dx = g at the arg-min (shared among ties over all dims), 0
                              // elsewhere
                              return mul(g, one_hot);
                            }};

}  // namespace

Tensor sum(const Tensor& x) { return reduce(kSum, x, plan_reduce_all(x), true); }
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(kSum, x, plan_reduce("sum", x, dims, keepdim), false);
}
Tensor mean(const Tensor& x) { return reduce(kMean, x, plan_reduce_all(x), true); }
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(kMean, x, plan_reduce("mean", x, dims, keepdim), false);
}
Tensor max(const Tensor& x) { return reduce(kMax, x, plan_reduce_all(x), true); }
Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  return reduce(kMax, x, plan_reduce("max", x, {dim}, keepdim), false);
}
Tensor min(const Tensor& x) { return reduce(kMin, x, plan_reduce_all(x), true); }
Tensor min(const Tensor& x, int64_t dim, bool keepdim) {
  return reduce(kMin, x, plan_reduce("min", x, {dim}, keepdim), false);
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
