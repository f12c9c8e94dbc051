// Function transforms, JAX's and torch.func's names, on functions of several tensors returning
// several tensors (engine/README.md, "Forward mode", gives each one's cost):
//
//   jvp(f, x, t)   f(x) and J·t             one forward-mode pass
//   vjp(f, x, u)   f(x) and Jᵀ·u            one forward and one backward
//   jacfwd(f, x)   every ∂f_o/∂x_i          one JVP per input element
//   jacrev(f, x)   the same                 one forward, one VJP per output element
//   hessian(f, x)  ∂²f/∂x_i∂x_j (scalar f)  one forward-over-reverse pass per input element
//   hvp(f, x, t)   ∇f(x) and H·t            one forward-over-reverse pass
//
// x are values: the transforms differentiate at them without touching them (their requires_grad,
// grad and graph stay as they were).
#pragma once

#include <functional>
#include <vector>

#include "engine/tensor.h"

namespace ag {

using TensorsFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct JvpResult {
  std::vector<Tensor> outputs;   // f(primals)
  std::vector<Tensor> tangents;  // per output: Σ_i ∂out/∂x_i · tangents[i]
};
// Each primal's tangent must have its shape and dtype (floating).
JvpResult jvp(const TensorsFn& f, const std::vector<Tensor>& primals, const std::vector<Tensor>& tangents);

struct VjpResult {
  std::vector<Tensor> outputs;     // f(primals)
  std::vector<Tensor> cotangents;  // per primal: Σ_o cotangents[o] · ∂out_o/∂x (zeros if unused)
};
// One cotangent per output, of its shape.
VjpResult vjp(const TensorsFn& f, const std::vector<Tensor>& primals, const std::vector<Tensor>& cotangents);

// jacobian[o][i]: ∂out_o/∂x_i, of shape out_o.shape ++ x_i.shape.
using Jacobian = std::vector<std::vector<Tensor>>;
Jacobian jacfwd(const TensorsFn& f, const std::vector<Tensor>& primals);
Jacobian jacrev(const TensorsFn& f, const std::vector<Tensor>& primals);

// f returns one one-element tensor. hessian[i][j]: ∂²f/∂x_i∂x_j, of shape x_i.shape ++ x_j.shape.
std::vector<std::vector<Tensor>> hessian(const TensorsFn& f, const std::vector<Tensor>& primals);

struct HvpResult {
  std::vector<Tensor> gradients;  // per primal: ∂f/∂x_i
  std::vector<Tensor> products;   // per primal: Σ_j ∂²f/∂x_i∂x_j · tangents[j]
};
// f returns one one-element tensor; by forward-over-reverse (the tangents carried through the backward).
HvpResult hvp(const TensorsFn& f, const std::vector<Tensor>& primals, const std::vector<Tensor>& tangents);

}  // namespace ag
