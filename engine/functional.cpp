#include "engine/functional.h"

#include "engine/autograd.h"
#include "engine/forward_ad.h"
#include "engine/ops/shape.h"

namespace ag {

namespace {

// A fresh leaf with x's values, carrying `tangent` if it is defined (under the active level).
Tensor leaf_of(const Tensor& x, const Tensor& tangent, bool requires_grad) {
  AG_CHECK(x.defined(), "function transforms: a primal is undefined");
  Tensor leaf = tangent.defined() ? fw::make_dual(x.detach(), tangent) : x.detach();
  if (requires_grad && is_floating(x.dtype())) leaf.requires_grad_();
  return leaf;
}

Tensor or_zeros(const Tensor& t, const Tensor& like) { return t.defined() ? t : zeros_like(like); }

// f(leaves)'s one element, and its gradient with respect to each leaf (zeros where unused). Under a
// DualLevel the gradients carry tangents: forward-over-reverse.
std::vector<Tensor> gradients_of(const char* what, const TensorsFn& f, const std::vector<Tensor>& leaves) {
  const std::vector<Tensor> out = f(leaves);
  AG_CHECK(out.size() == 1 && out[0].numel() == 1, "{}: f must return one one-element tensor, got {} tensor(s){}", what,
           out.size(), out.empty() ? "" : fmt::format(", the first of shape {}", shape_str(out[0].shape())));
  if (!out[0].requires_grad()) {
    std::vector<Tensor> zeros;
    for (const Tensor& leaf : leaves) zeros.push_back(zeros_like(leaf));
    return zeros;
  }
  std::vector<Tensor> grads = grad({out[0]}, leaves, {}, /*create_graph=*/false, /*allow_unused=*/true);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = or_zeros(grads[i], leaves[i]);
  return grads;
}

// Per input element (the inputs' elements in order): a one-hot tensor of the input's shape.
Tensor one_hot(const Tensor& like, int64_t element) {
  Tensor e = zeros({like.numel()}, like.dtype());
  e.set({element}, 1.0);
  return reshape(e, like.shape());
}

// Slices (each of `slice`'s shape) stacked into a tensor of shape `leading` ++ `trailing`:
// stacked along a new first dim (rows of jacrev) or last dim (columns of jacfwd).
Tensor assemble(const std::vector<Tensor>& slices, bool as_rows, const Shape& leading, const Shape& trailing,
                DType dtype) {
  Shape shape = leading;
  shape.insert(shape.end(), trailing.begin(), trailing.end());
  if (slices.empty()) return zeros(shape, dtype);
  return reshape(stack(slices, as_rows ? 0 : static_cast<int64_t>(slices[0].dim())), shape);
}

}  // namespace

JvpResult jvp(const TensorsFn& f, const std::vector<Tensor>& primals, const std::vector<Tensor>& tangents) {
  AG_CHECK(tangents.size() == primals.size(), "jvp: got {} tangents for {} primals", tangents.size(), primals.size());
  const fw::DualLevel level;
  std::vector<Tensor> duals;
  for (size_t i = 0; i < primals.size(); ++i) duals.push_back(leaf_of(primals[i], tangents[i], false));
  JvpResult result;
  for (const Tensor& out : f(duals)) {
    result.tangents.push_back(or_zeros(fw::tangent_of(out), out));
    result.outputs.push_back(out.detach());
  }
  return result;
}

VjpResult vjp(const TensorsFn& f, const std::vector<Tensor>& primals, const std::vector<Tensor>& cotangents) {
  std::vector<Tensor> leaves;
  for (const Tensor& x : primals) leaves.push_back(leaf_of(x, {}, true));
  const GradModeGuard grad_mode(true);
  const std::vector<Tensor> outputs = f(leaves);
  AG_CHECK(cotangents.size() == outputs.size(), "vjp: got {} cotangents for {} outputs", cotangents.size(),
           outputs.size());
  std::vector<Tensor> reached, given;  // the outputs a gradient can flow back from
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (!outputs[o].requires_grad()) continue;
    reached.push_back(outputs[o]);
    given.push_back(cotangents[o]);
  }
  std::vector<Tensor> differentiable;
  for (const Tensor& leaf : leaves)
    if (leaf.requires_grad()) differentiable.push_back(leaf);
  std::vector<Tensor> grads;
  if (!reached.empty() && !differentiable.empty())
    grads = grad(reached, differentiable, given, /*create_graph=*/false, /*allow_unused=*/true);
  VjpResult result;
  size_t next = 0;
  for (const Tensor& leaf : leaves)
    result.cotangents.push_back(leaf.requires_grad() && next < grads.size() ? or_zeros(grads[next++], leaf)
                                                                            : zeros_like(leaf));
  for (const Tensor& out : outputs) result.outputs.push_back(out.detach());
  return result;
}

Jacobian jacfwd(const TensorsFn& f, const std::vector<Tensor>& primals) {
  std::vector<std::vector<std::vector<Tensor>>> columns;  // [output][input][input element]
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < primals.size(); ++i) {
    for (int64_t e = 0; e < primals[i].numel(); ++e) {
      std::vector<Tensor> tangents(primals.size());
      tangents[i] = one_hot(primals[i], e);
      JvpResult r = jvp(f, primals, tangents);  // column e of every ∂out/∂x_i
      outputs = r.outputs;
      columns.resize(outputs.size(), std::vector<std::vector<Tensor>>(primals.size()));
      for (size_t o = 0; o < outputs.size(); ++o) columns[o][i].push_back(r.tangents[o]);
    }
  }
  if (outputs.empty()) {  // no input element: f once, for the outputs' shapes
    outputs = f(primals);
    columns.resize(outputs.size(), std::vector<std::vector<Tensor>>(primals.size()));
  }
  Jacobian jacobian(outputs.size());
  for (size_t o = 0; o < outputs.size(); ++o)
    for (size_t i = 0; i < primals.size(); ++i)
      jacobian[o].push_back(assemble(columns[o][i], false, outputs[o].shape(), primals[i].shape(), outputs[o].dtype()));
  return jacobian;
}

Jacobian jacrev(const TensorsFn& f, const std::vector<Tensor>& primals) {
  std::vector<Tensor> leaves;
  for (const Tensor& x : primals) leaves.push_back(leaf_of(x, {}, true));
  const GradModeGuard grad_mode(true);
  const std::vector<Tensor> outputs = f(leaves);
  Jacobian jacobian(outputs.size());
  for (size_t o = 0; o < outputs.size(); ++o) {
    std::vector<std::vector<Tensor>> rows(leaves.size());  // [input][output element]
    for (int64_t e = 0; outputs[o].requires_grad() && e < outputs[o].numel(); ++e) {
      // row e of every ∂out_o/∂x_i: one VJP, the forward's graph kept for the next
      const std::vector<Tensor> grads = grad({outputs[o]}, leaves, {one_hot(outputs[o], e)}, /*create_graph=*/false,
                                             /*allow_unused=*/true, /*retain_graph=*/true);
      for (size_t i = 0; i < leaves.size(); ++i) rows[i].push_back(or_zeros(grads[i], leaves[i]));
    }
    for (size_t i = 0; i < leaves.size(); ++i)
      jacobian[o].push_back(assemble(rows[i], true, outputs[o].shape(), leaves[i].shape(), outputs[o].dtype()));
  }
  return jacobian;
}

std::vector<std::vector<Tensor>> hessian(const TensorsFn& f, const std::vector<Tensor>& primals) {
  // H = jacfwd(∇f): each column one forward-over-reverse pass (the gradient's tangent)
  const TensorsFn gradient = [&f](const std::vector<Tensor>& x) {
    std::vector<Tensor> leaves;
    for (const Tensor& xi : x) leaves.push_back(leaf_of(xi, fw::tangent_of(xi), true));
    const GradModeGuard grad_mode(true);
    return gradients_of("hessian", f, leaves);
  };
  return jacfwd(gradient, primals);
}

HvpResult hvp(const TensorsFn& f, const std::vector<Tensor>& primals, const std::vector<Tensor>& tangents) {
  AG_CHECK(tangents.size() == primals.size(), "hvp: got {} tangents for {} primals", tangents.size(), primals.size());
  const fw::DualLevel level;
  std::vector<Tensor> leaves;
  for (size_t i = 0; i < primals.size(); ++i) leaves.push_back(leaf_of(primals[i], tangents[i], true));
  const GradModeGuard grad_mode(true);
  HvpResult result;
  for (const Tensor& g : gradients_of("hvp", f, leaves)) {
    result.products.push_back(or_zeros(fw::tangent_of(g), g));
    result.gradients.push_back(g.detach());
  }
  return result;
}

}  // namespace ag
