// The recording mode of the tape (StepRecorder) on a graph whose numbers are known by hand, and the
// summaries' bounds.
#include "engine/step_record.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/ops/arithmetic.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"

namespace ag {
namespace {

TEST(StepRecorder, RecordsForwardBackwardAndTheTwoUsesOfATensor) {
  const Tensor x = tensor({1.0, -2.0, 3.0}, {3}, DType::f64).requires_grad_();
  Tensor y, loss;
  const StepRecorder recorder;
  {
    const ScopeGuard scope("block");
    y = mul(x, x);  // x used twice by one node
  }
  loss = sum(add(y, exp(x)));  // and once more: three gradients reach x
  loss.backward();

  const Graph& graph = recorder.graph();
  ASSERT_EQ(graph.nodes.size(), 5u);  // leaf, mul, exp, add, sum
  const ForwardRecord* square = recorder.forward(*y.grad_fn());
  ASSERT_NE(square, nullptr);
  EXPECT_EQ(square->output.values, (std::vector<double>{1, 4, 9}));
  EXPECT_DOUBLE_EQ(square->output.min, 1);
  EXPECT_DOUBLE_EQ(square->output.max, 9);
  ASSERT_EQ(square->saved.size(), 2u);  // a and b of a ⊙ b: both are x
  EXPECT_EQ(square->saved[0].what, "input 0");
  EXPECT_EQ(square->saved[0].bytes, 3 * 8);
  EXPECT_TRUE(y.grad_fn()->properties.formula.starts_with("out = a ⊙ b  →"));

  // Backward: every node once, sum first, the leaf last; the mul sends x two gradients, 2·x·1 split
  // as x and x; the exp sends eˣ; .grad is their sum 2x + eˣ.
  const std::vector<BackwardRecord>& order = recorder.backward();
  ASSERT_EQ(order.size(), 5u);
  EXPECT_EQ(order.front().node, loss.grad_fn().get());
  EXPECT_TRUE(order.back().node->leaf.lock() != nullptr);
  for (const BackwardRecord& r : order) {
    if (r.node != y.grad_fn().get()) continue;
    ASSERT_EQ(r.sent.size(), 2u);
    EXPECT_EQ(r.sent[0]->values, (std::vector<double>{1, -2, 3}));
    EXPECT_EQ(r.sent[1]->values, (std::vector<double>{1, -2, 3}));
  }
  const ValueSummary* grad = recorder.leaf_grad(*order.back().node);
  ASSERT_NE(grad, nullptr);
  for (int i = 0; i < 3; ++i) {
    const double v = x.to_vector()[i];
    EXPECT_NEAR(grad->values[i], 2 * v + std::exp(v), 1e-12);
  }
  EXPECT_EQ(recorder.leaf_value(*order.back().node)->values, (std::vector<double>{1, -2, 3}));
}

TEST(StepRecorder, RecordsNothingWhenOff) {
  const Tensor x = tensor({1.0, 2.0}, {2}, DType::f64).requires_grad_();
  { const StepRecorder recorder; }
  EXPECT_EQ(forward_observer(), nullptr);
  EXPECT_EQ(backward_observer(), nullptr);
  const Tensor loss = sum(mul(x, x));
  loss.backward();  // no observer: nothing to record into
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{2, 4}));
}

TEST(ValueSummary, IsWholeUpTo64ElementsThenBounded) {
  const ValueSummary small = summarize(arange(0, 64, 1, DType::f64));
  EXPECT_TRUE(small.whole());
  EXPECT_TRUE(small.histogram.empty());
  const ValueSummary large = summarize(arange(0, 10000, 1, DType::f64));
  EXPECT_FALSE(large.whole());
  EXPECT_EQ(large.values, (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7}));
  ASSERT_EQ(large.histogram.size(), 16u);
  int64_t counted = 0;
  for (int64_t c : large.histogram) counted += c;
  EXPECT_EQ(counted, 10000);
  EXPECT_EQ(large.histogram[0], 625);  // 10000 / 16 equal bins over [0, 9999]
  EXPECT_DOUBLE_EQ(large.mean, 4999.5);
}

TEST(ValueSummary, CountsNonFiniteValuesAndKeepsThemOutOfTheStatistics) {
  const ValueSummary s = summarize(tensor({1.0, NAN, -INFINITY, 3.0}, {4}, DType::f64));
  EXPECT_EQ(s.nan_count, 1);
  EXPECT_EQ(s.inf_count, 1);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 3);
  EXPECT_DOUBLE_EQ(s.mean, 2);
}

}  // namespace
}  // namespace ag
