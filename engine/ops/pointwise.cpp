// Pointwise functions: exp, log and the activations, one element to one element: the rows of
// pointwise_rows.h (UnaryOp), each with its forward kernel and its derivative in engine ops, made
// into functions and registry entries here; the kernels the rows name; clamp, which takes bounds,
// and threshold_backward, which takes two tensors, written out.
#include "engine/ops/pointwise.h"

#include <cmath>
#include <numbers>

#include "engine/autocast.h"
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

// gelu's forwards: x·Φ(x) (vectorised in f32), and the GPT-2 tanh form. Under autocast the f32
// form also writes its output's bf16 copy, the next Linear's operand, in the same pass.
Tensor gelu_erf_forward(std::string_view, const Tensor& x) {
  if (x.defined() && x.dtype() == DType::f32) {
    Tensor out = empty(x.shape(), x.dtype());
    if (!autocast_enabled()) {
      kernels::gelu_erf(x.data<float>(), out.data<float>(), x.numel());  // vectorised
      return out;
    }
    Tensor out_bf16 = empty(x.shape(), DType::bf16);
    kernels::gelu_erf_with_bf16(x.data<float>(), out.data<float>(),
                                reinterpret_cast<uint16_t*>(out_bf16.data<BFloat16>()), x.numel());
    attach_bf16_copy(out, out_bf16);
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

}  // namespace

// gelu's backward, g · gelu′(x): in f32, when nothing records it, one pass with the numbers of the
// two ops it stands for; a recorded backward (create_graph, forward mode's JVP) takes the ops, which
// can be differentiated again.
Tensor gelu_erf_backward(const Tensor& g, const Tensor& x) {
  if (grad_enabled() || g.dtype() != DType::f32 || x.dtype() != DType::f32 || g.shape() != x.shape())
    return mul(g, gelu_derivative(x, GeluApproximation::none));
  Tensor dx = empty(x.shape(), DType::f32);
  kernels::gelu_erf_backward(g.data<float>(), x.data<float>(), dx.data<float>(), x.numel());
  return dx;
}

Tensor gelu_erf_keeping_derivative(Tensor& z) {
  NoGradGuard no_grad;
  if (z.dtype() != DType::f32) {
    Tensor out = gelu(z);
    z = gelu_derivative(z, GeluApproximation::none);
    return out;
  }
  Tensor out = empty(z.shape(), DType::f32);
  const Tensor out_bf16 = autocast_enabled() ? empty(z.shape(), DType::bf16) : Tensor();
  kernels::gelu_erf_with_derivative(z.data<float>(), out.data<float>(),
                                    out_bf16.defined() ? &out_bf16.data<BFloat16>()->bits : nullptr, z.data<float>(),
                                    z.numel());
  if (out_bf16.defined()) attach_bf16_copy(out, out_bf16);
  return out;
}

// Each row of pointwise_rows.h as `exp_row`, with its function when it has one.
#define AG_POINTWISE_ROW(op, ...)   \
  constexpr UnaryOp op##_row = [] { \
    UnaryOp row __VA_ARGS__;        \
    row.name = #op;                 \
    return row;                     \
  }();
#define AG_POINTWISE_OP(op, ...)    \
  AG_POINTWISE_ROW(op, __VA_ARGS__) \
  Tensor op(const Tensor& x) { return apply(op##_row, x); }
#include "engine/ops/pointwise_rows.h"
#undef AG_POINTWISE_OP
#undef AG_POINTWISE_ROW

// Every row, in the table's order: what register_pointwise_ops registers.
#define AG_POINTWISE_ROW(op, ...) &op##_row,
#define AG_POINTWISE_OP AG_POINTWISE_ROW
constexpr const UnaryOp* kRows[] = {
#include "engine/ops/pointwise_rows.h"
};
#undef AG_POINTWISE_OP
#undef AG_POINTWISE_ROW

Tensor gelu(const Tensor& x, GeluApproximation approximation) {
  return apply(approximation == GeluApproximation::tanh ? gelu_tanh_row : gelu_row, x);
}

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
  register_unary_ops(registry, kRows);
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
}

}  // namespace ag
