#include "engine/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <ostream>

#include "engine/autograd.h"
#include "engine/forward_ad.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"

namespace ag {

namespace {

std::string multi_index(const Shape& shape, int64_t flat) {
  Shape index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_str(index);
}

// L(inputs) = Σ v ⊙ fn(inputs), evaluated without recording.
double projected_output(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
                        const Tensor& v) {
  NoGradGuard no_grad;
  return sum(mul(fn(inputs), v)).item();
}

void add_comparison(GradcheckResult& result, const Tolerance& tol, ElementError error) {
  error.abs_error = std::abs(error.analytic - error.numeric);
  const double scale = std::max(std::abs(error.analytic), std::abs(error.numeric));
  error.rel_error = scale > 0 ? error.abs_error / scale : 0;
  const bool ok = error.abs_error <= tol.atol + tol.rtol * std::abs(error.numeric);
  result.ok = result.ok && ok;
  result.max_abs_error = std::max(result.max_abs_error, error.abs_error);
  result.max_rel_error = std::max(result.max_rel_error, error.rel_error);
  ++result.checked;
  result.worst.push_back(std::move(error));
}

// What one gradcheck compares with finite differences of L = Σ v ⊙ fn(inputs).
struct Check {
  const std::function<Tensor(const std::vector<Tensor>&)>& fn;
  const Tensor& v;
  const GradcheckOptions& options;
  bool reverse() const { return options.mode != GradcheckMode::forward; }
  bool forward() const { return options.mode != GradcheckMode::reverse; }
};

// vᵀ J d for the directions d (per input; undefined: none), by one forward-mode pass: the tangent of
// fn(inputs) projected on v. Each input with a direction becomes a dual leaf that keeps requires_grad
// (a gradient computed inside fn, as gradgradcheck's is, then carries its tangent: forward-over-reverse).
double projected_tangent(const Check& check, const std::vector<Tensor>& inputs, const std::vector<Tensor>& directions) {
  const fw::DualLevel level;
  std::vector<Tensor> duals = inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!directions[i].defined()) continue;
    duals[i] = fw::make_dual(inputs[i].detach(), directions[i]);
    duals[i].requires_grad_(inputs[i].requires_grad());
  }
  const Tensor tangent = fw::tangent_of(check.fn(duals));
  return tangent.defined() ? sum(mul(tangent, check.v)).item() : 0.0;
}

// The direction `d` on input `which` alone.
std::vector<Tensor> on_one_input(const std::vector<Tensor>& inputs, int which, const Tensor& d) {
  std::vector<Tensor> directions(inputs.size());
  directions[which] = d;
  return directions;
}

// The numeric derivative along d (of input `which`) against the checked analytic ones.
void compare_along(const Check& check, std::vector<Tensor>& inputs, int which, const std::string& index, double numeric,
                   double reverse, const Tensor& d, GradcheckResult& result) {
  const Tolerance& tol = check.options.tolerance;
  if (check.reverse())
    add_comparison(result, tol, {.input = which, .index = index, .analytic = reverse, .numeric = numeric});
  if (check.forward()) {
    const double forward = projected_tangent(check, inputs, on_one_input(inputs, which, d));
    add_comparison(result, tol,
                   {.derivative = "jvp", .input = which, .index = index, .analytic = forward, .numeric = numeric});
  }
}

// Each element of `input` nudged by ±eps in turn.
void check_elements(const Check& check, std::vector<Tensor>& inputs, int which, const Tensor& analytic,
                    GradcheckResult& result) {
  const Tolerance& tol = check.options.tolerance;
  Tensor& x = inputs[which];
  double* data = x.data<double>();
  const double* grad = analytic.defined() ? analytic.data<double>() : nullptr;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double original = data[i];
    data[i] = original + tol.eps;
    const double plus = projected_output(check.fn, inputs, check.v);
    data[i] = original - tol.eps;
    const double minus = projected_output(check.fn, inputs, check.v);
    data[i] = original;
    Tensor e;
    if (check.forward()) {
      e = zeros({x.numel()}, DType::f64);
      e.set({i}, 1.0);
      e = reshape(e, x.shape());
    }
    compare_along(check, inputs, which, multi_index(x.shape(), i), (plus - minus) / (2 * tol.eps), grad ? grad[i] : 0.0,
                  e, result);
  }
}

// Along random unit directions u: numeric (L(x+εu) - L(x-εu)) / 2ε against ⟨∇L, u⟩ and vᵀ J u.
void check_directions(const Check& check, std::vector<Tensor>& inputs, int which, const Tensor& analytic,
                      Generator& gen, GradcheckResult& result) {
  const Tolerance& tol = check.options.tolerance;
  Tensor original = clone(inputs[which].detach());
  for (int k = 0; k < check.options.directions; ++k) {
    Tensor u = randn(original.shape(), DType::f64, gen);
    u = div(u, sqrt(sum(mul(u, u))));
    inputs[which].detach().copy_(add(original, mul(u, tol.eps)));
    const double plus = projected_output(check.fn, inputs, check.v);
    inputs[which].detach().copy_(sub(original, mul(u, tol.eps)));
    const double minus = projected_output(check.fn, inputs, check.v);
    inputs[which].detach().copy_(original);
    compare_along(check, inputs, which, fmt::format("u{}", k), (plus - minus) / (2 * tol.eps),
                  analytic.defined() ? sum(mul(analytic, u)).item() : 0.0, u, result);
  }
}

// The JVP and the VJP against each other: vᵀ (J d) = Σᵢ ⟨(Jᵢᵀ v), dᵢ⟩ for a random d on every input.
void check_jvp_against_vjp(const Check& check, std::vector<Tensor>& inputs, Generator& gen, GradcheckResult& result) {
  std::vector<Tensor> directions(inputs.size());
  double reverse = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    directions[i] = randn(inputs[i].shape(), DType::f64, gen);
    if (inputs[i].grad().defined()) reverse += sum(mul(inputs[i].grad(), directions[i])).item();
  }
  add_comparison(result, check.options.tolerance,
                 {.derivative = "jvp·vjp",
                  .input = -1,
                  .index = "random d",
                  .analytic = projected_tangent(check, inputs, directions),
                  .numeric = reverse});
}

// Fresh f64 leaves for the inputs that require grad (the others as they are).
std::vector<Tensor> gradcheck_leaves(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> leaves;
  for (const Tensor& input : inputs) {
    AG_CHECK(!input.defined() || input.dtype() == DType::f64 || !input.requires_grad(),
             "gradcheck: inputs that require grad must be f64 (finite differences need the precision), got {} {}",
             dtype_name(input.dtype()), shape_str(input.shape()));
    Tensor leaf = input;
    if (input.defined() && input.requires_grad()) leaf = clone(input.detach()).requires_grad_();
    leaves.push_back(leaf);
  }
  return leaves;
}

// Violations first (by how far past tolerance), then the largest errors; at most report_worst.
void keep_worst(GradcheckResult& result, const GradcheckOptions& options) {
  const Tolerance& tol = options.tolerance;
  auto excess = [&](const ElementError& e) { return e.abs_error - (tol.atol + tol.rtol * std::abs(e.numeric)); };
  std::sort(result.worst.begin(), result.worst.end(),
            [&](const ElementError& a, const ElementError& b) { return excess(a) > excess(b); });
  if (static_cast<int>(result.worst.size()) > options.report_worst) result.worst.resize(options.report_worst);
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  std::vector<Tensor> leaves = gradcheck_leaves(inputs);
  Generator gen(options.seed);
  Tensor output = fn(leaves);
  AG_CHECK(output.requires_grad(), "gradcheck: the output does not require grad; no input reaches it");
  Tensor v = randn(output.shape(), output.dtype(), gen);
  const Check check{fn, v, options};
  if (check.reverse()) output.backward(v);

  GradcheckResult result;
  for (int i = 0; i < static_cast<int>(leaves.size()); ++i) {
    if (!leaves[i].defined() || !leaves[i].requires_grad()) continue;
    Tensor analytic = leaves[i].grad();
    NoGradGuard no_grad;  // the nudges below are in-place writes to leaves
    if (leaves[i].numel() <= options.max_elements_exact) {
      check_elements(check, leaves, i, analytic, result);
    } else {
      check_directions(check, leaves, i, analytic, gen, result);
    }
  }
  if (options.mode == GradcheckMode::both) {
    const NoGradGuard no_grad;
    check_jvp_against_vjp(check, leaves, gen, result);
  }
  keep_worst(result, options);
  return result;
}

GradcheckResult gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                              const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  Tensor output;
  {
    NoGradGuard no_grad;
    output = fn(inputs);
  }
  Generator gen(options.seed + 2);
  std::vector<Tensor> with_u = inputs;
  with_u.push_back(randn(output.shape(), DType::f64, gen).requires_grad_());
  auto first_order = [&fn, n = inputs.size()](const std::vector<Tensor>& in) {
    // The graph of the gradient is only needed when gradcheck differentiates it, not when it
    // evaluates it at nudged inputs (under NoGradGuard).
    const bool create_graph = grad_enabled();
    const GradModeGuard grad_mode(true);
    const std::vector<Tensor> x(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n));
    std::vector<Tensor> differentiable;
    for (const Tensor& t : x)
      if (t.defined() && t.requires_grad()) differentiable.push_back(t);
    const std::vector<Tensor> grads =
        grad({fn(x)}, differentiable, {in[n]}, create_graph, /*allow_unused=*/true);  // uᵀ ∂fn/∂x
    std::vector<Tensor> flat;
    for (size_t i = 0; i < grads.size(); ++i)
      flat.push_back(grads[i].defined() ? flatten(grads[i]) : zeros({differentiable[i].numel()}, DType::f64));
    return cat(flat, 0);
  };
  return gradcheck(first_order, with_u, options);
}

void check_op_shapes(const OpEntry& op, const std::vector<Shape>& shapes) {
  AG_CHECK(std::any_of(op.shape_sets.begin(), op.shape_sets.end(),
                       [&](const std::vector<Shape>& set) { return set.size() == shapes.size(); }),
           "gradcheck {}: got {} input shape(s), expected {} (as in {})", op.name, shapes.size(),
           op.shape_sets.front().size(), shapes_str(op.shape_sets.front()));
  // An op's input makers (indices drawn below a size, a padding row) rely on each input having the
  // number of dims of a registered shape set.
  const auto same_dims = [&](const std::vector<Shape>& set) {
    return std::equal(set.begin(), set.end(), shapes.begin(), shapes.end(),
                      [](const Shape& a, const Shape& b) { return a.size() == b.size(); });
  };
  std::string sets;
  for (const std::vector<Shape>& set : op.shape_sets) {
    if (!sets.empty()) sets += ", ";
    sets += shapes_str(set);
  }
  AG_CHECK(std::any_of(op.shape_sets.begin(), op.shape_sets.end(), same_dims),
           "gradcheck {}: shapes {} do not have the numbers of dims of its registered shape sets ({})", op.name,
           shapes_str(shapes), sets);
  int64_t elements = 0;
  for (const Shape& shape : shapes) elements += std::min(numel(shape), kMaxGradcheckElements + 1);
  AG_CHECK(elements <= kMaxGradcheckElements,
           "gradcheck {}: inputs of more than {} elements in all; finite differences run the op twice per element "
           "(smaller shapes?)",
           op.name, kMaxGradcheckElements);
}

GradcheckResult gradcheck_op(const OpEntry& op, const std::vector<Shape>& shapes, const GradcheckOptions& options,
                             bool second_order) {
  check_op_shapes(op, shapes);
  Generator gen(options.seed + 1);
  std::vector<Tensor> inputs = op.make_inputs(shapes, gen, DType::f64);
  GradcheckOptions with_tolerance = options;
  with_tolerance.tolerance = op.tolerance;
  return second_order ? gradgradcheck(op.fn, inputs, with_tolerance) : gradcheck(op.fn, inputs, with_tolerance);
}

GradcheckMode parse_gradcheck_mode(const std::string& text) {
  if (text == "reverse") return GradcheckMode::reverse;
  if (text == "forward") return GradcheckMode::forward;
  AG_CHECK(text == "both", "gradcheck: --mode must be reverse, forward or both, got '{}'", text);
  return GradcheckMode::both;
}

std::vector<GradcheckRow> gradcheck_rows(const OpEntry& op) {
  std::vector<GradcheckRow> rows;
  for (const std::vector<Shape>& shapes : op.shape_sets) rows.push_back({&op, shapes});
  return rows;
}

int print_gradcheck_table(std::ostream& out, const std::vector<GradcheckRow>& rows,
                          const GradcheckTableOptions& options) {
  for (const GradcheckRow& row : rows) check_op_shapes(*row.op, row.shapes);
  out << fmt::format("{:<22} {:<28} {:>12} {:>12}  {}\n", "op", "shapes", "max abs err", "max rel err", "ok");
  int failed = 0;
  int without_jvp = 0;
  for (const GradcheckRow& row : rows) {
    GradcheckResult result;
    try {
      result = gradcheck_op(*row.op, row.shapes, {.mode = options.mode}, options.second_order);
    } catch (const fw::NoJvpError& e) {
      out << fmt::format("{:<22} {:<28} no JVP: {}\n", row.op->name, shapes_str(row.shapes), e.what());
      ++without_jvp;
      continue;
    }
    out << fmt::format("{:<22} {:<28} {:>12.3e} {:>12.3e}  {}\n", row.op->name, shapes_str(row.shapes),
                       result.max_abs_error, result.max_rel_error, result.ok ? "ok" : "FAIL");
    if (!result.ok || options.verbose) out << result.report();
    if (!result.ok) ++failed;
  }
  const size_t checked = rows.size() - without_jvp;
  out << fmt::format("{} rows, {} passed, {} failed", rows.size(), checked - failed, failed);
  out << (options.mode == GradcheckMode::reverse ? std::string() : fmt::format(", {} without a JVP", without_jvp));
  out << "\n";
  return failed;
}

std::string GradcheckResult::report() const {
  std::string out = fmt::format("{} comparisons, max abs error {:.3e}, max rel error {:.3e}: {}\n", checked,
                                max_abs_error, max_rel_error, ok ? "OK" : "NOT OK");
  out += fmt::format("  {:>8} {:>5} {:>12} {:>14} {:>14} {:>10} {:>10}\n", "check", "input", "index", "analytic",
                     "numeric", "abs err", "rel err");
  for (const ElementError& e : worst) {
    out += fmt::format("  {:>8} {:>5} {:>12} {:>14.7g} {:>14.7g} {:>10.3e} {:>10.3e}\n", e.derivative,
                       e.input < 0 ? "all" : std::to_string(e.input), e.index, e.analytic, e.numeric, e.abs_error,
                       e.rel_error);
  }
  return out;
}

}  // namespace ag
