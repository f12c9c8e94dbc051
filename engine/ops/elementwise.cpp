// Elementwise ops: binary ops broadcast numpy-style (backward reduces to each input's shape
// with sum_to); unary ops map one element to one element.
#include <cmath>
#include <numbers>

#include "engine/autograd.h"
#include "engine/kernels/broadcast.h"
#include "engine/kernels/gelu.h"
#include "engine/ops.h"
#include "engine/registry.h"

namespace ag {

namespace {

void check_floating(std::string_view op, const Tensor& x) {
  AG_CHECK(x.defined(), "{}: the input is undefined", op);
  AG_CHECK(is_floating(x.dtype()), "{}: expected a floating tensor (f32 or f64), got {} of shape {}", op,
           dtype_name(x.dtype()), shape_str(x.shape()));
}

// out[i] = f(a[i'], b[i'']) over the broadcast shape.
template <typename F>
Tensor binary_kernel(std::string_view op, const Tensor& a, const Tensor& b, F f) {
  check_floating(op, a);
  check_floating(op, b);
  AG_CHECK(a.dtype() == b.dtype(), "{}: dtypes differ: {} {} and {} {} (convert one with ag::to)", op,
           dtype_name(a.dtype()), shape_str(a.shape()), dtype_name(b.dtype()), shape_str(b.shape()));
  Tensor out = empty(broadcast_shapes(op, a.shape(), b.shape()), a.dtype());
  dispatch_floating(a.dtype(), op, [&]<typename T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    if (a.shape() == b.shape()) {  // the common case, in a loop the compiler vectorises
      parallel_for_ranges(out.numel(), 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) po[i] = f(pa[i], pb[i]);
      });
      return;
    }
    for_each_broadcast<2>(out.shape(), {a.shape(), b.shape()},
                          [&](int64_t i, const std::array<int64_t, 2>& at) { po[i] = f(pa[at[0]], pb[at[1]]); });
  });
  return out;
}

// out[i] = f(x[i]), same dtype.
template <typename F>
Tensor unary_kernel(std::string_view op, const Tensor& x, F f) {
  check_floating(op, x);
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    parallel_for(x.numel(), 8, [&](int64_t i) { po[i] = f(px[i]); });
  });
  return out;
}

// out[i] = predicate(x[i]) as b8.
template <typename F>
Tensor compare_kernel(std::string_view op, const Tensor& x, F predicate) {
  check_floating(op, x);
  Tensor out = empty(x.shape(), DType::b8);
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    const T* px = x.data<T>();
    bool* po = out.data<bool>();
    parallel_for(x.numel(), 1, [&](int64_t i) { po[i] = predicate(px[i]); });
  });
  return out;
}

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
  record(out, "GeluDerivativeBackward", {x}, {x}, [approximation](const BackwardContext& c) {
    // out = gelu'(x)  →  dx = g * gelu''(x)
    return std::vector<Tensor>{mul(c.grad, gelu_second_derivative(c.saved[0], approximation))};
  });
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("add", a, b, [](auto x, auto y) { return x + y; });
  record(out, "AddBackward", {a, b}, {}, [](const BackwardContext& c) {
    // out = a + b
    return std::vector<Tensor>{c.needs_grad[0] ? sum_to(c.grad, c.inputs[0].shape) : Tensor(),
                               c.needs_grad[1] ? sum_to(c.grad, c.inputs[1].shape) : Tensor()};
  });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("sub", a, b, [](auto x, auto y) { return x - y; });
  record(out, "SubBackward", {a, b}, {}, [](const BackwardContext& c) {
    // out = a - b
    return std::vector<Tensor>{c.needs_grad[0] ? sum_to(c.grad, c.inputs[0].shape) : Tensor(),
                               c.needs_grad[1] ? sum_to(neg(c.grad), c.inputs[1].shape) : Tensor()};
  });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("mul", a, b, [](auto x, auto y) { return x * y; });
  record(out, "MulBackward", {a, b}, {a, b}, [](const BackwardContext& c) {
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
  record(out, "DivBackward", {a, b}, {a, b}, [](const BackwardContext& c) {
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
  record(out, "AddScalarBackward", {a}, {}, [](const BackwardContext& c) {
    // out = a + b
    return std::vector<Tensor>{c.grad};
  });
  return out;
}

Tensor mul(const Tensor& a, double b) {
  Tensor out = unary_kernel("mul", a, [b](auto x) { return x * static_cast<decltype(x)>(b); });
  record(out, "MulScalarBackward", {a}, {}, [b](const BackwardContext& c) {
    // out = a * b
    return std::vector<Tensor>{mul(c.grad, b)};
  });
  return out;
}

Tensor div(double a, const Tensor& b) {
  Tensor out = unary_kernel("div", b, [a](auto x) { return static_cast<decltype(x)>(a) / x; });
  record(out, "RDivScalarBackward", {b}, {b}, [a](const BackwardContext& c) {
    // out = a / b  →  db = -g * a / b²
    const Tensor& b = c.saved[0];
    return std::vector<Tensor>{neg(div(mul(c.grad, a), mul(b, b)))};
  });
  return out;
}

Tensor neg(const Tensor& x) {
  Tensor out = unary_kernel("neg", x, [](auto v) { return -v; });
  record(out, "NegBackward", {x}, {}, [](const BackwardContext& c) {
    // out = -x
    return std::vector<Tensor>{neg(c.grad)};
  });
  return out;
}

Tensor pow(const Tensor& x, double exponent) {
  AG_CHECK(std::isfinite(exponent), "pow: expected a finite exponent, got {}", exponent);
  Tensor out = unary_kernel("pow", x, [exponent](auto v) { return std::pow(v, static_cast<decltype(v)>(exponent)); });
  record(out, "PowBackward", {x}, {x}, [exponent](const BackwardContext& c) {
    // out = x ** p  →  dx = g * p * x ** (p - 1)
    if (exponent == 0) return std::vector<Tensor>{zeros_like(c.grad)};
    return std::vector<Tensor>{mul(c.grad, mul(pow(c.saved[0], exponent - 1), exponent))};
  });
  return out;
}

Tensor exp(const Tensor& x) {
  Tensor out = unary_kernel("exp", x, [](auto v) { return std::exp(v); });
  record(out, "ExpBackward", {x}, {out}, [](const BackwardContext& c) {
    // out = exp(x)  →  dx = g * out
    return std::vector<Tensor>{mul(c.grad, c.saved[0])};
  });
  return out;
}

Tensor log(const Tensor& x) {
  Tensor out = unary_kernel("log", x, [](auto v) { return std::log(v); });
  record(out, "LogBackward", {x}, {x}, [](const BackwardContext& c) {
    // out = log(x)  →  dx = g / x
    return std::vector<Tensor>{div(c.grad, c.saved[0])};
  });
  return out;
}

Tensor sqrt(const Tensor& x) {
  Tensor out = unary_kernel("sqrt", x, [](auto v) { return std::sqrt(v); });
  record(out, "SqrtBackward", {x}, {out}, [](const BackwardContext& c) {
    // out = sqrt(x)  →  dx = g / (2 * out)
    return std::vector<Tensor>{div(c.grad, mul(c.saved[0], 2.0))};
  });
  return out;
}

Tensor abs(const Tensor& x) {
  Tensor out = unary_kernel("abs", x, [](auto v) { return std::abs(v); });
  record(out, "AbsBackward", {x}, {x}, [](const BackwardContext& c) {
    // out = |x|  →  dx = g * sign(x)
    return std::vector<Tensor>{mul(c.grad, sign(c.saved[0]))};
  });
  return out;
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
  record(out, "ClampBackward", {x}, {inside}, [](const BackwardContext& c) {
    // out = min(max(x, lo), hi)  →  dx = g where lo <= x <= hi, else 0
    return std::vector<Tensor>{mul(c.grad, c.saved[0])};
  });
  return out;
}

Tensor relu(const Tensor& x) {
  Tensor out = unary_kernel("relu", x, [](auto v) { return v > 0 ? v : decltype(v)(0); });
  record(out, "ReluBackward", {x}, {out}, [](const BackwardContext& c) {
    // out = max(x, 0)  →  dx = g where out > 0
    return std::vector<Tensor>{mul(c.grad, to(gt(c.saved[0], 0), c.grad.dtype()))};
  });
  return out;
}

Tensor gelu(const Tensor& x, GeluApproximation approximation) {
  Tensor out;
  if (approximation == GeluApproximation::tanh) {
    out = unary_kernel("gelu", x, []<typename T>(T v) {
      const T k = static_cast<T>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);  // sqrt(2/pi)
      return T(0.5) * v * (T(1) + std::tanh(k * (v + T(0.044715) * v * v * v)));
    });
  } else if (x.defined() && x.dtype() == DType::f32) {
    out = empty(x.shape(), x.dtype());
    kernels::gelu_erf(x.data<float>(), out.data<float>(), x.numel());  // vectorised
  } else {
    out = unary_kernel("gelu", x, []<typename T>(T v) {
      return T(0.5) * v * (T(1) + std::erf(v * static_cast<T>(std::numbers::sqrt2 / 2)));
    });
  }
  record(out, "GeluBackward", {x}, {x}, [approximation](const BackwardContext& c) {
    // out = gelu(x)  →  dx = g * gelu'(x)
    return std::vector<Tensor>{mul(c.grad, gelu_derivative(c.saved[0], approximation))};
  });
  return out;
}

Tensor tanh(const Tensor& x) {
  Tensor out = unary_kernel("tanh", x, [](auto v) { return std::tanh(v); });
  record(out, "TanhBackward", {x}, {out}, [](const BackwardContext& c) {
    // out = tanh(x)  →  dx = g * (1 - out²)
    const Tensor& y = c.saved[0];
    return std::vector<Tensor>{mul(c.grad, 1.0 - mul(y, y))};
  });
  return out;
}

Tensor sigmoid(const Tensor& x) {
  Tensor out = unary_kernel("sigmoid", x, [](auto v) {
    using T = decltype(v);
    return v >= 0 ? T(1) / (T(1) + std::exp(-v)) : std::exp(v) / (T(1) + std::exp(v));
  });
  record(out, "SigmoidBackward", {x}, {out}, [](const BackwardContext& c) {
    // out = 1 / (1 + exp(-x))  →  dx = g * out * (1 - out)
    const Tensor& y = c.saved[0];
    return std::vector<Tensor>{mul(c.grad, mul(y, 1.0 - y))};
  });
  return out;
}

Tensor clone(const Tensor& x) {
  AG_CHECK(x.defined(), "clone: the input is undefined");
  Tensor out = empty(x.shape(), x.dtype());
  out.copy_(x.detach());
  record(out, "CloneBackward", {x}, {}, [](const BackwardContext& c) {
    // out = x
    return std::vector<Tensor>{c.grad};
  });
  return out;
}

Tensor to(const Tensor& x, DType dtype) {
  AG_CHECK(x.defined(), "to: the input is undefined");
  if (x.dtype() == dtype) return x;
  Tensor out = empty(x.shape(), dtype);
  out.copy_(x.detach());
  if (!is_floating(dtype)) return out;  // integers and masks carry no gradient
  record(out, "ToBackward", {x}, {}, [from = x.dtype()](const BackwardContext& c) {
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

void register_elementwise_ops(Registry& registry) {
  const std::vector<std::vector<Shape>> binary_shapes = {{{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{2, 1, 3}, {4, 1}},
                                                         {{5}, {}},        {{1}, {3}},    {{}, {}}};
  const std::vector<std::vector<Shape>> unary_shapes = {{{3, 4}}, {{2, 3, 5}}, {{1}}, {{}}};
  const Domain away_from_zero{.kinks = {0}, .kink_margin = 0.3};
  const Domain positive{.low = 0.2, .high = 2.0};

  auto binary = [&](std::string name, Tensor (*op)(const Tensor&, const Tensor&), Domain domain = {}) {
    registry.add({name, [op](const auto& in) { return op(in[0], in[1]); }, real_inputs(domain), binary_shapes});
  };
  binary("add", add);
  binary("sub", sub);
  binary("mul", mul);
  // div: a numerator anywhere, a denominator away from 0.
  registry.add({"div", [](const auto& in) { return div(in[0], in[1]); },
                [away_from_zero](const std::vector<Shape>& shapes, Generator& gen, DType dtype) {
                  return std::vector<Tensor>{draw(shapes[0], {}, gen, dtype).requires_grad_(),
                                             draw(shapes[1], away_from_zero, gen, dtype).requires_grad_()};
                },
                binary_shapes});

  auto unary = [&](std::string name, std::function<Tensor(const Tensor&)> op, Domain domain = {}) {
    registry.add({name, [op](const auto& in) { return op(in[0]); }, real_inputs(domain), unary_shapes});
  };
  unary("add_scalar", [](const Tensor& x) { return add(x, 1.5); });
  unary("mul_scalar", [](const Tensor& x) { return mul(x, -2.5); });
  unary(
      "rdiv_scalar", [](const Tensor& x) { return div(10.0, x); }, away_from_zero);
  unary("rsub_scalar", [](const Tensor& x) { return 1.0 - x; });
  unary("neg", [](const Tensor& x) { return neg(x); });
  unary("pow", [](const Tensor& x) { return pow(x, 3.0); });
  unary(
      "pow_fractional", [](const Tensor& x) { return pow(x, -1.5); }, positive);
  unary("exp", [](const Tensor& x) { return exp(x); });
  unary(
      "log", [](const Tensor& x) { return log(x); }, positive);
  unary(
      "sqrt", [](const Tensor& x) { return sqrt(x); }, positive);
  unary(
      "abs", [](const Tensor& x) { return abs(x); }, away_from_zero);
  registry.add({.name = "clamp",
                .fn = [](const auto& in) { return clamp(in[0], -0.5, 0.7); },
                .make_inputs = real_inputs(Domain{.kinks = {-0.5, 0.7}}),
                .shape_sets = unary_shapes,
                .differs_from_pytorch = "a NaN bound is an error (PyTorch returns NaN everywhere): a NaN bound is "
                                        "a bug upstream, better named than spread"});
  unary(
      "relu", [](const Tensor& x) { return relu(x); }, away_from_zero);
  unary("gelu", [](const Tensor& x) { return gelu(x); });
  unary("gelu_tanh", [](const Tensor& x) { return gelu(x, GeluApproximation::tanh); });
  unary("tanh", [](const Tensor& x) { return tanh(x); });
  unary("sigmoid", [](const Tensor& x) { return sigmoid(x); });
  unary("clone", [](const Tensor& x) { return clone(x); });
  // Through f32 and back: the f32 rounding (~1e-7) needs a coarser step and tolerance.
  registry.add({"to", [](const auto& in) { return to(to(in[0], DType::f32), in[0].dtype()); }, real_inputs(),
                unary_shapes, Tolerance{.eps = 1e-3, .atol = 1e-3, .rtol = 1e-2}});
}

}  // namespace ag
