// The pointwise table: one row per elementwise op (UnaryOp in unary_op.h), as PyTorch's
// derivatives.yaml keeps them, the derivative under a comment quoting the forward line. A row is the
// whole op: AG_POINTWISE_OP(exp, {…}) makes `Tensor exp(const Tensor& x)` (declared by pointwise.h,
// defined by pointwise.cpp) and registers the row as "exp", in this order. AG_POINTWISE_ROW makes the
// row and its registry entry only, for an op whose function takes more than x (gelu's approximation
// picks the gelu or the gelu_tanh row). The rows' names (kPositive, gelu_erf_forward, …) are
// pointwise.cpp's. No include guard: each includer defines both macros first
// (engine/README.md, "Adding an op").

AG_POINTWISE_OP(exp, {.node = "ExpBackward",
                      .formula = "out = eˣ  →  dx = g · out",
                      .forward = elementwise<[](auto v) { return std::exp(v); }>,
                      .saves = UnaryOp::Saves::output,
                      .derivative =
                          [](const Tensor& g, const Tensor& out) {
                            // out = exp(x)  →  dx = g * out
                            return mul(g, out);
                          },
                      .torch = "torch.exp"})

AG_POINTWISE_OP(log, {.node = "LogBackward",
                      .formula = "out = log x  →  dx = g / x",
                      .forward = elementwise<[](auto v) { return std::log(v); }>,
                      .saves = UnaryOp::Saves::input,
                      .derivative =
                          [](const Tensor& g, const Tensor& x) {
                            // out = log(x)  →  dx = g / x
                            return div(g, x);
                          },
                      .domain = kPositive,
                      .torch = "torch.log"})

AG_POINTWISE_OP(sqrt, {.node = "SqrtBackward",
                       .formula = "out = √x  →  dx = g / (2 out)",
                       .forward = elementwise<[](auto v) { return std::sqrt(v); }>,
                       .saves = UnaryOp::Saves::output,
                       .derivative =
                           [](const Tensor& g, const Tensor& out) {
                             // out = sqrt(x)  →  dx = g / (2 * out)
                             return div(g, mul(out, 2.0));
                           },
                       .domain = kPositive,
                       .torch = "torch.sqrt"})

AG_POINTWISE_OP(abs, {.node = "AbsBackward",
                      .formula = "out = |x|  →  dx = g · sign(x)",
                      .forward = elementwise<[](auto v) { return std::abs(v); }>,
                      .saves = UnaryOp::Saves::input,
                      .derivative =
                          [](const Tensor& g, const Tensor& x) {
                            // out = |x|  →  dx = g * sign(x)
                            return mul(g, sign(x));
                          },
                      .domain = kAwayFromZero,
                      .torch = "torch.abs"})

AG_POINTWISE_OP(relu, {.node = "ReluBackward",
                       .formula = "out = max(x, 0)  →  dx = g where out > 0, else 0",
                       .forward = elementwise<[](auto v) { return (v > 0) ? v : decltype(v)(0); }>,
                       .saves = UnaryOp::Saves::output,
                       .derivative =
                           [](const Tensor& g, const Tensor& out) {
                             // out = max(x, 0)  →  dx = g where out > 0
                             return threshold_backward(g, out);
                           },
                       .domain = kAwayFromZero,
                       .torch = "torch.relu"})

AG_POINTWISE_ROW(gelu, {.node = "GeluBackward",
                        .formula = "out = gelu(x)  →  dx = g · gelu′(x)",
                        .forward = gelu_erf_forward,
                        .saves = UnaryOp::Saves::input,
                        .derivative =
                            [](const Tensor& g, const Tensor& x) {
                              // out = gelu(x)  →  dx = g * gelu'(x)
                              return gelu_erf_backward(g, x);
                            },
                        .torch = "F.gelu"})

AG_POINTWISE_ROW(gelu_tanh, {.node = "GeluBackward",
                             .formula = "out = gelu(x)  →  dx = g · gelu′(x)",
                             .forward = gelu_tanh_forward,
                             .saves = UnaryOp::Saves::input,
                             .derivative =
                                 [](const Tensor& g, const Tensor& x) {
                                   // out = gelu(x)  →  dx = g * gelu'(x), tanh form
                                   return mul(g, gelu_derivative(x, GeluApproximation::tanh));
                                 },
                             .torch = "lambda x: F.gelu(x, approximate='tanh')"})

AG_POINTWISE_OP(tanh, {.node = "TanhBackward",
                       .formula = "out = tanh x  →  dx = g (1 − out²)",
                       .forward = elementwise<[](auto v) { return std::tanh(v); }>,
                       .saves = UnaryOp::Saves::output,
                       .derivative =
                           [](const Tensor& g, const Tensor& out) {
                             // out = tanh(x)  →  dx = g * (1 - out²)
                             return mul(g, 1.0 - mul(out, out));
                           },
                       .torch = "torch.tanh"})

AG_POINTWISE_OP(sigmoid, {.node = "SigmoidBackward",
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
                          .parity_domain = Domain{.low = -6, .high = 6}})

// log(1 + eˣ) as max(x, 0) + log1p(e^(−|x|)): the naive form overflows to inf at x ≳ 89 in f32.
// Parity within ±15: past 20 F.softplus returns x itself (its threshold), where ours keeps the
// log1p(e^-x) term, a relative 1e-10 more (tests/engine/pytorch_divergences_test.cpp).
AG_POINTWISE_OP(softplus, {.node = "SoftplusBackward",
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
                           .parity_domain = Domain{.low = -15, .high = 15}})

AG_POINTWISE_OP(silu, {.node = "SiluBackward",
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
                       .torch = "F.silu"})
