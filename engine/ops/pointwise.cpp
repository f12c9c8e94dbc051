// Pointwise functions: exp, log and the activations, one element to one element: a table of rows
// (UnaryOp), each with its forward kernel and its derivative in engine ops; clamp, which takes
// bounds, written out.
#include "engine/ops/pointwise.h"

#include <cmath>
#include <numbers>

#include "engine/autograd.h"
#include "engine/kernels/elementwise.h"
#include "engine/kernels/gelu.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/unary_op.h"
#include "engine/registry.h"

namespace ag {

namespace {

// d²gelu(x)/dx², written with engine ops: differentiable again, to any order.
Tensor gelu_second_derivative(const Tensor& x, GeluApproximation approximation) {
  const Tensor x2 = mul(x, x);
  if (approximation == GeluApproximation::tanh) {
    // gelu' = 0.5(1 + t) + 0.5 x (1 - t²) u',  t = tanh(u),  u = k (x + a x³)
    const double k = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2/pi)
    const double a = 0.044715;
    const Tensor t = tanh(mul(add(x, mul(mul(x2, x), a)), k));
    const Tensor du = mul(add(mul(x2, 3 * a), 1.0), k);  // u'
    const Tensor ddu = mul(x, 6 * a * k);                // u''
    // gelu'' = (1 - t²) (u' + 0.5 x (u'' - 2 t u'²))
    return mul(1.0 - mul(t, t), add(du, mul(mul(x, 0.5), sub(ddu, mul(mul(t, 2.0), mul(du, du))))));
  }
  // gelu' = Φ(x) + x φ(x)  →  gelu'' = φ(x) (2 - x²)
  const Tensor pdf = mul(exp(mul(x2, -0.5)), std::numbers::inv_sqrtpi / std::numbers::sqrt2);
  return mul(pdf, 2.0 - x2);
}

// d gelu(x)/dx: an op with its own backward, so that gelu's backward can be differentiated again.
Tensor gelu_derivative(const Tensor& x, GeluApproximation approximation) {
  Tensor out;
  if (approximation == GeluApproximation::tanh) {
    out = unary_kernel("gelu", x, []<typename T>(T v) {
      const T k = static_cast<T>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);  // sqrt(2/pi)
      const T inner = k * (v + T(0.044715) * v * v * v);
      const T t = std::tanh(inner);
      return T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * k * (T(1) + T(3 * 0.044715) * v * v);
    });
  } else if (x.defined() && x.dtype() == DType::f32) {
    out = empty(x.shape(), x.dtype());
    kernels::gelu_erf_derivative(x.data<float>(), out.data<float>(), x.numel());  // vectorised
  } else {
    out = unary_kernel("gelu", x, []<typename T>(T v) {
      const T cdf = T(0.5) * (T(1) + std::erf(v * static_cast<T>(std::numbers::sqrt2 / 2)));
      const T pdf = std::exp(T(-0.5) * v * v) * static_cast<T>(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
      return cdf + v * pdf;
    });
  }
  record(out, {"GeluDerivativeBackward", {.formula = "out = gelu′(x)  →  dx = g · gelu″(x)"}}, {x}, {x},
         [approximation](const BackwardContext& c) {
           // out = gelu'(x)  →  dx = g * gelu''(x)
           return std::vector<Tensor>{mul(c.grad, gelu_second_derivative(c.saved[0], approximation))};
         });
  return out;
}

// gelu's forwards: x·Φ(x) (vectorised in f32), and the GPT-2 tanh form.
Tensor gelu_erf_forward(std::string_view, const Tensor& x) {
  if (x.defined() && x.dtype() == DType::f32) {
    Tensor out = empty(x.shape(), x.dtype());
    kernels::gelu_erf(x.data<float>(), out.data<float>(), x.numel());  // vectorised
    return out;
  }
  return unary_kernel("gelu", x, []<typename T>(T v) {
    return T(0.5) * v * (T(1) + std::erf(v * static_cast<T>(std::numbers::sqrt2 / 2)));
  });
}

Tensor gelu_tanh_forward(std::string_view, const Tensor& x) {
  return unary_kernel("gelu", x, []<typename T>(T v) {
    const T k = static_cast<T>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);  // sqrt(2/pi)
    return T(0.5) * v * (T(1) + std::tanh(k * (v + T(0.044715) * v * v * v)));
  });
}

constexpr Domain kAwayFromZero{.kinks = {0}, .kink_margin = 0.3};
constexpr Domain kPositive{.low = 0.2, .high = 2.0};

// The table: one row per op (UnaryOp in unary_op.h), the derivative under a comment quoting the
// forward line. A new op is a row here, its declaration in pointwise.h and its name in
// register_pointwise_ops below (engine/README.md, "Adding an op").

constexpr UnaryOp kExp{.name = "exp",
                       .node = "ExpBackward",
                       .formula = "out = eˣ  →  dx = g · out",
                       .forward = elementwise<[](auto v) { return std::exp(v); }>,
                       .saves = UnaryOp::Saves::output,
                       .derivative =
                           [](const Tensor& g, const Tensor& out) {
                             // out = exp(x)  →  dx = g * out
                             return mul(g, out);
                           },
                       .torch = "torch.exp"};

constexpr UnaryOp kLog{.name = "log",
                       .node = "LogBackward",
                       .formula = "out = log x  →  dx = g / x",
                       .forward = elementwise<[](auto v) { return std::log(v); }>,
                       .saves = UnaryOp::Saves::input,
                       .derivative =
                           [](const Tensor& g, const Tensor& x) {
                             // out = log(x)  →  dx = g / x
                             return div(g, x);
                           },
                       .domain = kPositive,
                       .torch = "torch.log"};

constexpr UnaryOp kSqrt{.name = "sqrt",
                        .node = "SqrtBackward",
                        .formula = "out = √x  →  dx = g / (2 out)",
                        .forward = elementwise<[](auto v) { return std::sqrt(v); }>,
                        .saves = UnaryOp::Saves::output,
                        .derivative =
                            [](const Tensor& g, const Tensor& out) {
                              // out = sqrt(x)  →  dx = g / (2 * out)
                              return div(g, mul(out, 2.0));
                            },
                        .domain = kPositive,
                        .torch = "torch.sqrt"};

constexpr UnaryOp kAbs{.name = "abs",
                       .node = "AbsBackward",
                       .formula = "out = |x|  →  dx = g · sign(x)",
                       .forward = elementwise<[](auto v) { return std::abs(v); }>,
                       .saves = UnaryOp::Saves::input,
                       .derivative =
                           [](const Tensor& g, const Tensor& x) {
                             // out = |x|  →  dx = g * sign(x)
                             return mul(g, sign(x));
                           },
                       .domain = kAwayFromZero,
                       .torch = "torch.abs"};

constexpr UnaryOp kRelu{.name = "relu",
                        .node = "ReluBackward",
                        .formula = "out = max(x, 0)  →  dx = g where out > 0, else 0",
                        .forward = elementwise<[](auto v) { return (v > 0) ? v : decltype(v)(0); }>,
                        .saves = UnaryOp::Saves::output,
                        .derivative =
                            [](const Tensor& g, const Tensor& out) {
                              // out = max(x, 0)  →  dx = g where out > 0
                              return threshold_backward(g, out);
                            },
                        .domain = kAwayFromZero,
                        .torch = "torch.relu"};

constexpr UnaryOp kGelu{.name = "gelu",
                        .node = "GeluBackward",
                        .formula = "out = gelu(x)  →  dx = g · gelu′(x)",
                        .forward = gelu_erf_forward,
                        .saves = UnaryOp::Saves::input,
                        .derivative =
                            [](const Tensor& g, const Tensor& x) {
                              // out = gelu(x)  →  dx = g * gelu'(x)
                              return mul(g, gelu_derivative(x, GeluApproximation::none));
                            },
                        .torch = "F.gelu"};

constexpr UnaryOp kGeluTanh{.name = "gelu_tanh",
                            .node = "GeluBackward",
                            .formula = "out = gelu(x)  →  dx = g · gelu′(x)",
                            .forward = gelu_tanh_forward,
                            .saves = UnaryOp::Saves::input,
                            .derivative =
                                [](const Tensor& g, const Tensor& x) {
                                  // out = gelu(x)  →  dx = g * gelu'(x), tanh form
                                  return mul(g, gelu_derivative(x, GeluApproximation::tanh));
                                },
                            .torch = "lambda x: F.gelu(x, approximate='tanh')"};

constexpr UnaryOp kTanh{.name = "tanh",
                        .node = "TanhBackward",
                        .formula = "out = tanh x  →  dx = g (1 − out²)",
                        .forward = elementwise<[](auto v) { return std::tanh(v); }>,
                        .saves = UnaryOp::Saves::output,
                        .derivative =
                            [](const Tensor& g, const Tensor& out) {
                              // out = tanh(x)  →  dx = g * (1 - out²)
                              return mul(g, 1.0 - mul(out, out));
                            },
                        .torch = "torch.tanh"};

constexpr UnaryOp kSigmoid{.name = "sigmoid",
                           .node = "SigmoidBackward",
                           .formula = "out = σ(x)  →  dx = g · out (1 − out)",
                           .forward = elementwise<[](auto v) {
                             using T = decltype(v);
                             return (v >= 0) ? T(1) / (T(1) + std::exp(-v)) : std::exp(v) / (T(1) + std::exp(v));
                           }>,
                           .saves = UnaryOp::Saves::output,
                           .derivative =
                               [](const Tensor& g, const Tensor& out) {
                                 // out = 1 / (1 + exp(-x))  →  dx = g * out * (1 - out)
                                 return mul(g, mul(out, 1.0 - out));
                               },
                           .torch = "torch.sigmoid",
                           .parity_domain = Domain{.low = -6, .high = 6}};

// log(1 + eˣ) as max(x, 0) + log1p(e^(−|x|)): the naive form overflows to inf at x ≳ 89 in f32.
// Parity within ±15: past 20 F.softplus returns x itself (its threshold), where ours keeps the
// log1p(e^-x) term, a relative 1e-10 more (tests/engine/pytorch_divergences_test.cpp).
constexpr UnaryOp kSoftplus{.name = "softplus",
                            .node = "SoftplusBackward",
                            .formula = "out = log(1 + eˣ)  →  dx = g · σ(x)",
                            .forward = elementwise<[](auto v) {
                              using T = decltype(v);
                              return std::max(v, T(0)) + std::log1p(std::exp(-std::abs(v)));
                            }>,
                            .saves = UnaryOp::Saves::input,
                            .derivative =
                                [](const Tensor& g, const Tensor& x) {
                                  // out = log(1 + exp(x))  →  dx = g * sigmoid(x)
                                  return mul(g, sigmoid(x));
                                },
                            .torch = "F.softplus",
                            .parity_domain = Domain{.low = -15, .high = 15}};

constexpr UnaryOp kSilu{.name = "silu",
                        .node = "SiluBackward",
                        .formula = "out = x σ(x)  →  dx = g · σ(x) (1 + x (1 − σ(x)))",
                        .forward = elementwise<[](auto v) {
                          using T = decltype(v);
                          return (v >= 0) ? v / (T(1) + std::exp(-v)) : v * std::exp(v) / (T(1) + std::exp(v));
                        }>,
                        .saves = UnaryOp::Saves::input,
                        .derivative =
                            [](const Tensor& g, const Tensor& x) {
                              // out = x * sigmoid(x)  →  dx = g * s * (1 + x * (1 - s)),  s = sigmoid(x)
                              const Tensor s = sigmoid(x);
                              return mul(g, mul(s, add(mul(x, 1.0 - s), 1.0)));
                            },
                        .torch = "F.silu"};

}  // namespace

Tensor exp(const Tensor& x) { return apply(kExp, x); }
Tensor log(const Tensor& x) { return apply(kLog, x); }
Tensor sqrt(const Tensor& x) { return apply(kSqrt, x); }
Tensor abs(const Tensor& x) { return apply(kAbs, x); }
Tensor relu(const Tensor& x) { return apply(kRelu, x); }
Tensor gelu(const Tensor& x, GeluApproximation approximation) {
  return apply(approximation == GeluApproximation::tanh ? kGeluTanh : kGelu, x);
}
Tensor tanh(const Tensor& x) { return apply(kTanh, x); }
Tensor sigmoid(const Tensor& x) { return apply(kSigmoid, x); }
Tensor softplus(const Tensor& x) { return apply(kSoftplus, x); }
Tensor silu(const Tensor& x) { return apply(kSilu, x); }

// One pass where mul(g, to(gt(out, 0))) took three (a b8 mask, its f32 copy, the product); and a
// zero, not NaN, where g is infinite and out is not positive, as PyTorch's threshold_backward.
Tensor threshold_backward(const Tensor& grad, const Tensor& out) {
  AG_CHECK(grad.defined() && out.defined() && grad.shape() == out.shape(),
           "threshold_backward: expected grad and out of one shape, got {} and {}",
           grad.defined() ? shape_str(grad.shape()) : "undefined",
           out.defined() ? shape_str(out.shape()) : "undefined");
  Tensor dx = binary_kernel("threshold_backward", grad, out, [](auto g, auto o) { return o > 0 ? g : decltype(g)(0); });
  record(dx, {"ThresholdBackwardBackward", {.formula = "dx = g where out > 0  →  dg = u where out > 0, dout = 0"}},
         {grad, out}, {out}, [](const BackwardContext& c) {
           // dx = g where out > 0, else 0  →  dg = u where out > 0; out only selects (no gradient)
           return std::vector<Tensor>{c.needs_grad[0] ? threshold_backward(c.grad, c.saved[0]) : Tensor(), Tensor()};
         });
  return dx;
}

Tensor clamp(const Tensor& x, double min, double max) {
  // min > max gives max everywhere (and no gradient), as in PyTorch.
  AG_CHECK(!std::isnan(min) && !std::isnan(max), "clamp: expected bounds that are not NaN, got min={} max={}", min,
           max);
  Tensor out = unary_kernel("clamp", x, [min, max](auto v) {
    using T = decltype(v);
    return std::min(std::max(v, static_cast<T>(min)), static_cast<T>(max));
  });
  if (!needs_recording({&x})) return out;
  Tensor inside = unary_kernel("clamp", x, [min, max](auto v) {
    using T = decltype(v);
    return static_cast<T>(v >= static_cast<T>(min) && v <= static_cast<T>(max));
  });
  record(out, {"ClampBackward", {.formula = "out = min(max(x, lo), hi)  →  dx = g where lo ≤ x ≤ hi, else 0"}}, {x},
         {inside}, [](const BackwardContext& c) {
           // out = min(max(x, lo), hi)  →  dx = g where lo <= x <= hi, else 0
           return std::vector<Tensor>{mul(c.grad, c.saved[0])};
         });
  return out;
}

void register_pointwise_ops(Registry& registry) {
  register_unary_ops(registry, {&kExp, &kLog, &kSqrt, &kAbs});
  registry.add({.name = "clamp",
                .fn = [](const auto& in) { return clamp(in[0], -0.5, 0.7); },
                .make_inputs = real_inputs(Domain{.kinks = {-0.5, 0.7}}),
                .shape_sets = UnaryRegistrar(registry).shapes,
                .differs_from_pytorch = "a NaN bound is an error (PyTorch returns NaN everywhere): a NaN bound is "
                                        "a bug upstream, better named than spread"});
  registry.add({.name = "threshold_backward",
                .fn = [](const auto& in) { return threshold_backward(in[0], in[1]); },
                .make_inputs = real_inputs(Domain{.kinks = {0}}),
                .shape_sets = {{{3, 4}, {3, 4}}, {{2, 3, 5}, {2, 3, 5}}, {{1}, {1}}, {{}, {}}},
                .torch = {.expression = "lambda g, out: torch.ops.aten.threshold_backward(g, out, 0)",
                          .domains = {Domain{}, Domain{.kinks = {0}}}}});
  register_unary_ops(registry, {&kRelu, &kGelu, &kGeluTanh, &kTanh, &kSigmoid, &kSoftplus, &kSilu});
}

}  // namespace ag
