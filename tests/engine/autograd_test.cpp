// The backward walk: accumulation, hooks, retain_graph, versions, no cycles, deep graphs.
#include "engine/autograd.h"

#include <gtest/gtest.h>

#include "engine/ops/arithmetic.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "tests/test_util.h"

namespace ag {
namespace {

TEST(Autograd, ChainRuleOnAPolynomial) {
  Tensor x = tensor({1.0, -2.0, 0.5}, {3}).requires_grad_();
  Tensor y = sum(add(mul(x, x), mul(x, 3.0)));  // Σ x² + 3x
  y.backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{5.0, -1.0, 4.0}));  // 2x + 3
}

TEST(Autograd, GradientsSumWherePathsMeet) {
  Tensor x = tensor({2.0}, {1}).requires_grad_();
  Tensor a = mul(x, 2.0);
  Tensor b = mul(x, 3.0);
  sum(mul(a, b)).backward();  // 6x² → 12x
  EXPECT_DOUBLE_EQ(x.grad().item(), 24.0);
}

// Where paths meet, the walk adds a gradient into its own buffer in place, but never into one that
// another path still holds: t = (h1 + h2) + h1 sends one gradient tensor to both h1 and h2 (AddBackward
// returns it twice), and h1's second gradient must not reach h2 through it. dt/dx = 2 + 3 + 2.
TEST(Autograd, PathsMeetWithoutChangingAGradientAnotherPathHolds) {
  const Tensor x = ones({70000}).requires_grad_();  // big enough for the in-place sum to run on threads
  const Tensor h1 = mul(x, 2.0), h2 = mul(x, 3.0);
  sum(add(add(h1, h2), h1)).backward();
  const std::vector<double> grad = x.grad().to_vector();
  EXPECT_EQ(grad.front(), 7.0);
  EXPECT_EQ(grad.back(), 7.0);
}

TEST(Autograd, LeafGradAccumulatesAcrossBackwards) {
  Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  sum(mul(x, 2.0)).backward();
  sum(mul(x, 3.0)).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{5.0, 5.0}));
}

TEST(Autograd, LeafGradIsNotSharedWithOtherLeaves) {
  Tensor a = tensor({1.0}, {1}).requires_grad_();
  Tensor b = tensor({1.0}, {1}).requires_grad_();
  sum(add(a, b)).backward();  // the same gradient tensor reaches both
  NoGradGuard no_grad;
  Tensor ga = a.grad();
  ga.mul_(10);
  EXPECT_DOUBLE_EQ(b.grad().item(), 1.0);
}

// A leaf takes the gradient an op made for it alone, without a copy (as PyTorch's AccumulateGrad
// does); a gradient something else still holds, here a hook's, is copied.
TEST(Autograd, LeafCopiesAGradientAHookKept) {
  Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  Tensor kept;
  x.register_hook([&](const Tensor& g) {
    kept = g;
    return Tensor();
  });
  sum(mul(x, 3.0)).backward();
  NoGradGuard no_grad;
  kept.mul_(10);
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{3.0, 3.0}));
  EXPECT_NE(x.grad().raw_data(), kept.raw_data());
}

// record() on an output that is its input itself (an identity forward) gives the output a new
// alias with the node: the leaf stays a leaf and gets the gradient through the node.
TEST(Autograd, RecordingOnAnInputItselfLeavesTheInputAsItWas) {
  Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  Tensor out = x;  // an identity forward
  record(out, "TwiceBackward", {x}, {}, [](const BackwardContext& c) {
    // out = x, with a made-up derivative of 2 to tell this node's gradient from a plain pass-through
    return std::vector<Tensor>{mul(c.grad, 2.0)};
  });
  EXPECT_TRUE(x.is_leaf());
  EXPECT_EQ(x.grad_fn(), nullptr);
  ASSERT_NE(out.grad_fn(), nullptr);
  EXPECT_EQ(out.raw_data(), x.raw_data());  // an alias of the same memory
  sum(out).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{2.0, 2.0}));
  const Tensor same_shape = reshape(x, {2});  // an engine op whose forward may return its input
  EXPECT_TRUE(x.is_leaf());
  sum(same_shape).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{3.0, 3.0}));
}

// record() on an output that already has a node (its forward ran recorded ops) puts the new node on
// a new alias; the earlier tensor keeps its node.
TEST(Autograd, RecordingOnATensorWithANodeKeepsTheEarlierNode) {
  Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  const Tensor computed = mul(x, 3.0);
  Tensor out = computed;
  record(out, "ZeroBackward", {x}, {}, [](const BackwardContext& c) { return std::vector<Tensor>{mul(c.grad, 0.0)}; });
  EXPECT_EQ(std::string(computed.grad_fn()->name), "MulScalarBackward");
  EXPECT_EQ(std::string(out.grad_fn()->name), "ZeroBackward");
  sum(computed).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{3.0, 3.0}));
  sum(out).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{3.0, 3.0}));
}

TEST(Autograd, NonScalarBackwardTakesAGradient) {
  Tensor x = tensor({1.0, 2.0, 3.0}, {3}).requires_grad_();
  Tensor y = mul(x, x);
  y.backward(tensor({1.0, 0.0, -1.0}, {3}));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{2.0, 0.0, -6.0}));
}

TEST(Autograd, SecondBackwardThroughAFreedGraphIsAnError) {
  Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  Tensor y = sum(exp(x));
  y.backward();
  expect_error([&] { y.backward(); }, {"second time", "retain_graph"});
}

TEST(Autograd, RetainGraphAllowsASecondBackward) {
  Tensor x = tensor({0.0, 1.0}, {2}).requires_grad_();
  Tensor y = sum(exp(x));
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  EXPECT_NEAR(x.grad().at({1}), 2 * std::exp(1.0), 1e-6);
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = ones({2}).requires_grad_();
  {
    NoGradGuard no_grad;
    Tensor y = mul(x, 2.0);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
  }
  EXPECT_TRUE(mul(x, 2.0).requires_grad());
}

TEST(Autograd, DetachStopsTheGradient) {
  Tensor x = tensor({3.0}, {1}).requires_grad_();
  Tensor y = add(mul(x, x), mul(x.detach(), x.detach()));
  sum(y).backward();
  EXPECT_DOUBLE_EQ(x.grad().item(), 6.0);
  EXPECT_FALSE(x.detach().requires_grad());
  EXPECT_EQ(x.detach().raw_data(), x.raw_data());  // shares storage
}

TEST(Autograd, RetainGradKeepsAnIntermediateGradient) {
  Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  Tensor h = mul(x, 3.0);
  h.retain_grad();
  Tensor untouched = mul(x, 4.0);
  sum(mul(h, h)).backward();
  EXPECT_EQ(h.grad().to_vector(), (std::vector<double>{6.0, 12.0}));  // 2h
  EXPECT_FALSE(untouched.grad().defined());
}

TEST(Autograd, HooksCanReplaceTheGradient) {
  Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  Tensor h = mul(x, 1.0);
  std::vector<double> seen;
  h.register_hook([&](const Tensor& g) {
    seen = g.to_vector();
    return mul(g, 10.0);
  });
  x.register_hook([](const Tensor& g) { return add(g, 1.0); });
  sum(h).backward();
  EXPECT_EQ(seen, (std::vector<double>{1.0, 1.0}));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{11.0, 11.0}));
}

TEST(Autograd, PostAccumulateHookSeesTheWalksWholeGradientOnce) {
  Tensor w = tensor({1.0, 2.0}, {2}).requires_grad_();
  std::vector<std::vector<double>> seen;
  w.register_post_accumulate_grad_hook([&](const Tensor& leaf) { seen.push_back(leaf.grad().to_vector()); });
  sum(add(mul(w, 3.0), mul(w, w))).backward();  // two paths meet at w: the hook runs once, after both
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<double>{5.0, 7.0}));  // 3 + 2w
  sum(w).backward();                                    // accumulates: the hook sees the sum
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], (std::vector<double>{6.0, 8.0}));
  Tensor not_leaf = mul(w, 2.0);
  expect_error([&] { not_leaf.register_post_accumulate_grad_hook([](const Tensor&) {}); }, {"expected a leaf"});
}

TEST(Autograd, InPlaceChangeOfASavedOutputIsAnError) {
  Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  Tensor y = exp(x);  // saves y
  {
    NoGradGuard no_grad;
    y.mul_(2.0);
  }
  expect_error([&] { sum(y).backward(); }, {"ExpBackward", "in-place", "version 1", "expected version 0"});
}

TEST(Autograd, InPlaceChangeOfASavedInputThroughAViewIsAnError) {
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0}, {4}).requires_grad_();
  Tensor y = log(x);  // saves x
  {
    NoGradGuard no_grad;
    Tensor view = reshape(x, {2, 2});  // shares storage and version counter
    view.fill_(1.0);
  }
  expect_error([&] { sum(y).backward(); }, {"LogBackward", "in-place"});
}

TEST(Autograd, InPlaceWriteToATensorThatRequiresGradIsRefused) {
  Tensor x = ones({2}).requires_grad_();
  expect_error([&] { x.fill_(2.0); }, {"fill_", "requires grad", "NoGradGuard"});
}

TEST(Autograd, GraphsAreFreedWhenDropped) {
  std::weak_ptr<Node> node;
  std::weak_ptr<TensorImpl> saved_output;
  {
    Tensor x = ones({3}).requires_grad_();
    Tensor y = exp(x);  // a node that saves its own output
    node = y.grad_fn();
    saved_output = y.impl_ptr();
  }
  EXPECT_TRUE(node.expired());
  EXPECT_TRUE(saved_output.expired());
}

TEST(Autograd, TenThousandGraphsLeaveNothingBehind) {
  Tensor w = randn({4, 4}).requires_grad_();
  std::weak_ptr<Node> last;
  for (int i = 0; i < 10000; ++i) {
    Tensor y = sum(tanh(exp(mul(w, w))));
    last = y.grad_fn();
    if (i % 2 == 0) y.backward();
  }
  EXPECT_TRUE(last.expired());
  EXPECT_TRUE(w.impl()->grad_accumulator.expired());
}

TEST(Autograd, HundredThousandOpChainBackpropagates) {
  Tensor x = tensor({1.0}, {1}, DType::f64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = add(y, 1e-5);
  y = mul(y, 2.0);
  y.backward();
  EXPECT_DOUBLE_EQ(x.grad().item(), 2.0);
  EXPECT_NEAR(y.item(), 2 * (1.0 + 100000 * 1e-5), 1e-9);
}

TEST(Autograd, SecondDerivativeThroughCreateGraph) {
  Tensor x = tensor({1.0, 2.0}, {2}, DType::f64).requires_grad_();
  Tensor y = sum(pow(x, 3.0));
  y.backward({}, false, /*create_graph=*/true);
  Tensor dy = x.grad();  // 3x², with a graph
  EXPECT_EQ(dy.to_vector(), (std::vector<double>{3.0, 12.0}));
  ASSERT_TRUE(dy.requires_grad());
  x.set_grad({});
  sum(dy).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{6.0, 12.0}));  // 6x
}

TEST(Autograd, SecondDerivativeThroughASavedOutput) {
  // d²/dx² exp(x) = exp(x): ExpBackward saves its output, which must regain its grad_fn.
  Tensor x = tensor({0.5}, {1}, DType::f64).requires_grad_();
  sum(exp(x)).backward({}, false, true);
  Tensor dy = x.grad();
  x.set_grad({});
  sum(dy).backward();
  EXPECT_NEAR(x.grad().item(), std::exp(0.5), 1e-12);
}

TEST(Autograd, GradientsFlowAcrossDtypes) {
  Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  Tensor y = sum(mul(to(x, DType::f64), 3.0));
  EXPECT_EQ(y.dtype(), DType::f64);
  y.backward();
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{3.0, 3.0}));
}

TEST(Autograd, BroadcastGradientsReduceToTheInputShape) {
  Tensor a = ones({2, 3}).requires_grad_();
  Tensor b = tensor({1.0, 2.0, 3.0}, {3}).requires_grad_();
  Tensor c = tensor({2.0}, {}).requires_grad_();
  sum(mul(add(a, b), c)).backward();
  EXPECT_EQ(a.grad().shape(), (Shape{2, 3}));
  EXPECT_EQ(b.grad().shape(), (Shape{3}));
  EXPECT_EQ(b.grad().to_vector(), (std::vector<double>{4.0, 4.0, 4.0}));
  EXPECT_EQ(c.grad().shape(), Shape{});
  EXPECT_DOUBLE_EQ(c.grad().item(), 3.0 + 6.0 + 9.0);  // Σ (a + b)
}

TEST(Autograd, NodesCarryTheirOpNames) {
  Tensor x = ones({2}).requires_grad_();
  EXPECT_EQ(sigmoid(x).grad_fn()->name, "SigmoidBackward");
  EXPECT_EQ(sum(x).grad_fn()->name, "SumBackward");
  EXPECT_EQ(sum(x).grad_fn()->next[0]->name, "AccumulateGrad");
}

}  // namespace
}  // namespace ag
