// A user's op outside the engine: logcosh(x) = log(cosh x), written as an ag::Function and
// registered with ag::register_op, so it is gradchecked as the engine's ops are.
#pragma once

#include <attograd/attograd.h>

#include <cmath>
#include <string_view>
#include <vector>

struct LogCosh : ag::Function<LogCosh> {
  static constexpr std::string_view name = "LogCoshBackward";

  static ag::Tensor forward(ag::FunctionContext& ctx, const ag::Tensor& x) {
    ctx.save_for_backward({x});
    // log cosh x = |x| + log(1 + e^(−2|x|)) − log 2: cosh x itself overflows f32 past |x| ≈ 89
    const ag::Tensor a = ag::abs(x);
    return a + ag::log(ag::exp(a * -2.0) + 1.0) - std::log(2.0);
  }

  static std::vector<ag::Tensor> backward(ag::FunctionContext& ctx, const std::vector<ag::Tensor>& grads) {
    // out = log cosh x  →  dx = g · tanh x (engine ops: differentiable again, tanh' = 1 − tanh²)
    return {grads[0] * ag::tanh(ctx.saved()[0])};
  }
};

inline ag::Tensor logcosh(const ag::Tensor& x) { return LogCosh::apply(x); }

// Hands back its input itself: the user's leaf must stay a leaf, the gradient pass through.
struct PassThrough : ag::Function<PassThrough> {
  static constexpr std::string_view name = "PassThroughBackward";
  static ag::Tensor forward(ag::FunctionContext&, const ag::Tensor& x) { return x; }
  static std::vector<ag::Tensor> backward(ag::FunctionContext&, const std::vector<ag::Tensor>& grads) {
    return {grads[0]};
  }
};

// logcosh in the registry, on a 2-D, a 1-D and a 0-d input drawn from [-4, 4].
inline void register_logcosh() {
  ag::register_op({.name = "logcosh",
                   .fn = [](const std::vector<ag::Tensor>& in) { return logcosh(in[0]); },
                   .make_inputs = ag::real_inputs({.low = -4, .high = 4}),
                   .shape_sets = {{{3, 4}}, {{7}}, {{}}}});
}
