// softmax and log_softmax over one dim; their kernels are in engine/kernels/softmax.cpp.
#include "engine/ops/softmax.h"

#include "engine/autograd.h"
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
           const Tensor& y = c.saved[0];
           if (!grad_enabled()) return std::vector<Tensor>{softmax_backward_data(y, c.grad, d)};  // one fused pass
           return std::vector<Tensor>{mul(y, sub(c.grad, sum(mul(c.grad, y), {d}, true)))};       // create_graph
         });
  return out;
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
  registry.add({"log_softmax", [](const auto& in) { return log_softmax(in[0], -1); }, real_inputs(), last});
  registry.add({"log_softmax_dim0", [](const auto& in) { return log_softmax(in[0], 0); }, real_inputs(), first});
  registry.add({"log_softmax_dim1", [](const auto& in) { return log_softmax(in[0], 1); }, real_inputs(), second});
}

}  // namespace ag
