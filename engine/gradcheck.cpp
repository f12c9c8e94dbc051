#include "engine/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <ostream>

#include "engine/autograd.h"
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

// Each element of `input` nudged by ±eps in turn.
void check_elements(const std::function<Tensor(const std::vector<Tensor>&)>& fn, std::vector<Tensor>& inputs, int which,
                    const Tensor& v, const Tensor& analytic, const Tolerance& tol, GradcheckResult& result) {
  Tensor& x = inputs[which];
  double* data = x.data<double>();
  const double* grad = analytic.defined() ? analytic.data<double>() : nullptr;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double original = data[i];
    data[i] = original + tol.eps;
    const double plus = projected_output(fn, inputs, v);
    data[i] = original - tol.eps;
    const double minus = projected_output(fn, inputs, v);
    data[i] = original;
    add_comparison(result, tol,
                   {.input = which,
                    .index = multi_index(x.shape(), i),
                    .analytic = grad ? grad[i] : 0.0,
                    .numeric = (plus - minus) / (2 * tol.eps)});
  }
}

// Along random unit directions u: numeric (L(x+εu) - L(x-εu)) / 2ε against ⟨∇L, u⟩.
void check_directions(const std::function<Tensor(const std::vector<Tensor>&)>& fn, std::vector<Tensor>& inputs,
                      int which, const Tensor& v, const Tensor& analytic, const GradcheckOptions& options,
                      Generator& gen, GradcheckResult& result) {
  const Tolerance& tol = options.tolerance;
  Tensor original = clone(inputs[which].detach());
  for (int k = 0; k < options.directions; ++k) {
    Tensor u = randn(original.shape(), DType::f64, gen);
    u = div(u, sqrt(sum(mul(u, u))));
    inputs[which].detach().copy_(add(original, mul(u, tol.eps)));
    const double plus = projected_output(fn, inputs, v);
    inputs[which].detach().copy_(sub(original, mul(u, tol.eps)));
    const double minus = projected_output(fn, inputs, v);
    inputs[which].detach().copy_(original);
    add_comparison(result, tol,
                   {.input = which,
                    .index = fmt::format("u{}", k),
                    .analytic = analytic.defined() ? sum(mul(analytic, u)).item() : 0.0,
                    .numeric = (plus - minus) / (2 * tol.eps)});
  }
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  std::vector<Tensor> leaves;
  for (const Tensor& input : inputs) {
    AG_CHECK(!input.defined() || input.dtype() == DType::f64 || !input.requires_grad(),
             "gradcheck: inputs that require grad must be f64 (finite differences need the precision), got {} {}",
             dtype_name(input.dtype()), shape_str(input.shape()));
    Tensor leaf = input;
    if (input.defined() && input.requires_grad()) leaf = clone(input.detach()).requires_grad_();
    leaves.push_back(leaf);
  }
  Generator gen(options.seed);
  Tensor output = fn(leaves);
  AG_CHECK(output.requires_grad(), "gradcheck: the output does not require grad; no input reaches it");
  Tensor v = randn(output.shape(), output.dtype(), gen);
  output.backward(v);

  GradcheckResult result;
  for (int i = 0; i < static_cast<int>(leaves.size()); ++i) {
    if (!leaves[i].defined() || !leaves[i].requires_grad()) continue;
    Tensor analytic = leaves[i].grad();
    NoGradGuard no_grad;  // the nudges below are in-place writes to leaves
    if (leaves[i].numel() <= options.max_elements_exact) {
      check_elements(fn, leaves, i, v, analytic, options.tolerance, result);
    } else {
      check_directions(fn, leaves, i, v, analytic, options, gen, result);
    }
  }
  // Violations first (by how far past tolerance), then the largest errors.
  const Tolerance& tol = options.tolerance;
  auto excess = [&](const ElementError& e) { return e.abs_error - (tol.atol + tol.rtol * std::abs(e.numeric)); };
  std::sort(result.worst.begin(), result.worst.end(),
            [&](const ElementError& a, const ElementError& b) { return excess(a) > excess(b); });
  if (static_cast<int>(result.worst.size()) > options.report_worst) result.worst.resize(options.report_worst);
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
  for (const GradcheckRow& row : rows) {
    const GradcheckResult result = gradcheck_op(*row.op, row.shapes, {}, options.second_order);
    out << fmt::format("{:<22} {:<28} {:>12.3e} {:>12.3e}  {}\n", row.op->name, shapes_str(row.shapes),
                       result.max_abs_error, result.max_rel_error, result.ok ? "ok" : "FAIL");
    if (!result.ok || options.verbose) out << result.report();
    if (!result.ok) ++failed;
  }
  out << fmt::format("{} rows, {} passed, {} failed\n", rows.size(), rows.size() - failed, failed);
  return failed;
}

std::string GradcheckResult::report() const {
  std::string out = fmt::format("{} comparisons, max abs error {:.3e}, max rel error {:.3e}: {}\n", checked,
                                max_abs_error, max_rel_error, ok ? "OK" : "NOT OK");
  out += fmt::format("  {:>5} {:>12} {:>14} {:>14} {:>10} {:>10}\n", "input", "index", "analytic", "numeric", "abs err",
                     "rel err");
  for (const ElementError& e : worst) {
    out += fmt::format("  {:>5} {:>12} {:>14.7g} {:>14.7g} {:>10.3e} {:>10.3e}\n", e.input, e.index, e.analytic,
                       e.numeric, e.abs_error, e.rel_error);
  }
  return out;
}

}  // namespace ag
