// Forward mode: dual tensors, the function transforms (jvp, vjp, jacfwd, jacrev, hessian, hvp), and
// the gradient checker's forward-mode checks on a user's ag::Function. Every expected number is
// independent of the code under test: finite differences of the forward, or closed forms.
#include "engine/forward_ad.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>

#include "engine/autograd.h"
#include "engine/function.h"
#include "engine/functional.h"
#include "engine/ops.h"
#include "engine/testing/gradcheck_gtest.h"
#include "tests/test_util.h"

namespace ag {
namespace {

constexpr double kEps = 1e-6;

// The largest |a - b| over two tensors of one shape.
double max_difference(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double worst = 0;
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

// ∂out_o/∂x_i by central differences, of shape out_o ++ x_i: the Jacobian's independent oracle.
Jacobian finite_difference_jacobian(const TensorsFn& f, const std::vector<Tensor>& primals) {
  const NoGradGuard no_grad;
  std::vector<Tensor> x;
  for (const Tensor& p : primals) x.push_back(clone(p.detach()));
  const std::vector<Tensor> out = f(x);
  Jacobian jacobian(out.size());
  for (size_t o = 0; o < out.size(); ++o) {
    for (size_t i = 0; i < x.size(); ++i) {
      Shape shape = out[o].shape();
      shape.insert(shape.end(), x[i].shape().begin(), x[i].shape().end());
      jacobian[o].push_back(zeros({out[o].numel(), x[i].numel()}, DType::f64));
    }
  }
  for (size_t i = 0; i < x.size(); ++i) {
    double* data = x[i].data<double>();
    for (int64_t e = 0; e < x[i].numel(); ++e) {
      const double original = data[e];
      data[e] = original + kEps;
      const std::vector<Tensor> plus = f(x);
      data[e] = original - kEps;
      const std::vector<Tensor> minus = f(x);
      data[e] = original;
      for (size_t o = 0; o < out.size(); ++o) {
        const std::vector<double> p = plus[o].to_vector(), m = minus[o].to_vector();
        for (size_t k = 0; k < p.size(); ++k)
          jacobian[o][i].set({static_cast<int64_t>(k), e}, (p[k] - m[k]) / (2 * kEps));
      }
    }
  }
  for (size_t o = 0; o < out.size(); ++o) {
    for (size_t i = 0; i < x.size(); ++i) {
      Shape shape = out[o].shape();
      shape.insert(shape.end(), x[i].shape().begin(), x[i].shape().end());
      jacobian[o][i] = reshape(jacobian[o][i], shape);
    }
  }
  return jacobian;
}

// jacfwd and jacrev agree to rounding, and both agree with finite differences.
void expect_jacobians_agree(const TensorsFn& f, const std::vector<Tensor>& primals) {
  const Jacobian forward = jacfwd(f, primals), reverse = jacrev(f, primals);
  const Jacobian numeric = finite_difference_jacobian(f, primals);
  ASSERT_EQ(forward.size(), numeric.size());
  for (size_t o = 0; o < numeric.size(); ++o) {
    for (size_t i = 0; i < primals.size(); ++i) {
      EXPECT_LT(max_difference(forward[o][i], reverse[o][i]), 1e-12) << "output " << o << ", input " << i;
      EXPECT_LT(max_difference(forward[o][i], numeric[o][i]), 1e-6) << "output " << o << ", input " << i;
    }
  }
}

Tensor random(const Shape& shape, Generator& gen) { return randn(shape, DType::f64, gen); }

TEST(ForwardAd, DualTensorsCarryTheirTangentWithinTheirLevel) {
  Generator gen(1);
  const Tensor x = random({3, 4}, gen), t = random({3, 4}, gen);
  expect_error([&] { fw::make_dual(x, t); }, {"make_dual", "no forward-AD level is active"});
  Tensor y;
  {
    const fw::DualLevel level;
    expect_error([&] { const fw::DualLevel nested; }, {"already active", "nested"});
    expect_error([&] { fw::make_dual(x, random({4}, gen)); }, {"make_dual", "(4)", "(3,4)"});
    y = exp(fw::make_dual(x, t));
    const fw::Unpacked unpacked = fw::unpack_dual(y);
    // d exp(x) = exp(x) · t, element by element
    const std::vector<double> xs = x.to_vector(), ts = t.to_vector(), got = unpacked.tangent.to_vector();
    for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(got[i], std::exp(xs[i]) * ts[i], 1e-12);
    EXPECT_FALSE(fw::tangent_of(unpacked.primal).defined());
    EXPECT_FALSE(fw::tangent_of(y.detach()).defined());  // detach drops the tangent, as PyTorch's
  }
  EXPECT_FALSE(fw::tangent_of(y).defined());  // the level ended
  const fw::DualLevel later;
  EXPECT_FALSE(fw::tangent_of(y).defined());  // and a new one does not revive it
}

TEST(ForwardAd, TangentsFlowThroughEveryKindOfNodeAndNotWithoutALevel) {
  Generator gen(2);
  const Tensor a = random({2, 3}, gen), b = random({3, 2}, gen);
  const Tensor ta = random({2, 3}, gen), tb = random({3, 2}, gen);
  // d (a @ b) = ta @ b + a @ tb
  const JvpResult r =
      jvp([](const std::vector<Tensor>& x) { return std::vector<Tensor>{matmul(x[0], x[1])}; }, {a, b}, {ta, tb});
  const Tensor expected = add(matmul(ta, b), matmul(a, tb));
  EXPECT_LT(max_difference(r.tangents[0], expected), 1e-12);
  EXPECT_LT(max_difference(r.outputs[0], matmul(a, b)), 0.0 + 1e-15);
  EXPECT_FALSE(fw::tangent_of(matmul(a, b)).defined());
}

// A Function whose backward is a raw loop: it cannot be differentiated, so it gives no JVP.
struct RawSquare : Function<RawSquare> {
  static constexpr std::string_view name = "RawSquareBackward";
  static Tensor forward(FunctionContext& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return mul(x, x);
  }
  static std::vector<Tensor> backward(FunctionContext& ctx, const std::vector<Tensor>& grads) {
    Tensor dx = clone(grads[0].detach());  // out = x²  →  dx = 2 x g, written into memory, not recorded
    const std::vector<double> x = ctx.saved()[0].to_vector();
    for (int64_t i = 0; i < dx.numel(); ++i) dx.data<double>()[i] *= 2 * x[i];
    return {dx};
  }
};

TEST(ForwardAd, AnOpWithoutAJvpNamesItself) {
  Generator gen(3);
  const Tensor x = random({3}, gen);
  const fw::DualLevel level;
  try {
    RawSquare::apply(fw::make_dual(x, ones_like(x)));
    ADD_FAILURE() << "expected fw::NoJvpError";
  } catch (const fw::NoJvpError& e) {
    EXPECT_NE(std::string(e.what()).find("RawSquareBackward"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("has no JVP"), std::string::npos) << e.what();
  }
}

TEST(ForwardAd, JacfwdEqualsJacrevOnAttention) {
  Generator gen(4);
  const TensorsFn f = [](const std::vector<Tensor>& x) {
    const Attention a = scaled_dot_product_attention(x[0], x[1], x[2], {.is_causal = true});
    return std::vector<Tensor>{a.output, tanh(x[0])};
  };
  expect_jacobians_agree(f, {random({1, 2, 3, 2}, gen), random({1, 2, 3, 2}, gen), random({1, 2, 3, 2}, gen)});
}

TEST(ForwardAd, JacfwdEqualsJacrevOnLayerNormAndCrossEntropyWithLabelSmoothing) {
  Generator gen(5);
  const Tensor target = tensor({2, 0, 3}, {3}, DType::i64);
  const TensorsFn f = [&target](const std::vector<Tensor>& x) {
    const Tensor h = layer_norm(x[0], {4}, x[1], x[2]);  // (3, 4)
    const Tensor logits = matmul(gelu(h), x[3]);         // (3, 4)
    return std::vector<Tensor>{cross_entropy(logits, target, -100, Reduction::mean, 0.1), h};
  };
  expect_jacobians_agree(f, {random({3, 4}, gen), random({4}, gen), random({4}, gen), random({4, 4}, gen)});
}

TEST(ForwardAd, JacfwdEqualsJacrevOnRandomChains) {
  Generator gen(6);
  const TensorsFn f = [](const std::vector<Tensor>& x) {
    const Tensor s = softmax(add(matmul(x[0], x[1], false, true), x[2]), -1);  // (2, 3)
    return std::vector<Tensor>{sum(mul(log_softmax(s, 0), s), {1}), transpose(sigmoid(s), 0, 1)};
  };
  expect_jacobians_agree(f, {random({2, 4}, gen), random({3, 4}, gen), random({3}, gen)});
}

// A character model's loss in miniature, as charlm's GPT computes it: token and position
// embeddings, layer norm, causal attention from one packed q|k|v product, a GELU MLP, the head tied
// to the token embedding, cross-entropy over the next characters.
Tensor tiny_charlm_loss(const std::vector<Tensor>& p) {
  const Tensor tokens = tensor({0, 3, 1, 2}, {1, 4}, DType::i64), next = tensor({3, 1, 2, 4}, {4}, DType::i64);
  const Tensor& wte = p[0];                                                             // (5, 4)
  Tensor x = add(embedding(wte, tokens), p[1]);                                         // (1, 4, 4)
  const Tensor qkv = matmul(layer_norm(x, {4}), p[2]);                                  // (1, 4, 12)
  const auto head = [&](int64_t i) { return unsqueeze(narrow(qkv, 2, 4 * i, 4), 1); };  // (1, 1, 4, 4)
  const Tensor a = scaled_dot_product_attention(head(0), head(1), head(2), {.is_causal = true}).output;
  x = add(x, reshape(a, {1, 4, 4}));
  x = add(x, matmul(gelu(matmul(layer_norm(x, {4}), p[3])), p[4]));                     // (1, 4, 4)
  const Tensor logits = matmul(reshape(layer_norm(x, {4}), {4, 4}), wte, false, true);  // (4, 5)
  return cross_entropy(logits, next);
}

TEST(ForwardAd, HvpOfACharacterModelsLossMatchesFiniteDifferencesOfItsGradient) {
  Generator gen(7);
  const std::vector<Shape> shapes = {{5, 4}, {4, 4}, {4, 12}, {4, 8}, {8, 4}};
  std::vector<Tensor> params, directions;
  for (const Shape& s : shapes) {
    params.push_back(mul(random(s, gen), 0.5));
    directions.push_back(random(s, gen));
  }
  const TensorsFn f = [](const std::vector<Tensor>& p) { return std::vector<Tensor>{tiny_charlm_loss(p)}; };
  const HvpResult r = hvp(f, params, directions);
  // (∇L(p + hd) − ∇L(p − hd)) / 2h, whose error is O(h²): layer norm's second derivatives are large
  // here (|Hd| up to 1.4e3), and at h = 1e-5 the difference is 9e-4, at 1e-6 9e-6 (measured)
  constexpr double h = 1e-6;
  const auto gradient_at = [&](double step) {
    std::vector<Tensor> moved;
    for (size_t i = 0; i < params.size(); ++i) moved.push_back(add(params[i], mul(directions[i], step)));
    return vjp(f, moved, {ones({}, DType::f64)}).cotangents;
  };
  const std::vector<Tensor> plus = gradient_at(h), minus = gradient_at(-h);
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor numeric = mul(sub(plus[i], minus[i]), 1 / (2 * h));
    const double scale = std::max(1.0, max(abs(numeric)).item());
    EXPECT_LT(max_difference(r.products[i], numeric), 1e-7 * scale) << "parameter " << i;
    EXPECT_LT(max_difference(r.gradients[i], vjp(f, params, {ones({}, DType::f64)}).cotangents[i]), 1e-12);
  }
}

TEST(ForwardAd, HessianIsSymmetricAndMatchesTheClosedForm) {
  // f(x, y) = Σ x² y  →  ∂²/∂x² = 2 diag(y), ∂²/∂x∂y = 2 diag(x), ∂²/∂y² = 0
  Generator gen(8);
  const Tensor x = random({3}, gen), y = random({3}, gen);
  const auto h = hessian(
      [](const std::vector<Tensor>& v) { return std::vector<Tensor>{sum(mul(mul(v[0], v[0]), v[1]))}; }, {x, y});
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      EXPECT_NEAR(h[0][0].at({i, j}), i == j ? 2 * y.at({i}) : 0.0, 1e-12);
      EXPECT_NEAR(h[0][1].at({i, j}), i == j ? 2 * x.at({i}) : 0.0, 1e-12);
      EXPECT_NEAR(h[1][0].at({i, j}), i == j ? 2 * x.at({i}) : 0.0, 1e-12);
      EXPECT_NEAR(h[1][1].at({i, j}), 0.0, 1e-12);
    }
  }
}

// sin, with a stated JVP that is right everywhere but at element `kWrong` of its input.
struct SinWithWrongJvp : Function<SinWithWrongJvp> {
  static constexpr std::string_view name = "SinWithWrongJvpBackward";
  static constexpr int64_t kWrong = 5;  // (1,2) of a (3, 3) input
  static Tensor forward(FunctionContext& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return sub(x, mul(mul(x, x), mul(x, 1.0 / 6)));  // x − x³/6, sin's cubic: engine ops only
  }
  static std::vector<Tensor> backward(FunctionContext& ctx, const std::vector<Tensor>& grads) {
    const Tensor& x = ctx.saved()[0];  // out = x − x³/6  →  dx = g (1 − x²/2)
    return {mul(grads[0], sub(ones_like(x), mul(mul(x, x), 0.5)))};
  }
  static Tensor jvp(FunctionContext& ctx, const std::vector<Tensor>& tangents) {
    const Tensor& x = ctx.saved()[0];
    Tensor wrong = ones_like(x);
    wrong.set({kWrong / 3, kWrong % 3}, 2.0);  // the bug: twice the derivative at one element
    return mul(mul(tangents[0], sub(ones_like(x), mul(mul(x, x), 0.5))), wrong);
  }
};

struct SinWithRightJvp : Function<SinWithRightJvp> {
  static constexpr std::string_view name = "SinWithRightJvpBackward";
  static Tensor forward(FunctionContext& ctx, const Tensor& x) { return SinWithWrongJvp::forward(ctx, x); }
  static std::vector<Tensor> backward(FunctionContext& ctx, const std::vector<Tensor>& grads) {
    return SinWithWrongJvp::backward(ctx, grads);
  }
  static Tensor jvp(FunctionContext& ctx, const std::vector<Tensor>& tangents) {
    const Tensor& x = ctx.saved()[0];  // out = x − x³/6  →  dout = t (1 − x²/2)
    return mul(tangents[0], sub(ones_like(x), mul(mul(x, x), 0.5)));
  }
};

TEST(ForwardAd, GradcheckCatchesAFunctionsWrongJvpNamingTheInputAndElement) {
  Generator gen(9);
  const Tensor x = random({3, 3}, gen).requires_grad_();
  const OpFunction wrong = [](const std::vector<Tensor>& in) { return SinWithWrongJvp::apply(in[0]); };
  const OpFunction right = [](const std::vector<Tensor>& in) { return SinWithRightJvp::apply(in[0]); };
  EXPECT_GRADCHECK(right, {x});
  EXPECT_NONFATAL_FAILURE(EXPECT_GRADCHECK(wrong, {x}), "NOT OK");
  const GradcheckResult result = gradcheck(wrong, {x});
  ASSERT_FALSE(result.ok);
  // the report's violations: the JVP against the VJP (all inputs along a random d), and the JVP
  // against finite differences at input 0, element (1,2) alone
  const Tolerance tol;
  std::vector<std::string> violations;
  for (const ElementError& e : result.worst)
    if (e.abs_error > tol.atol + tol.rtol * std::abs(e.numeric))
      violations.push_back(fmt::format("{} {} {}", e.derivative, e.input, e.index));
  EXPECT_EQ(violations, (std::vector<std::string>{"jvp·vjp -1 random d", "jvp 0 (1,2)"})) << result.report();
  // reverse mode alone passes (the backward is right); the JVP against the VJP fails too
  EXPECT_TRUE(gradcheck(wrong, {x}, {.mode = GradcheckMode::reverse}).ok);
  EXPECT_FALSE(gradcheck(wrong, {x}, {.mode = GradcheckMode::forward}).ok);
}

TEST(ForwardAd, ForwardOverReverseChecksAFunctionsSecondOrder) {
  Generator gen(10);
  const Tensor x = random({2, 3}, gen).requires_grad_();
  const OpFunction right = [](const std::vector<Tensor>& in) { return SinWithRightJvp::apply(in[0]); };
  EXPECT_GRADGRADCHECK(right, {x});
}

}  // namespace
}  // namespace ag
