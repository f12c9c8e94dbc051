#include "engine/ops/unary_op.h"

#include <vector>

#include "engine/autograd.h"

namespace ag {

Tensor apply(const UnaryOp& op, const Tensor& x) {
  Tensor out = op.forward(op.name, x);
  record(
      out, {op.node, {.formula = op.formula}}, {x}, {op.saves == UnaryOp::Saves::input ? x : out},
      [derivative = op.derivative](const BackwardContext& c) {
        return std::vector<Tensor>{derivative(c.grad, c.saved[0])};
      },
      [derivative = op.derivative](const fw::JvpContext& c) {
        // elementwise: J is diagonal, so the derivative applied to the tangent is the JVP
        return derivative(c.tangents[0], c.saved[0]);
      });
  return out;
}

void register_unary_ops(Registry& registry, std::span<const UnaryOp* const> ops) {
  const UnaryRegistrar unary(registry);
  for (const UnaryOp* op : ops) {
    registry.add({.name = op->name,
                  .fn = [op](const std::vector<Tensor>& in) { return apply(*op, in[0]); },
                  .make_inputs = real_inputs(op->domain),
                  .shape_sets = unary.shapes,
                  .torch = {op->torch ? op->torch : "", {op->parity_domain.value_or(op->domain)}}});
  }
}

}  // namespace ag
