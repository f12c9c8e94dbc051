// Every registered op, on every one of its shape sets, against finite differences (f64): its
// gradient, and the gradient of its gradient.
#include "engine/gradcheck.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/pointwise.h"
#include "tests/test_util.h"

namespace ag {
namespace {

struct OpCase {
  const OpEntry* op;
  std::vector<Shape> shapes;
};

// What ctest and gtest print for a case: "matmul (2,3) (3,4)".
void PrintTo(const OpCase& c, std::ostream* os) {
  *os << c.op->name;
  for (const Shape& s : c.shapes) *os << " " << shape_str(s);
}

std::vector<OpCase> all_cases() {
  std::vector<OpCase> cases;
  for (const OpEntry& op : Registry::global().ops())
    for (const auto& shapes : op.shape_sets) cases.push_back({&op, shapes});
  return cases;
}

std::string case_name(const testing::TestParamInfo<OpCase>& info) {
  std::string name = info.param.op->name + "_" + std::to_string(info.index);
  for (char& ch : name)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

class RegisteredOp : public testing::TestWithParam<OpCase> {};

TEST_P(RegisteredOp, GradientMatchesFiniteDifferences) {
  const OpCase& c = GetParam();
  const GradcheckResult result = gradcheck_op(*c.op, c.shapes);
  EXPECT_TRUE(result.ok) << c.op->name << " at " << shapes_str(c.shapes) << "\n" << result.report();
  EXPECT_GT(result.checked, 0);
}

// gradgradcheck: the backward of the backward against finite differences of the backward.
// Skips exactly the ops the registry lists with the reason they have no double backward.
TEST_P(RegisteredOp, SecondOrderGradientMatchesFiniteDifferences) {
  const OpCase& c = GetParam();
  if (!c.op->no_double_backward.empty()) GTEST_SKIP() << c.op->name << ": " << c.op->no_double_backward;
  const GradcheckResult result = gradcheck_op(*c.op, c.shapes, {}, /*second_order=*/true);
  EXPECT_TRUE(result.ok) << c.op->name << " at " << shapes_str(c.shapes) << "\n" << result.report();
  EXPECT_GT(result.checked, 0);
}

TEST_P(RegisteredOp, F32ForwardAgreesWithF64) {
  const OpCase& c = GetParam();
  Generator gen(7);
  std::vector<Tensor> inputs64 = c.op->make_inputs(c.shapes, gen, DType::f64);
  std::vector<Tensor> inputs32;
  for (const Tensor& t : inputs64) inputs32.push_back(is_floating(t.dtype()) ? to(t.detach(), DType::f32) : t);
  NoGradGuard no_grad;
  const Tensor out64 = c.op->fn(inputs64);
  const Tensor out32 = c.op->fn(inputs32);
  ASSERT_EQ(out32.shape(), out64.shape());
  const std::vector<double> a = out32.to_vector(), b = out64.to_vector();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], 1e-4 + 1e-4 * std::abs(b[i])) << c.op->name << " at " << i;
}

INSTANTIATE_TEST_SUITE_P(Registry, RegisteredOp, testing::ValuesIn(all_cases()), case_name);

// Shapes from a user (the CLI's --shapes) are checked as strictly as the registry's own: the
// number of inputs, the element count (overflow included); distinct values are drawn by
// construction, so max over 20x20 (400 values 0.01 apart in [-2, 2]) returns instead of hanging.
TEST(Gradcheck, ChecksUserShapesAndDrawsDistinctValuesByConstruction) {
  const Registry& registry = Registry::global();
  expect_error(
      [&] {
        gradcheck_op(registry.find("matmul"), {{4, 5}});
      },
      {"matmul", "got 1 input shape(s)", "expected 2"});
  expect_error([&] { gradcheck_op(registry.find("matmul"), {{4, 5}}, {}, true); }, {"got 1 input shape(s)"});
  expect_error(
      [&] {
        gradcheck_op(registry.find("sum_keepdim"), {{3, 6148914691236517206}});
      },
      {"(3,6148914691236517206)", "more elements than a tensor can hold"});
  expect_error([&] { gradcheck_op(registry.find("matmul"), {{200, 200}, {200, 200}}); }, {"more than 10000 elements"});
  expect_error(
      [&] {
        gradcheck_op(registry.find("index_select"), {{}, {}});
      },
      {"index_select", "shapes () () do not have the numbers of dims", "(4,3) (6)"});
  expect_error(
      [&] {
        gradcheck_op(registry.find("embedding_backward"), {{5, 3}, {7}});
      },
      {"index_add_zeros", "has shape (5,3), expected (7,3)"});
  expect_error([&] { gradcheck_op(registry.find("max"), {{30, 30}}); }, {"cannot draw 900 values", "at most 400"});

  Generator gen(3);
  const std::vector<double> values = draw({20, 20}, {.distinct = true}, gen, DType::f64).to_vector();
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i) ASSERT_GE(sorted[i] - sorted[i - 1], 1e-2 - 1e-12) << i;
  EXPECT_GE(sorted.front(), -2.0);
  EXPECT_LE(sorted.back(), 2.0);
  EXPECT_FALSE(std::is_sorted(values.begin(), values.end()));  // shuffled, not a ramp
  const Tensor kinked = draw({50}, {.kinks = {0.0}, .distinct = true}, gen, DType::f64);
  for (double v : kinked.to_vector()) EXPECT_GE(std::abs(v), 1e-2);
  EXPECT_TRUE(gradcheck_op(registry.find("max"), {{20, 20}}).ok);
}

// A deliberately wrong backward (the gradient of x² taken as x instead of 2x) must fail, and the
// report must name the worst element.
TEST(Gradcheck, CatchesAWrongBackward) {
  auto wrong_square = [](const std::vector<Tensor>& in) {
    Tensor out = mul(in[0].detach(), in[0].detach());
    record(out, "WrongSquareBackward", {in[0]}, {in[0]}, [](const BackwardContext& c) {
      return std::vector<Tensor>{mul(c.grad, c.saved[0])};  // should be 2 * x
    });
    return out;
  };
  Tensor x = tensor({0.001, -0.002, 0.003, 5.0}, {2, 2}, DType::f64).requires_grad_();
  const GradcheckResult result = gradcheck(wrong_square, {x});
  EXPECT_FALSE(result.ok);
  ASSERT_FALSE(result.worst.empty());
  // The largest error is at x = 5 (index (1,1)): analytic v·5, numeric v·10.
  EXPECT_EQ(result.worst[0].index, "(1,1)");
  EXPECT_NEAR(result.worst[0].numeric, 2 * result.worst[0].analytic, 1e-6);
  EXPECT_NE(result.report().find("NOT OK"), std::string::npos);
}

TEST(Gradcheck, FastModeCatchesAWrongBackward) {
  auto wrong_exp = [](const std::vector<Tensor>& in) {
    Tensor out = exp(in[0].detach());
    record(out, "WrongExpBackward", {in[0]}, {}, [](const BackwardContext& c) { return std::vector<Tensor>{c.grad}; });
    return out;
  };
  Tensor x = randn({80, 80}, DType::f64).requires_grad_();
  GradcheckOptions options;
  options.max_elements_exact = 100;  // force random directions
  const GradcheckResult result = gradcheck(wrong_exp, {x}, options);
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.checked, 2 * options.directions + 1);  // the VJP and the JVP along each, then one against the other
  EXPECT_EQ(result.worst[0].index.substr(0, 1), "u");
}

TEST(Gradcheck, FastModePassesACorrectOp) {
  Tensor x = randn({80, 80}, DType::f64).requires_grad_();
  GradcheckOptions options;
  options.max_elements_exact = 100;
  const GradcheckResult result = gradcheck([](const auto& in) { return tanh(in[0]); }, {x}, options);
  EXPECT_TRUE(result.ok) << result.report();
}

}  // namespace
}  // namespace ag
