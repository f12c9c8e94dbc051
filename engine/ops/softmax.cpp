// softmax and log_softmax over one dim, and softmax's backward as an op of its own; their kernels are
// in engine/kernels/softmax.cpp.
#include "engine/ops/softmax.h"

#include "engine/autograd.h"
#include "engine/kernels/check.h"
#include "engine/kernels/softmax.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/registry.h"

namespace ag {

Tensor softmax(const Tensor& x, int64_t dim) {
  Tensor out = softmax_forward(x, dim, false);
  record(out, {"SoftmaxBackward", {.formula = "y = softmax(x)  →  dx = y ⊙ (g − Σ(g ⊙ y))"}}, {x}, {out},
         [d = normalize_dim("softmax", dim, x.dim())](const BackwardContext& c) {
           // y = exp(x - max) / Σ_dim exp(x - max)  →  dx = y ⊙ (g − Σ_dim(g ⊙ y))
           return std::vector<Tensor>{softmax_backward(c.saved[0], c.grad, d)};
         });
  return out;
}

// Note [softmax's backward is an op]
// softmax's derivative is one formula, computed by one fused kernel (softmax_backward_data: a pass
// per row, oneDNN or vectorised loops), and recorded as a node of its own so that the second order
// (create_graph) differentiates the same formula: PyTorch's _softmax_backward_data does the same.
Tensor softmax_backward(const Tensor& y, const Tensor& grad, int64_t dim) {
  check_floating("softmax_backward", "y", y);
  check_floating("softmax_backward", "grad", grad);
  check_same_dtype("softmax_backward", y, grad);
  AG_CHECK(y.shape() == grad.shape(), "softmax_backward: y has shape {} but grad has shape {}", shape_str(y.shape()),
           shape_str(grad.shape()));
  const int64_t d = normalize_dim("softmax_backward", dim, y.dim());
  Tensor dx = softmax_backward_data(y, grad, d);
  record(dx,
         {"SoftmaxBackwardBackward",
          {.formula = "dx = y ⊙ (g − Σ g ⊙ y)  →  dy = u ⊙ (g − Σ g ⊙ y) − g Σ u ⊙ y, dg = y ⊙ (u − Σ u ⊙ y)"}},
         {y, grad}, {y, grad}, [d](const BackwardContext& c) {
           // dx = y * (g - Σ_dim(g * y)), u the gradient arriving at dx
           //   →  dy = u * (g - Σ_dim(g * y)) - g * Σ_dim(u * y),  dg = y * (u - Σ_dim(u * y))
           const Tensor& y = c.saved[0];
           const Tensor& g = c.saved[1];
           const Tensor& u = c.grad;
           std::vector<Tensor> grads(2);
           if (c.needs_grad[0])
             grads[0] = sub(mul(u, sub(g, sum(mul(g, y), {d}, true))), mul(g, sum(mul(u, y), {d}, true)));
           if (c.needs_grad[1]) grads[1] = softmax_backward(y, u, d);
           return grads;
         });
  return dx;
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  Tensor out = softmax_forward(x, dim, true);
  record(out, {"LogSoftmaxBackward", {.formula = "y = log_softmax(x)  →  dx = g − eʸ Σ g"}}, {x}, {out},
         [d = normalize_dim("log_softmax", dim, x.dim())](const BackwardContext& c) {
           // y = x - max - log Σ_dim exp(x - max)  →  dx = g − exp(y) ⊙ Σ_dim g
           const Tensor& y = c.saved[0];
           return std::vector<Tensor>{sub(c.grad, mul(exp(y), sum(c.grad, {d}, true)))};
         });
  return out;
}

void register_softmax_ops(Registry& registry) {
  const std::vector<std::vector<Shape>> last = {{{5}}, {{3, 4}}, {{2, 3, 4}}, {{1}}, {{3, 1}}, {{}}};
  const std::vector<std::vector<Shape>> first = {{{5}}, {{3, 4}}, {{2, 3, 4}}, {{1, 4}}, {{1}}};
  const std::vector<std::vector<Shape>> second = {{{3, 4}}, {{2, 3, 4}}, {{2, 1, 3}}, {{4, 1}}};
  registry.add({"softmax", [](const auto& in) { return softmax(in[0], -1); }, real_inputs(), last});
  registry.add({"softmax_dim0", [](const auto& in) { return softmax(in[0], 0); }, real_inputs(), first});
  registry.add({"softmax_dim1", [](const auto& in) { return softmax(in[0], 1); }, real_inputs(), second});
  // softmax's backward as an op of (y, g): y is any real tensor here (the formula is a polynomial in y).
  registry.add({"softmax_backward",
                [](const auto& in) { return softmax_backward(in[0], in[1], -1); },
                real_inputs(),
                {{{5}, {5}}, {{3, 4}, {3, 4}}, {{2, 3, 4}, {2, 3, 4}}, {{1}, {1}}}});
  registry.add({"softmax_backward_dim0",
                [](const auto& in) { return softmax_backward(in[0], in[1], 0); },
                real_inputs(),
                {{{3, 4}, {3, 4}}, {{2, 3, 4}, {2, 3, 4}}}});
  registry.add({"log_softmax", [](const auto& in) { return log_softmax(in[0], -1); }, real_inputs(), last});
  registry.add({"log_softmax_dim0", [](const auto& in) { return log_softmax(in[0], 0); }, real_inputs(), first});
  registry.add({"log_softmax_dim1", [](const auto& in) { return log_softmax(in[0], 1); }, real_inputs(), second});
}

}  // namespace ag
