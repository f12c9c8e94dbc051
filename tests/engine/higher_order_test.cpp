// ag::grad, the functional gradient, and higher-order gradients through it: its errors, that it
// leaves .grad() alone, second derivatives against closed forms, and Hessian-vector products
// against finite differences of the gradient.
#include <gtest/gtest.h>

#include "engine/autograd.h"
#include "engine/gradcheck.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/attention.h"
#include "engine/ops/matmul.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "tests/test_util.h"

namespace ag {
namespace {

Tensor f64_leaf(const std::vector<double>& values, const Shape& shape) {
  return tensor(values, shape, DType::f64).requires_grad_();
}

TEST(Grad, ReturnsTheGradientWithoutTouchingDotGrad) {
  Tensor x = f64_leaf({1.0, -2.0, 3.0}, {3});
  Tensor w = f64_leaf({0.5}, {1});
  const std::vector<Tensor> g = grad({sum(mul(mul(x, x), w))}, {x});  // d/dx Σ w x² = 2 w x
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].to_vector(), (std::vector<double>{1.0, -2.0, 3.0}));
  EXPECT_FALSE(g[0].requires_grad());
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());  // in the graph, but not asked for
}

TEST(Grad, OfAnIntermediateTensor) {
  Tensor x = f64_leaf({1.0, 2.0}, {2});
  Tensor h = mul(x, 3.0);
  const std::vector<Tensor> g = grad({sum(mul(h, h))}, {h, x});  // d/dh Σ h² = 2h; d/dx = 18x
  EXPECT_EQ(g[0].to_vector(), (std::vector<double>{6.0, 12.0}));
  EXPECT_EQ(g[1].to_vector(), (std::vector<double>{18.0, 36.0}));
}

TEST(Grad, SumsOverSeveralOutputsWeightedByGradOutputs) {
  Tensor x = f64_leaf({1.0, 2.0}, {2});
  Tensor a = mul(x, x);  // da/dx = 2x
  Tensor b = exp(x);     // db/dx = exp(x)
  Tensor ga = tensor({1.0, 10.0}, {2}, DType::f64);
  const std::vector<Tensor> g = grad({a, sum(b)}, {x}, {ga, Tensor()});  // sum(b) gets ones
  EXPECT_NEAR(g[0].to_vector()[0], 1.0 * 2 + std::exp(1.0), 1e-12);
  EXPECT_NEAR(g[0].to_vector()[1], 10.0 * 4 + std::exp(2.0), 1e-12);
}

TEST(Grad, Errors) {
  Tensor x = f64_leaf({1.0, 2.0}, {2});
  Tensor unused = f64_leaf({1.0}, {1});
  Tensor constant = tensor({1.0, 2.0}, {2}, DType::f64);
  expect_error([&] { grad({mul(x, 2.0)}, {x}); }, {"grad: output 0", "one-element", "(2)", "grad_outputs[0]"});
  expect_error([&] { grad({sum(x)}, {unused}); }, {"grad: input 0", "not used", "allow_unused"});
  expect_error([&] { grad({sum(x)}, {constant}); }, {"grad: input 0", "does not require grad"});
  expect_error([&] { grad({sum(constant)}, {x}); }, {"grad: output 0", "does not require grad"});
  expect_error([&] { grad({sum(x)}, {x}, {ones({2}, DType::f64)}); }, {"grad_outputs[0]", "(2)", "()"});
  expect_error([&] { grad({sum(x), sum(x)}, {x}, {Tensor()}); }, {"1 grad_outputs for 2 outputs"});
}

TEST(Grad, AllowUnusedGivesAnUndefinedGradient) {
  Tensor x = f64_leaf({1.0, 2.0}, {2});
  Tensor unused = f64_leaf({1.0}, {1});
  const std::vector<Tensor> g = grad({sum(x)}, {x, unused}, {}, false, /*allow_unused=*/true);
  EXPECT_EQ(g[0].to_vector(), (std::vector<double>{1.0, 1.0}));
  EXPECT_FALSE(g[1].defined());
}

TEST(Grad, FreesTheGraphUnlessCreateGraph) {
  Tensor x = f64_leaf({0.5}, {1});
  Tensor y = sum(exp(x));
  grad({y}, {x});
  expect_error([&] { grad({y}, {x}); }, {"ExpBackward", "retain_graph"});
  Tensor z = sum(exp(x));
  grad({z}, {x}, {}, /*create_graph=*/true);
  EXPECT_NEAR(grad({z}, {x})[0].item(), std::exp(0.5), 1e-12);  // kept by create_graph
}

TEST(Grad, ThirdDerivativeOfAPolynomial) {
  // y = x⁴: y' = 4x³, y'' = 12x², y''' = 24x.
  Tensor x = f64_leaf({1.5, -2.0}, {2});
  const Tensor d1 = grad({sum(pow(x, 4.0))}, {x}, {}, true)[0];
  const Tensor d2 = grad({sum(d1)}, {x}, {}, true)[0];
  const Tensor d3 = grad({sum(d2)}, {x})[0];
  EXPECT_EQ(d1.to_vector(), (std::vector<double>{4 * 3.375, -32.0}));
  EXPECT_EQ(d2.to_vector(), (std::vector<double>{12 * 2.25, 48.0}));
  EXPECT_EQ(d3.to_vector(), (std::vector<double>{36.0, -48.0}));
}

TEST(Grad, BackwardWithCreateGraphGivesADifferentiableDotGrad) {
  // gelu''(x) = φ(x)(2 − x²) in closed form: gelu's backward must itself be differentiable.
  Tensor x = f64_leaf({0.3, -1.2}, {2});
  sum(gelu(x)).backward({}, false, /*create_graph=*/true);
  ASSERT_TRUE(x.grad().requires_grad());
  const std::vector<double> d2 = grad({sum(x.grad())}, {x})[0].to_vector();
  for (int i = 0; i < 2; ++i) {
    const double v = x.to_vector()[i];
    const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    EXPECT_NEAR(d2[i], pdf * (2 - v * v), 1e-12);
  }
}

TEST(Grad, ThirdDerivativeOfGelu) {
  // gelu'''(x) = φ(x) (x³ − 4x); the tanh form against a central difference of its gelu''.
  Tensor x = f64_leaf({0.3, -1.2, 2.1}, {3});
  auto second = [](const Tensor& at, GeluApproximation approximation) {
    const Tensor d1 = grad({sum(gelu(at, approximation))}, {at}, {}, true)[0];
    return grad({sum(d1)}, {at}, {}, true)[0];
  };
  const std::vector<double> d3 = grad({sum(second(x, GeluApproximation::none))}, {x})[0].to_vector();
  for (int i = 0; i < 3; ++i) {
    const double v = x.to_vector()[i];
    const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    EXPECT_NEAR(d3[i], pdf * (v * v * v - 4 * v), 1e-12);
  }
  const double eps = 1e-5;
  const std::vector<double> d3_tanh = grad({sum(second(x, GeluApproximation::tanh))}, {x})[0].to_vector();
  const std::vector<double> plus = second(add(x.detach(), eps).requires_grad_(), GeluApproximation::tanh).to_vector();
  const std::vector<double> minus = second(add(x.detach(), -eps).requires_grad_(), GeluApproximation::tanh).to_vector();
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(d3_tanh[i], (plus[i] - minus[i]) / (2 * eps), 1e-8);
}

// gradgradcheck fails a backward that is right to first order but built from a constant
// (a detached input), so its own derivative is missing.
TEST(Gradgradcheck, CatchesABackwardThatIsNotDifferentiable) {
  auto cube = [](const std::vector<Tensor>& in) {
    Tensor out = pow(in[0].detach(), 3.0);
    record(out, "DetachedCubeBackward", {in[0]}, {in[0]}, [](const BackwardContext& c) {
      return std::vector<Tensor>{mul(c.grad, mul(pow(c.saved[0].detach(), 2.0), 3.0))};  // 3x², but constant
    });
    return out;
  };
  Tensor x = f64_leaf({0.5, -1.0, 2.0}, {3});
  EXPECT_TRUE(gradcheck(cube, {x}).ok);
  const GradcheckResult second = gradgradcheck(cube, {x});
  EXPECT_FALSE(second.ok);
  EXPECT_NE(second.report().find("NOT OK"), std::string::npos);
}

// Hessian-vector products: Hv = ∇(∇f · v) by double backward, against the central difference
// of the gradient (∇f(p + εv) − ∇f(p − εv)) / 2ε, in f64. p and v are lists of tensors.
void expect_hvp_matches_finite_differences(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                           std::vector<Tensor> params, uint64_t seed) {
  Generator gen(seed);
  std::vector<Tensor> v;
  for (const Tensor& p : params) v.push_back(randn(p.shape(), DType::f64, gen));
  const std::vector<Tensor> g = grad({f(params)}, params, {}, /*create_graph=*/true);
  Tensor g_dot_v = sum(mul(g[0], v[0]));
  for (size_t i = 1; i < params.size(); ++i) g_dot_v = add(g_dot_v, sum(mul(g[i], v[i])));
  const std::vector<Tensor> hv = grad({g_dot_v}, params);

  const double eps = 1e-5;
  auto gradient_at = [&](double step) {
    std::vector<Tensor> moved;
    for (size_t i = 0; i < params.size(); ++i)
      moved.push_back(add(params[i].detach(), mul(v[i], step)).requires_grad_());
    return grad({f(moved)}, moved);
  };
  const std::vector<Tensor> plus = gradient_at(eps), minus = gradient_at(-eps);
  double max_diff = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::vector<double> analytic = hv[i].to_vector();
    const std::vector<double> numeric = mul(sub(plus[i], minus[i]), 1 / (2 * eps)).to_vector();
    for (size_t j = 0; j < analytic.size(); ++j) {
      EXPECT_NEAR(analytic[j], numeric[j], 1e-6 + 1e-6 * std::abs(numeric[j])) << "param " << i << " at " << j;
      max_diff = std::max(max_diff, std::abs(analytic[j] - numeric[j]));
    }
  }
  EXPECT_GT(std::abs(sum(mul(hv[0], hv[0])).item()), 1e-6);  // a real curvature, not zeros
  fmt::print("Hv against finite differences: max abs difference {:.3e}\n", max_diff);
}

TEST(HessianVectorProduct, SmallMlpMatchesFiniteDifferences) {
  Generator gen(5);
  const Tensor x = randn({4, 3}, DType::f64, gen);
  // f(W1, b1, W2) = Σ (tanh(gelu(x W1 + b1) W2))²
  auto loss = [x](const std::vector<Tensor>& p) {
    const Tensor hidden = gelu(add(matmul(x, p[0]), p[1]));  // (4, 5)
    const Tensor out = tanh(matmul(hidden, p[2]));           // (4, 2)
    return sum(mul(out, out));
  };
  expect_hvp_matches_finite_differences(
      loss,
      {randn({3, 5}, DType::f64, gen).requires_grad_(), randn({5}, DType::f64, gen).requires_grad_(),
       randn({5, 2}, DType::f64, gen).requires_grad_()},
      6);
}

TEST(HessianVectorProduct, CausalAttentionLossMatchesFiniteDifferences) {
  Generator gen(7);
  // f(q, k, v) = Σ attention(q, k, v)², causal, through the fused op's double backward.
  auto loss = [](const std::vector<Tensor>& p) {
    const Tensor out = scaled_dot_product_attention(p[0], p[1], p[2], {.is_causal = true}).output;
    return sum(mul(out, out));
  };
  expect_hvp_matches_finite_differences(
      loss,
      {randn({1, 2, 4, 3}, DType::f64, gen).requires_grad_(), randn({1, 2, 4, 3}, DType::f64, gen).requires_grad_(),
       randn({1, 2, 4, 3}, DType::f64, gen).requires_grad_()},
      8);
}

}  // namespace
}  // namespace ag
