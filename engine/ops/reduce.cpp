// Reductions (sum, mean, max, min over dims or the whole tensor) and the broadcast pair
// broadcast_to / sum_to, which are each other's backward.
#include <cmath>
#include <limits>
#include <optional>

#include "engine/autograd.h"
#include "engine/kernels/broadcast.h"
#include "engine/ops.h"
#include "engine/registry.h"

namespace ag {

namespace {

// Which dims a reduction removes, and the shapes around it.
struct ReducePlan {
  std::vector<bool> reduced;  // per input dim
  Shape kept_shape;           // input shape with reduced dims set to 1 (keepdim result)
  Shape out_shape;            // keepdim ? kept_shape : kept_shape without the reduced dims
  int64_t reduced_count = 1;  // elements folded into each output element
};

ReducePlan plan_reduce(std::string_view op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  AG_CHECK(x.defined(), "{}: the input is undefined", op);
  AG_CHECK(is_floating(x.dtype()), "{}: expected a floating tensor, got {} of shape {}", op, dtype_name(x.dtype()),
           shape_str(x.shape()));
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

// The reduced dims as one block: x viewed as (outer, reduced, inner) with only the middle
// summed, when the reduced dims are contiguous in the shape (a bias gradient's leading dims, a
// row sum's trailing ones); nullopt otherwise. Size-1 dims do not break the block.
struct ReducedBlock {
  int64_t outer = 1, reduced = 1, inner = 1;
};

std::optional<ReducedBlock> reduced_block(const Shape& in_shape, const ReducePlan& plan) {
  ReducedBlock block;
  int part = 0;  // 0: before the reduced dims, 1: in them, 2: after
  for (size_t d = 0; d < in_shape.size(); ++d) {
    if (in_shape[d] == 1) continue;
    if (plan.reduced[d] && part == 2) return std::nullopt;
    if (plan.reduced[d]) part = 1;
    if (!plan.reduced[d] && part == 1) part = 2;
    (part == 0 ? block.outer : part == 1 ? block.reduced : block.inner) *= in_shape[d];
  }
  return block;
}

// out[o] = scale · Σ x over output element o's reduced positions, summed in double in row-major
// order whichever path runs, so every path gives the same bits.
Tensor sum_kernel(const Tensor& x, const ReducePlan& plan, double scale) {
  Tensor out = empty(plan.out_shape, x.dtype());
  const std::optional<ReducedBlock> block = reduced_block(x.shape(), plan);
  dispatch_floating(x.dtype(), "sum", [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    if (block) {
      // Plain copies, not a structured binding: clang 14 (the fuzz build) cannot capture those.
      const int64_t outer = block->outer, reduced = block->reduced, inner = block->inner;
      // Parallel over output elements; each sums its (reduced) inputs at stride inner.
      parallel_for_ranges(outer * inner, reduced, [&](int64_t begin, int64_t end) {
        std::vector<double> acc(end - begin, 0.0);
        for (int64_t o = begin; o < end;) {
          const int64_t i = o / inner, j0 = o % inner, j1 = std::min(inner, j0 + (end - o));
          double* a = acc.data() + (o - begin);
          for (int64_t r = 0; r < reduced; ++r) {
            const T* row = px + (i * reduced + r) * inner;
            for (int64_t j = j0; j < j1; ++j) a[j - j0] += row[j];
          }
          o += j1 - j0;
        }
        for (int64_t o = begin; o < end; ++o) po[o] = static_cast<T>(acc[o - begin] * scale);
      });
      return;
    }
    std::vector<double> acc(out.numel(), 0.0);
    for_each_reduced(
        x.shape(), plan, [&](int64_t o, int64_t i) { acc[o] += px[i]; }, out.numel());
    for (int64_t o = 0; o < out.numel(); ++o) po[o] = static_cast<T>(acc[o] * scale);
  });
  return out;
}

// Grad of a reduced output spread back over the input's shape: g (out shape) → x's shape.
Tensor spread(const Tensor& grad, const Shape& kept_shape, const Shape& in_shape) {
  return broadcast_to(reshape(grad, kept_shape), in_shape);
}

Tensor sum_over(const Tensor& x, const ReducePlan& plan) {
  Tensor out = sum_kernel(x, plan, 1.0);
  record(out, "SumBackward", {x}, {}, [kept = plan.kept_shape, in = x.shape()](const BackwardContext& c) {
    // out = Σ_dims x
    return std::vector<Tensor>{spread(c.grad, kept, in)};
  });
  return out;
}

Tensor mean_over(const Tensor& x, const ReducePlan& plan) {
  const double count = static_cast<double>(plan.reduced_count);
  Tensor out = sum_kernel(x, plan, count == 0 ? NAN : 1.0 / count);
  record(out, "MeanBackward", {x}, {}, [kept = plan.kept_shape, in = x.shape(), count](const BackwardContext& c) {
    // out = Σ_dims x / count
    return std::vector<Tensor>{mul(spread(c.grad, kept, in), 1.0 / count)};
  });
  return out;
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

// Max (or min) over the plan's dims; the gradient goes to the first extreme element (or, with
// split_ties, evenly to all of them), marked by a weight tensor of x's shape saved in the forward.
Tensor extreme_over(std::string_view op, const Tensor& x, const ReducePlan& plan, bool is_max, bool split_ties) {
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
  record(out, is_max ? "MaxBackward" : "MinBackward", {x}, {one_hot},
         [kept = plan.kept_shape, in = x.shape()](const BackwardContext& c) {
           // out = max_dims x  →  dx = g at the arg-max (shared among ties over all dims), 0 elsewhere
           return std::vector<Tensor>{mul(spread(c.grad, kept, in), c.saved[0])};
         });
  return out;
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
  const ReducePlan plan = plan_reduce("argmax", x, {dim}, keepdim);
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
  record(out, "BroadcastToBackward", {x}, {}, [in = x.shape()](const BackwardContext& c) {
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
