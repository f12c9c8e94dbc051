// An elementwise op as one row of a table (as PyTorch's derivatives.yaml and tinygrad's
// gradient.py keep them): its name, forward kernel, derivative, what the derivative reads, the
// domain gradcheck draws from, and its PyTorch counterpart. `apply` runs a row (forward, then the
// node); `register_unary_ops` adds rows to the registry, from which gradcheck checks them and
// tools/golden/parity.py draws their parity cases. engine/README.md, "Adding an op", recipe 1.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "engine/kernels/elementwise.h"
#include "engine/registry.h"
#include "engine/tensor.h"

namespace ag {

struct UnaryOp {
  enum class Saves { input, output };  // what the derivative reads besides the gradient

  const char* name = nullptr;  // "exp": the op, its registry entry and its parity cases
  const char* node;            // "ExpBackward"
  const char* formula;         // "out = eˣ  →  dx = g · out": the derivative as the step page prints it
  Tensor (*forward)(std::string_view name, const Tensor& x);  // the kernel: elementwise<f>, or one of its own
  Saves saves;
  Tensor (*derivative)(const Tensor& grad, const Tensor& saved);  // dx, in engine ops: differentiable again
  Domain domain = {};                                             // where gradcheck (and parity) draw x
  const char* torch = nullptr;               // the PyTorch counterpart (TorchCounterpart in registry.h)
  std::optional<Domain> parity_domain = {};  // where parity draws x, when not `domain`
};

// The forward of a row whose kernel is one scalar function: out[i] = f(x[i]), f a generic lambda.
template <auto f>
Tensor elementwise(std::string_view name, const Tensor& x) {
  return unary_kernel(name, x, f);
}

// out = op.forward(x), recorded with op.derivative as its backward.
Tensor apply(const UnaryOp& op, const Tensor& x);

// One registry entry per row, on UnaryRegistrar's shapes.
void register_unary_ops(Registry& registry, std::span<const UnaryOp* const> ops);

}  // namespace ag
