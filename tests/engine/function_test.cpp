// ag::Function (custom ops with a hand-written backward), ag::register_op with the gradcheck table,
// and the GoogleTest assertions of engine/testing/gradcheck_gtest.h. Its own executable: it adds
// ops to the global registry, which the registry-wide suites must not see.
#include "engine/function.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <sstream>

#include "engine/gradcheck.h"
#include "engine/graph.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/registry.h"
#include "engine/testing/gradcheck_gtest.h"
#include "tests/test_util.h"

namespace ag {
namespace {

// alpha · a ⊙ b: two tensor inputs and a scalar passed through.
struct ScaledProduct : Function<ScaledProduct> {
  static constexpr std::string_view name = "ScaledProductBackward";
  static inline std::vector<bool> needs_seen;  // what backward's ctx.needs_input_grad said

  static Tensor forward(FunctionContext& ctx, const Tensor& a, const Tensor& b, double alpha) {
    ctx.save_for_backward({a, b});
    ctx.set("alpha", alpha);
    return mul(mul(a, b), alpha);
  }
  static std::vector<Tensor> backward(FunctionContext& ctx, const std::vector<Tensor>& grads) {
    // out = alpha · a ⊙ b  →  da = g · alpha · b, db = g · alpha · a
    const Tensor& a = ctx.saved()[0];
    const Tensor& b = ctx.saved()[1];
    const auto alpha = ctx.get<double>("alpha");
    needs_seen = {ctx.needs_input_grad(0), ctx.needs_input_grad(1)};
    return {ctx.needs_input_grad(0) ? mul(mul(grads[0], b), alpha) : Tensor(),
            ctx.needs_input_grad(1) ? mul(mul(grads[0], a), alpha) : Tensor()};
  }
};

// exp, saving its own output (the node keeps it without owning itself).
struct SelfSavingExp : Function<SelfSavingExp> {
  static constexpr std::string_view name = "SelfSavingExpBackward";
  static Tensor forward(FunctionContext& ctx, const Tensor& x) {
    Tensor out = exp(x);
    ctx.save_for_backward({out});
    return out;
  }
  static std::vector<Tensor> backward(FunctionContext& ctx, const std::vector<Tensor>& grads) {
    return {mul(grads[0], ctx.saved()[0])};  // out = exp(x)  →  dx = g · out
  }
};

// Returns its input itself.
struct Identity : Function<Identity> {
  static constexpr std::string_view name = "IdentityBackward";
  static Tensor forward(FunctionContext&, const Tensor& x) { return x; }
  static std::vector<Tensor> backward(FunctionContext&, const std::vector<Tensor>& grads) { return {grads[0]}; }
};

// 2x, computed with recorded ops: its forward's output already has a node.
struct RecordedTwice : Function<RecordedTwice> {
  static constexpr std::string_view name = "RecordedTwiceBackward";
  static Tensor forward(FunctionContext&, const Tensor& x) {
    const GradModeGuard recording(true);
    return mul(x, 2.0);
  }
  static std::vector<Tensor> backward(FunctionContext&, const std::vector<Tensor>& grads) {
    return {mul(grads[0], 2.0)};
  }
};

// exp with the derivative of the identity: a wrong backward.
struct WrongExp : Function<WrongExp> {
  static constexpr std::string_view name = "WrongExpBackward";
  static Tensor forward(FunctionContext&, const Tensor& x) { return exp(x); }
  static std::vector<Tensor> backward(FunctionContext&, const std::vector<Tensor>& grads) { return {grads[0]}; }
};

// exp whose backward reads x detached: right to first order, but its own gradient misses x's part.
struct DetachedExp : Function<DetachedExp> {
  static constexpr std::string_view name = "DetachedExpBackward";
  static Tensor forward(FunctionContext& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return exp(x);
  }
  static std::vector<Tensor> backward(FunctionContext& ctx, const std::vector<Tensor>& grads) {
    return {mul(grads[0], exp(ctx.saved()[0].detach()))};
  }
};

Tensor scaled_product(const std::vector<Tensor>& in) { return ScaledProduct::apply(in[0], in[1], 0.5); }
Tensor wrong_exp(const std::vector<Tensor>& in) { return WrongExp::apply(in[0]); }
Tensor detached_exp(const std::vector<Tensor>& in) { return DetachedExp::apply(in[0]); }
Tensor f64_input() { return tensor({-0.5, 0.25, 1.0}, {3}, DType::f64).requires_grad_(); }

TEST(Function, GradientsAreTheHandComputedOnes) {
  const Tensor a = tensor({1.0, 2.0}, {2}).requires_grad_();
  const Tensor b = tensor({3.0, 4.0}, {2}).requires_grad_();
  const Tensor out = ScaledProduct::apply(a, b, 0.5);
  EXPECT_EQ(out.to_vector(), (std::vector<double>{1.5, 4.0}));
  EXPECT_EQ(std::string(out.grad_fn()->name), "ScaledProductBackward");
  sum(out).backward();
  EXPECT_EQ(a.grad().to_vector(), (std::vector<double>{1.5, 2.0}));  // 0.5 · b
  EXPECT_EQ(b.grad().to_vector(), (std::vector<double>{0.5, 1.0}));  // 0.5 · a
}

TEST(Function, GradientsMatchFiniteDifferencesToSecondOrder) {
  Generator gen(3);
  const std::vector<Tensor> inputs = {randn({2, 3}, DType::f64, gen).requires_grad_(),
                                      randn({2, 3}, DType::f64, gen).requires_grad_()};
  for (const GradcheckResult& result : {gradcheck(scaled_product, inputs), gradgradcheck(scaled_product, inputs)})
    EXPECT_TRUE(result.ok) << result.report();
  const auto self_saving_exp = [](const std::vector<Tensor>& in) { return SelfSavingExp::apply(in[0]); };
  for (const GradcheckResult& result :
       {gradcheck(self_saving_exp, {f64_input()}), gradgradcheck(self_saving_exp, {f64_input()})})
    EXPECT_TRUE(result.ok) << result.report();
}

TEST(Function, BackwardIsToldWhichInputsNeedAGradient) {
  const Tensor a = tensor({1.0, 2.0}, {2}).requires_grad_();
  const Tensor b = tensor({3.0, 4.0}, {2});
  sum(ScaledProduct::apply(a, b, 2.0)).backward();
  EXPECT_EQ(ScaledProduct::needs_seen, (std::vector<bool>{true, false}));
  EXPECT_EQ(a.grad().to_vector(), (std::vector<double>{6.0, 8.0}));
  EXPECT_FALSE(b.grad().defined());
}

TEST(Function, RecordsNothingWithoutGradMode) {
  const Tensor a = tensor({1.0}, {1}).requires_grad_();
  const NoGradGuard no_grad;
  const Tensor out = ScaledProduct::apply(a, a, 3.0);
  EXPECT_EQ(out.item(), 3.0);
  EXPECT_EQ(out.grad_fn(), nullptr);
}

TEST(Function, AnIdentityForwardLeavesTheLeafALeaf) {
  const Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  const Tensor y = Identity::apply(x);
  EXPECT_TRUE(x.is_leaf());
  EXPECT_EQ(x.grad_fn(), nullptr);
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(std::string(y.grad_fn()->name), "IdentityBackward");
  EXPECT_EQ(y.raw_data(), x.raw_data());  // the same memory
  sum(mul(y, tensor({3.0, 5.0}, {2}))).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{3.0, 5.0}));
}

// A Function named "LeafBackward" reads as op "leaf", but the graph export still tells it from
// a leaf by its backward: drawn as a call with its input, not as a parameter.
struct Leaf : Function<Leaf> {
  static constexpr std::string_view name = "LeafBackward";
  static Tensor forward(FunctionContext&, const Tensor& x) { return mul(x, 2.0); }
  static std::vector<Tensor> backward(FunctionContext&, const std::vector<Tensor>& grads) {
    return {mul(grads[0], 2.0)};
  }
};

TEST(Function, ANodeNamedLikeALeafIsNotDrawnAsOne) {
  const Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  const Tensor loss = sum(Leaf::apply(x));
  const std::string text = graph_text(capture_graph(loss, parameter_names({{"x", x}})));
  EXPECT_NE(text.find("%0 = parameter x"), std::string::npos) << text;
  EXPECT_NE(text.find("%1 = leaf(%0)"), std::string::npos) << text;
}

TEST(Function, AnInputWithANodeKeepsItsNode) {
  const Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  const Tensor h = mul(x, 3.0);
  const Tensor y = Identity::apply(h);
  EXPECT_EQ(std::string(h.grad_fn()->name), "MulScalarBackward");
  EXPECT_EQ(y.grad_fn()->next[0], h.grad_fn());
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{3.0, 3.0}));
}

// The forward's own recorded node is not the function's graph: the function's node replaces it on
// the output, with an edge straight to x, and the gradient is what backward says.
TEST(Function, AnOutputThatAlreadyHasANodeGetsTheFunctionsNode) {
  const Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  const Tensor y = RecordedTwice::apply(x);
  EXPECT_EQ(std::string(y.grad_fn()->name), "RecordedTwiceBackward");
  EXPECT_EQ(y.grad_fn()->next[0], gradient_edge(x));
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{2.0, 2.0}));
}

TEST(Function, ASavedTensorChangedInPlaceIsAnError) {
  const Tensor a = tensor({1.0, 2.0}, {2}).requires_grad_();
  const Tensor b = tensor({3.0, 4.0}, {2});
  const Tensor out = ScaledProduct::apply(a, b, 1.0);
  b.detach().mul_(2.0);
  expect_error([&] { sum(out).backward(); },
               {"ScaledProductBackward: saved tensor 1", "modified by an in-place operation"});
}

struct TwoGradients : Function<TwoGradients> {
  static constexpr std::string_view name = "TwoGradientsBackward";
  static Tensor forward(FunctionContext&, const Tensor& x) { return clone(x); }
  static std::vector<Tensor> backward(FunctionContext&, const std::vector<Tensor>& grads) {
    return {grads[0], grads[0]};
  }
};

struct SummedGradient : Function<SummedGradient> {
  static constexpr std::string_view name = "SummedGradientBackward";
  static Tensor forward(FunctionContext&, const Tensor& x) { return clone(x); }
  static std::vector<Tensor> backward(FunctionContext&, const std::vector<Tensor>& grads) { return {sum(grads[0])}; }
};

TEST(Function, AWrongNumberOrShapeOfGradientsIsRefused) {
  const Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  expect_error([&] { sum(TwoGradients::apply(x)).backward(); },
               {"TwoGradientsBackward: returned 2 gradients for 1 inputs"});
  expect_error([&] { sum(SummedGradient::apply(x)).backward(); },
               {"SummedGradientBackward: gradient for input 0 has shape ()", "but the input has shape (2)"});
}

struct Undefined : Function<Undefined> {
  static constexpr std::string_view name = "UndefinedBackward";
  static Tensor forward(FunctionContext&, const Tensor&) { return Tensor(); }
  static std::vector<Tensor> backward(FunctionContext&, const std::vector<Tensor>& grads) { return grads; }
};

struct Indices : Function<Indices> {
  static constexpr std::string_view name = "IndicesBackward";
  static Tensor forward(FunctionContext&, const Tensor& x) { return argmax(x, 0); }
  static std::vector<Tensor> backward(FunctionContext&, const std::vector<Tensor>& grads) { return grads; }
};

TEST(Function, AnUndefinedOrIntegerOutputIsRefused) {
  const Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  expect_error([&] { Undefined::apply(x); }, {"UndefinedBackward: forward returned an undefined tensor"});
  expect_error([&] { Indices::apply(x); }, {"IndicesBackward: forward returned a i64 tensor", "f32 and f64"});
}

// Reads its context wrongly in backward: a value under another type or name, saved() in forward.
struct ContextMisuse : Function<ContextMisuse> {
  static constexpr std::string_view name = "ContextMisuseBackward";
  static Tensor forward(FunctionContext& ctx, const Tensor& x, int misuse) {
    ctx.set("scale", 2.0);
    ctx.set("misuse", misuse);
    if (misuse == 0) ctx.saved();
    return clone(x);
  }
  static std::vector<Tensor> backward(FunctionContext& ctx, const std::vector<Tensor>& grads) {
    if (ctx.get<int>("misuse") == 1) ctx.get<float>("scale");
    if (ctx.get<int>("misuse") == 2) ctx.get<double>("shift");
    return {mul(grads[0], ctx.get<double>("scale"))};
  }
};

TEST(Function, MisusingTheContextIsAnErrorNamingTheFunction) {
  const Tensor x = tensor({1.0}, {1}).requires_grad_();
  expect_error([&] { ContextMisuse::apply(x, 0); }, {"ContextMisuseBackward: ctx.saved() is for backward"});
  expect_error([&] { sum(ContextMisuse::apply(x, 1)).backward(); },
               {"ContextMisuseBackward: ctx.get(\"scale\") asks for another type"});
  expect_error([&] { sum(ContextMisuse::apply(x, 2)).backward(); },
               {"ContextMisuseBackward: ctx.get(\"shift\"): forward set no such value; it set: misuse, scale"});
  sum(ContextMisuse::apply(x, 3)).backward();
  EXPECT_EQ(x.grad().item(), 2.0);
}

OpEntry scaled_product_entry(std::string name) {
  return {.name = std::move(name),
          .fn = scaled_product,
          .make_inputs = real_inputs(),
          .shape_sets = {{{2, 3}, {2, 3}}, {{4}, {4}}}};
}

TEST(RegisterOp, AddsAnOpThatTheGradcheckTableChecks) {
  const size_t before = Registry::global().ops().size();
  register_op(scaled_product_entry("scaled_product"));
  EXPECT_EQ(Registry::global().ops().size(), before + 1);
  const OpEntry& op = Registry::global().find("scaled_product");
  for (const bool second_order : {false, true}) {
    std::ostringstream table;
    EXPECT_EQ(print_gradcheck_table(table, gradcheck_rows(op), {.second_order = second_order}), 0);
    EXPECT_NE(table.str().find("scaled_product         (2,3) (2,3)"), std::string::npos) << table.str();
    EXPECT_NE(table.str().find("2 rows, 2 passed, 0 failed"), std::string::npos) << table.str();
  }
}

TEST(RegisterOp, AWrongBackwardFailsInTheTableWithItsWorstElements) {
  register_op({.name = "wrong_exp", .fn = wrong_exp, .make_inputs = real_inputs(), .shape_sets = {{{3}}}});
  std::ostringstream table;
  EXPECT_EQ(print_gradcheck_table(table, gradcheck_rows(Registry::global().find("wrong_exp"))), 1);
  for (const char* part : {"FAIL", "NOT OK", "analytic", "1 rows, 0 passed, 1 failed"})
    EXPECT_NE(table.str().find(part), std::string::npos) << part << " in\n" << table.str();
}

TEST(RegisterOp, ANameTakenOrAnIncompleteEntryIsRefused) {
  expect_error([] { register_op(scaled_product_entry("exp")); }, {"registry: op 'exp' is registered twice"});
  OpEntry no_function = scaled_product_entry("no_function");
  no_function.fn = nullptr;
  expect_error([&] { register_op(no_function); }, {"registry: op 'no_function' needs both fn and make_inputs"});
}

// A program registers its ops one by one while holding entries it found earlier (a gradcheck
// table's rows point into the registry): registering must not move them.
TEST(RegisterOp, EntriesFoundEarlierStayValid) {
  const OpEntry& exp_entry = Registry::global().find("exp");
  const std::vector<GradcheckRow> rows = gradcheck_rows(exp_entry);
  for (int i = 0; i < 200; ++i) register_op(scaled_product_entry("kept_valid_" + std::to_string(i)));
  EXPECT_EQ(&Registry::global().find("exp"), &exp_entry);
  EXPECT_EQ(rows.front().op->name, "exp");
}

TEST(GradcheckGtest, PassesOnARightFunction) {
  Generator gen(5);
  const std::vector<Tensor> inputs = {randn({3}, DType::f64, gen).requires_grad_(),
                                      randn({3}, DType::f64, gen).requires_grad_()};
  EXPECT_GRADCHECK(scaled_product, inputs);
  ASSERT_GRADGRADCHECK(scaled_product, inputs);
}

TEST(GradcheckGtest, FailsOnAWrongBackwardPrintingTheWorstElements) {
  EXPECT_NONFATAL_FAILURE(EXPECT_GRADCHECK(wrong_exp, {f64_input()}), "gradcheck of wrong_exp failed");
  EXPECT_FATAL_FAILURE(ASSERT_GRADCHECK(wrong_exp, {f64_input()}), "NOT OK");
}

TEST(GradcheckGtest, TheSecondOrderFailsOnABackwardThatIsNotDifferentiable) {
  EXPECT_GRADCHECK(detached_exp, {f64_input()});
  ::testing::TestPartResultArray failures;
  {
    const ::testing::ScopedFakeTestPartResultReporter capture(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    EXPECT_GRADGRADCHECK(detached_exp, {f64_input()});
  }
  ASSERT_EQ(failures.size(), 1);
  const std::string message = failures.GetTestPartResult(0).message();
  // x's three elements and the random grad_output's three, each by the VJP and by the JVP
  // (forward-over-reverse: the tangent the detached backward drops is caught as a wrong one), and the
  // two against each other; the worst of them as rows of the report.
  for (const char* part :
       {"gradgradcheck of detached_exp failed", "13 comparisons", "NOT OK", "analytic", "numeric", "jvp"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " in\n" << message;
}

}  // namespace
}  // namespace ag
