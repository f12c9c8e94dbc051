// Pointwise functions: exp, log and the activations, one element to one element, each with its
// derivative in engine ops.
#include "engine/ops/pointwise.h"

#include <cmath>
#include <numbers>

#include "engine/autograd.h"
#include "engine/kernels/elementwise.h"
#include "engine/kernels/gelu.h"
#include "engine/ops/arithmetic.h"
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

}  // namespace

Tensor exp(const Tensor& x) {
  Tensor out = unary_kernel("exp", x, [](auto v) { return std::exp(v); });
  record(out, {"ExpBackward", {.formula = "out = eˣ  →  dx = g · out"}}, {x}, {out}, [](const BackwardContext& c) {
    // out = exp(x)  →  dx = g * out
    return std::vector<Tensor>{mul(c.grad, c.saved[0])};
  });
  return out;
}

Tensor log(const Tensor& x) {
  Tensor out = unary_kernel("log", x, [](auto v) { return std::log(v); });
  record(out, {"LogBackward", {.formula = "out = log x  →  dx = g / x"}}, {x}, {x}, [](const BackwardContext& c) {
    // out = log(x)  →  dx = g / x
    return std::vector<Tensor>{div(c.grad, c.saved[0])};
  });
  return out;
}

Tensor sqrt(const Tensor& x) {
  Tensor out = unary_kernel("sqrt", x, [](auto v) { return std::sqrt(v); });
  record(out, {"SqrtBackward", {.formula = "out = √x  →  dx = g / (2 out)"}}, {x}, {out}, [](const BackwardContext& c) {
    // out = sqrt(x)  →  dx = g / (2 * out)
    return std::vector<Tensor>{div(c.grad, mul(c.saved[0], 2.0))};
  });
  return out;
}

Tensor abs(const Tensor& x) {
  Tensor out = unary_kernel("abs", x, [](auto v) { return std::abs(v); });
  record(out, {"AbsBackward", {.formula = "out = |x|  →  dx = g · sign(x)"}}, {x}, {x}, [](const BackwardContext& c) {
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
  record(out, {"ClampBackward", {.formula = "out = min(max(x, lo), hi)  →  dx = g where lo ≤ x ≤ hi, else 0"}}, {x},
         {inside}, [](const BackwardContext& c) {
           // out = min(max(x, lo), hi)  →  dx = g where lo <= x <= hi, else 0
           return std::vector<Tensor>{mul(c.grad, c.saved[0])};
         });
  return out;
}

Tensor relu(const Tensor& x) {
  Tensor out = unary_kernel("relu", x, [](auto v) { return v > 0 ? v : decltype(v)(0); });
  record(out, {"ReluBackward", {.formula = "out = max(x, 0)  →  dx = g where out > 0, else 0"}}, {x}, {out},
         [](const BackwardContext& c) {
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
  record(out, {"GeluBackward", {.formula = "out = gelu(x)  →  dx = g · gelu′(x)"}}, {x}, {x},
         [approximation](const BackwardContext& c) {
           // out = gelu(x)  →  dx = g * gelu'(x)
           return std::vector<Tensor>{mul(c.grad, gelu_derivative(c.saved[0], approximation))};
         });
  return out;
}

Tensor tanh(const Tensor& x) {
  Tensor out = unary_kernel("tanh", x, [](auto v) { return std::tanh(v); });
  record(out, {"TanhBackward", {.formula = "out = tanh x  →  dx = g (1 − out²)"}}, {x}, {out},
         [](const BackwardContext& c) {
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
  record(out, {"SigmoidBackward", {.formula = "out = σ(x)  →  dx = g · out (1 − out)"}}, {x}, {out},
         [](const BackwardContext& c) {
           // out = 1 / (1 + exp(-x))  →  dx = g * out * (1 - out)
           const Tensor& y = c.saved[0];
           return std::vector<Tensor>{mul(c.grad, mul(y, 1.0 - y))};
         });
  return out;
}

Tensor softplus(const Tensor& x) {
  Tensor out = unary_kernel("softplus", x, [](auto v) {
    using T = decltype(v);
    return std::max(v, T(0)) + std::log1p(std::exp(-std::abs(v)));
  });
  record(out, {"SoftplusBackward", {.formula = "out = log(1 + eˣ)  →  dx = g · σ(x)"}}, {x}, {x},
         [](const BackwardContext& c) {
           // out = log(1 + exp(x))  →  dx = g * sigmoid(x)
           return std::vector<Tensor>{mul(c.grad, sigmoid(c.saved[0]))};
         });
  return out;
}

void register_pointwise_ops(Registry& registry) {
  const Domain away_from_zero{.kinks = {0}, .kink_margin = 0.3};
  const Domain positive{.low = 0.2, .high = 2.0};
  const UnaryRegistrar unary(registry);
  unary.add("exp", [](const Tensor& x) { return exp(x); });
  unary.add(
      "log", [](const Tensor& x) { return log(x); }, positive);
  unary.add(
      "sqrt", [](const Tensor& x) { return sqrt(x); }, positive);
  unary.add(
      "abs", [](const Tensor& x) { return abs(x); }, away_from_zero);
  registry.add({.name = "clamp",
                .fn = [](const auto& in) { return clamp(in[0], -0.5, 0.7); },
                .make_inputs = real_inputs(Domain{.kinks = {-0.5, 0.7}}),
                .shape_sets = unary.shapes,
                .differs_from_pytorch = "a NaN bound is an error (PyTorch returns NaN everywhere): a NaN bound is "
                                        "a bug upstream, better named than spread"});
  unary.add(
      "relu", [](const Tensor& x) { return relu(x); }, away_from_zero);
  unary.add("gelu", [](const Tensor& x) { return gelu(x); });
  unary.add("gelu_tanh", [](const Tensor& x) { return gelu(x, GeluApproximation::tanh); });
  unary.add("tanh", [](const Tensor& x) { return tanh(x); });
  unary.add("sigmoid", [](const Tensor& x) { return sigmoid(x); });
  unary.add("softplus", [](const Tensor& x) { return softplus(x); });
}

}  // namespace ag
