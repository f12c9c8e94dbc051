// Arithmetic: binary ops broadcast numpy-style (the backward reduces to each input's shape with
// sum_to); their scalar forms, neg, pow, casts and comparisons map one element to one element.
#include "engine/ops/arithmetic.h"

#include <cmath>

#include "engine/autograd.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/registry.h"

namespace ag {

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("add", a, b, [](auto x, auto y) { return x + y; });
  record(out, {"AddBackward", {.formula = "out = a + b  →  da = g, db = g (each summed to its input's shape)"}}, {a, b},
         {}, [](const BackwardContext& c) {
           // out = a + b
           return std::vector<Tensor>{c.needs_grad[0] ? sum_to(c.grad, c.inputs[0].shape) : Tensor(),
                                      c.needs_grad[1] ? sum_to(c.grad, c.inputs[1].shape) : Tensor()};
         });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("sub", a, b, [](auto x, auto y) { return x - y; });
  record(out, {"SubBackward", {.formula = "out = a − b  →  da = g, db = −g (each summed to its input's shape)"}},
         {a, b}, {}, [](const BackwardContext& c) {
           // out = a - b
           return std::vector<Tensor>{c.needs_grad[0] ? sum_to(c.grad, c.inputs[0].shape) : Tensor(),
                                      c.needs_grad[1] ? sum_to(neg(c.grad), c.inputs[1].shape) : Tensor()};
         });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("mul", a, b, [](auto x, auto y) { return x * y; });
  record(out, {"MulBackward", {.formula = "out = a ⊙ b  →  da = g ⊙ b, db = g ⊙ a (each summed to its input's shape)"}},
         {a, b}, {a, b}, [](const BackwardContext& c) {
           // out = a * b
           const Tensor& a = c.saved[0];
           const Tensor& b = c.saved[1];
           return std::vector<Tensor>{c.needs_grad[0] ? sum_to(mul(c.grad, b), a.shape()) : Tensor(),
                                      c.needs_grad[1] ? sum_to(mul(c.grad, a), b.shape()) : Tensor()};
         });
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("div", a, b, [](auto x, auto y) { return x / y; });
  record(
      out,
      {"DivBackward", {.formula = "out = a / b  →  da = g / b, db = −g ⊙ a / b² (each summed to its input's shape)"}},
      {a, b}, {a, b}, [](const BackwardContext& c) {
        // out = a / b  →  da = g / b,  db = -g * a / b²
        const Tensor& a = c.saved[0];
        const Tensor& b = c.saved[1];
        return std::vector<Tensor>{c.needs_grad[0] ? sum_to(div(c.grad, b), a.shape()) : Tensor(),
                                   c.needs_grad[1] ? sum_to(neg(div(mul(c.grad, a), mul(b, b))), b.shape()) : Tensor()};
      });
  return out;
}

Tensor add(const Tensor& a, double b) {
  Tensor out = unary_kernel("add", a, [b](auto x) { return x + static_cast<decltype(x)>(b); });
  record(out, {"AddScalarBackward", {.formula = "out = a + s  →  da = g"}}, {a}, {}, [](const BackwardContext& c) {
    // out = a + b
    return std::vector<Tensor>{c.grad};
  });
  return out;
}

Tensor mul(const Tensor& a, double b) {
  Tensor out = unary_kernel("mul", a, [b](auto x) { return x * static_cast<decltype(x)>(b); });
  record(out, {"MulScalarBackward", {.formula = "out = a · s  →  da = g · s"}}, {a}, {}, [b](const BackwardContext& c) {
    // out = a * b
    return std::vector<Tensor>{mul(c.grad, b)};
  });
  return out;
}

Tensor div(double a, const Tensor& b) {
  Tensor out = unary_kernel("div", b, [a](auto x) { return static_cast<decltype(x)>(a) / x; });
  record(out, {"RDivScalarBackward", {.formula = "out = s / b  →  db = −g · s / b²"}}, {b}, {b},
         [a](const BackwardContext& c) {
           // out = a / b  →  db = -g * a / b²
           const Tensor& b = c.saved[0];
           return std::vector<Tensor>{neg(div(mul(c.grad, a), mul(b, b)))};
         });
  return out;
}

Tensor neg(const Tensor& x) {
  Tensor out = unary_kernel("neg", x, [](auto v) { return -v; });
  record(out, {"NegBackward", {.formula = "out = −x  →  dx = −g"}}, {x}, {}, [](const BackwardContext& c) {
    // out = -x
    return std::vector<Tensor>{neg(c.grad)};
  });
  return out;
}

Tensor pow(const Tensor& x, double exponent) {
  AG_CHECK(std::isfinite(exponent), "pow: expected a finite exponent, got {}", exponent);
  Tensor out = unary_kernel("pow", x, [exponent](auto v) { return std::pow(v, static_cast<decltype(v)>(exponent)); });
  record(out, {"PowBackward", {.formula = "out = xᵖ  →  dx = g · p · xᵖ⁻¹"}}, {x}, {x},
         [exponent](const BackwardContext& c) {
           // out = x ** p  →  dx = g * p * x ** (p - 1)
           if (exponent == 0) return std::vector<Tensor>{zeros_like(c.grad)};
           return std::vector<Tensor>{mul(c.grad, mul(pow(c.saved[0], exponent - 1), exponent))};
         });
  return out;
}

Tensor clone(const Tensor& x) {
  AG_CHECK(x.defined(), "clone: the input is undefined");
  Tensor out = empty(x.shape(), x.dtype());
  out.copy_(x.detach());
  record(out, {"CloneBackward", {.formula = "out = x  →  dx = g"}}, {x}, {}, [](const BackwardContext& c) {
    // out = x
    return std::vector<Tensor>{c.grad};
  });
  return out;
}

Tensor to(const Tensor& x, DType dtype) {
  AG_CHECK(x.defined(), "to: the input is undefined");
  if (x.dtype() == dtype) return x;
  Tensor out = converted(x, dtype);
  if (!is_floating(dtype)) return out;  // integers and masks carry no gradient
  record(out, {"ToBackward", {.formula = "out = x in another dtype  →  dx = g in x's dtype"}}, {x}, {},
         [from = x.dtype()](const BackwardContext& c) {
           // out = x converted to another floating dtype
           return std::vector<Tensor>{to(c.grad, from)};
         });
  return out;
}

Tensor sign(const Tensor& x) {
  return unary_kernel("sign", x, [](auto v) { return static_cast<decltype(v)>((v > 0) - (v < 0)); });
}

Tensor gt(const Tensor& x, double value) {
  return compare_kernel("gt", x, [value](auto v) { return v > value; });
}

Tensor lt(const Tensor& x, double value) {
  return compare_kernel("lt", x, [value](auto v) { return v < value; });
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, b); }
Tensor operator-(const Tensor& a, double b) { return add(a, -b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
Tensor operator/(const Tensor& a, double b) { return mul(a, 1.0 / b); }
Tensor operator+(double a, const Tensor& b) { return add(b, a); }
Tensor operator-(double a, const Tensor& b) { return add(neg(b), a); }
Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
Tensor operator/(double a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }

void register_arithmetic_ops(Registry& registry) {
  const std::vector<std::vector<Shape>> binary_shapes = {{{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{2, 1, 3}, {4, 1}},
                                                         {{5}, {}},        {{1}, {3}},    {{}, {}}};
  const Domain away_from_zero{.kinks = {0}, .kink_margin = 0.3};
  const auto broadcasting = TorchCounterpart::Shapes::broadcast;
  auto binary = [&](std::string name, Tensor (*op)(const Tensor&, const Tensor&), std::string torch) {
    registry.add({.name = name,
                  .fn = [op](const auto& in) { return op(in[0], in[1]); },
                  .make_inputs = real_inputs(),
                  .shape_sets = binary_shapes,
                  .torch = {std::move(torch), {}, broadcasting}});
  };
  binary("add", add, "torch.add");
  binary("sub", sub, "torch.sub");
  binary("mul", mul, "torch.mul");
  // div: a numerator anywhere, a denominator away from 0.
  registry.add({.name = "div",
                .fn = [](const auto& in) { return div(in[0], in[1]); },
                .make_inputs =
                    [away_from_zero](const std::vector<Shape>& shapes, Generator& gen, DType dtype) {
                      return std::vector<Tensor>{draw(shapes[0], {}, gen, dtype).requires_grad_(),
                                                 draw(shapes[1], away_from_zero, gen, dtype).requires_grad_()};
                    },
                .shape_sets = binary_shapes,
                .torch = {"torch.div", {Domain{}, away_from_zero}, broadcasting}});

  const UnaryRegistrar unary(registry);
  unary.add("add_scalar", [](const Tensor& x) { return add(x, 1.5); });
  unary.add("mul_scalar", [](const Tensor& x) { return mul(x, -2.5); });
  unary.add(
      "rdiv_scalar", [](const Tensor& x) { return div(10.0, x); }, away_from_zero);
  unary.add(
      "rsub_scalar", [](const Tensor& x) { return 1.0 - x; }, {}, "lambda x: 1.0 - x");
  unary.add(
      "neg", [](const Tensor& x) { return neg(x); }, {}, "torch.neg");
  unary.add("pow", [](const Tensor& x) { return pow(x, 3.0); });
  unary.add("pow_fractional", [](const Tensor& x) { return pow(x, -1.5); }, {.low = 0.2, .high = 2.0});
  unary.add(
      "clone", [](const Tensor& x) { return clone(x); }, {}, "torch.clone");
  // Through f32 and back: the f32 rounding (~1e-7) needs a coarser step and tolerance.
  registry.add({.name = "to",
                .fn = [](const auto& in) { return to(to(in[0], DType::f32), in[0].dtype()); },
                .make_inputs = real_inputs(),
                .shape_sets = unary.shapes,
                .tolerance = {.eps = 1e-3, .atol = 1e-3, .rtol = 1e-2},
                .torch = {"lambda x: x.float().to(x.dtype)"}});
}

}  // namespace ag
