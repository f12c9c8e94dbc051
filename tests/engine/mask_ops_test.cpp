// masked_fill, where, triu/tril and causal_mask: forward values, broadcasting, the zero weight
// and zero gradient of masked positions, and error messages. Gradients are checked numerically
// for every registered op by gradcheck_tests.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/mask.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/ops/softmax.h"
#include "tests/test_util.h"

namespace ag {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor b8(std::initializer_list<double> values, const Shape& shape) { return tensor(values, shape, DType::b8); }

TEST(MaskOps, MaskedFillSameShape) {
  const Tensor x = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor out = masked_fill(x, b8({0, 1, 0, 1, 0, 0}, {2, 3}), -7);
  EXPECT_EQ(out.shape(), Shape({2, 3}));
  EXPECT_EQ(out.dtype(), DType::f32);
  EXPECT_EQ(out.to_vector(), std::vector<double>({1, -7, 3, -7, 5, 6}));
  EXPECT_EQ(x.to_vector(), std::vector<double>({1, 2, 3, 4, 5, 6}));  // not in place
}

TEST(MaskOps, MaskedFillBroadcastsTheMaskOverLeadingDims) {
  const Tensor x = reshape(arange(0, 24, 1, DType::f64), {2, 3, 4});
  const Tensor mask = b8({1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1}, {3, 4});  // one per row
  const Tensor out = masked_fill(x, mask, 100);
  EXPECT_EQ(out.shape(), Shape({2, 3, 4}));
  EXPECT_EQ(out.dtype(), DType::f64);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j)
        EXPECT_EQ(out.at({b, i, j}), mask.at({i, j}) ? 100.0 : x.at({b, i, j})) << b << i << j;
}

TEST(MaskOps, MaskedFillBroadcastsAMiddleSizeOneDim) {
  const Tensor x = ones({2, 3, 4});
  const Tensor mask = b8({0, 0, 1, 1, 1, 0, 0, 0}, {2, 1, 4});  // batch 0: last two columns; batch 1: first
  const Tensor out = masked_fill(x, mask, 0);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out.at({0, i, 0}), 1);
    EXPECT_EQ(out.at({0, i, 2}), 0);
    EXPECT_EQ(out.at({0, i, 3}), 0);
    EXPECT_EQ(out.at({1, i, 0}), 0);
    EXPECT_EQ(out.at({1, i, 1}), 1);
  }
}

TEST(MaskOps, MaskedFillWithAScalarMask) {
  EXPECT_EQ(masked_fill(tensor({1, 2}, {2}), b8({1}, {}), 3).to_vector(), std::vector<double>({3, 3}));
  EXPECT_EQ(masked_fill(tensor({1, 2}, {2}), b8({0}, {}), 3).to_vector(), std::vector<double>({1, 2}));
}

TEST(MaskOps, MaskedFillErrors) {
  const Tensor x = zeros({3, 4});
  expect_error(
      [&] {
        masked_fill(x, ones({3, 4}), 0);
      },
      {"masked_fill: expected a b8 (bool) mask, got f32 of shape (3,4)"});
  expect_error([&] { masked_fill(x, zeros({2, 4}, DType::b8), 0); }, {"masked_fill", "(2,4)", "(3,4)", "broadcast"});
  // The mask must broadcast TO x: a bigger mask would change the result's shape.
  expect_error([&] { masked_fill(x, zeros({2, 3, 4}, DType::b8), 0); }, {"masked_fill", "(2,3,4)", "(3,4)"});
  expect_error([&] { masked_fill(zeros({3}, DType::i64), zeros({3}, DType::b8), 0); },
               {"masked_fill", "floating", "i64"});
}

TEST(MaskOps, CausalMaskIsTrueStrictlyAboveTheDiagonal) {
  const Tensor mask = causal_mask(4);
  EXPECT_EQ(mask.shape(), Shape({4, 4}));
  EXPECT_EQ(mask.dtype(), DType::b8);
  EXPECT_EQ(mask.to_vector(), std::vector<double>({0, 1, 1, 1,  //
                                                   0, 0, 1, 1,  //
                                                   0, 0, 0, 1,  //
                                                   0, 0, 0, 0}));
  EXPECT_EQ(causal_mask(1).to_vector(), std::vector<double>({0}));
  EXPECT_EQ(causal_mask(0).shape(), Shape({0, 0}));
  expect_error([] { causal_mask(-1); }, {"causal_mask", "-1"});
}

TEST(MaskOps, CausalMaskEqualsTriuOfOnesAboveTheDiagonal) {
  // Seed 003: mask = torch.triu(torch.ones(T, T), diagonal=1).bool()
  EXPECT_EQ(causal_mask(6).to_vector(), triu(ones({6, 6}), 1).to_vector());
}

TEST(MaskOps, WhereBroadcastsAllThree) {
  const Tensor condition = b8({1, 0, 1}, {3, 1});
  const Tensor a = tensor({1, 2, 3, 4}, {1, 4});
  const Tensor b = scalar(-1);
  const Tensor out = where(condition, a, b);
  EXPECT_EQ(out.shape(), Shape({3, 4}));
  EXPECT_EQ(out.to_vector(), std::vector<double>({1, 2, 3, 4, -1, -1, -1, -1, 1, 2, 3, 4}));
}

TEST(MaskOps, WhereGradientsReduceToEachInputsShape) {
  const Tensor condition = b8({1, 0, 1}, {3, 1});
  Tensor a = tensor({1, 2, 3, 4}, {1, 4}, DType::f64).requires_grad_();
  Tensor b = scalar(-1, DType::f64).requires_grad_();
  sum(where(condition, a, b)).backward();
  ASSERT_TRUE(a.grad().defined() && b.grad().defined());
  EXPECT_EQ(a.grad().shape(), Shape({1, 4}));
  EXPECT_EQ(a.grad().to_vector(), std::vector<double>({2, 2, 2, 2}));  // two rows take a
  EXPECT_EQ(b.grad().shape(), Shape({}));
  EXPECT_EQ(b.grad().item(), 4);  // one row of four takes b
}

TEST(MaskOps, WhereErrors) {
  const Tensor x = zeros({2, 2});
  expect_error([&] { where(ones({2, 2}), x, x); }, {"where", "b8", "f32", "(2,2)"});
  expect_error(
      [&] {
        where(ones({2, 2}, DType::b8), x, zeros({2, 2}, DType::f64));
      },
      {"where", "dtypes", "f32", "f64"});
  expect_error([&] { where(ones({3}, DType::b8), x, x); }, {"where", "(3)", "(2,2)"});
}

TEST(MaskOps, TriuAndTrilOnANonSquareMatrix) {
  const Tensor x = tensor({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4});
  EXPECT_EQ(triu(x).to_vector(), std::vector<double>({1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}));
  EXPECT_EQ(triu(x, 1).to_vector(), std::vector<double>({0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12}));
  EXPECT_EQ(triu(x, -1).to_vector(), std::vector<double>({1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12}));
  EXPECT_EQ(tril(x).to_vector(), std::vector<double>({1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}));
  EXPECT_EQ(tril(x, 1).to_vector(), std::vector<double>({1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12}));
  EXPECT_EQ(tril(x, -1).to_vector(), std::vector<double>({0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}));
  EXPECT_EQ(triu(x, 4).to_vector(), std::vector<double>(12, 0));
  EXPECT_EQ(tril(x, -3).to_vector(), std::vector<double>(12, 0));
}

TEST(MaskOps, TriuAndTrilActOnEveryMatrixOfABatch) {
  const Tensor x = reshape(arange(1, 17, 1, DType::f64), {2, 2, 2, 2});
  EXPECT_EQ(triu(x).to_vector(), std::vector<double>({1, 2, 0, 4, 5, 6, 0, 8, 9, 10, 0, 12, 13, 14, 0, 16}));
  EXPECT_EQ(tril(x).to_vector(), std::vector<double>({1, 0, 3, 4, 5, 0, 7, 8, 9, 0, 11, 12, 13, 0, 15, 16}));
  // triu(x) + tril(x, -1) puts x back together.
  EXPECT_EQ(add(triu(x), tril(x, -1)).to_vector(), x.to_vector());
}

TEST(MaskOps, TrilOfABoolMatrix) {
  // Seed 003: mask_simple = torch.tril(torch.ones(T, T)), here as a b8 mask.
  const Tensor mask = tril(ones({3, 3}, DType::b8));
  EXPECT_EQ(mask.dtype(), DType::b8);
  EXPECT_EQ(mask.to_vector(), std::vector<double>({1, 0, 0, 1, 1, 0, 1, 1, 1}));
}

TEST(MaskOps, TriuTrilBackwardKeepsTheSameTriangle) {
  Tensor x = ones({3, 3}, DType::f64).requires_grad_();
  sum(triu(x, 1)).backward();
  EXPECT_EQ(x.grad().to_vector(), std::vector<double>({0, 1, 1, 0, 0, 1, 0, 0, 0}));
}

TEST(MaskOps, TriuTrilErrors) {
  expect_error([] { triu(zeros({4})); }, {"triu", "at least 2 dims", "(4)"});
  expect_error([] { tril(scalar(1)); }, {"tril", "at least 2 dims", "()"});
}

// The causal-attention property: masked (future) positions get exactly zero weight, and exactly
// zero gradient, through masked_fill(-inf) → softmax.
TEST(MaskOps, MaskedPositionsGetExactlyZeroWeightAndGradient) {
  Generator gen(3);
  Tensor scores = randn({2, 5, 5}, DType::f64, gen).requires_grad_();
  const Tensor mask = causal_mask(5);
  const Tensor weights = softmax(masked_fill(scores, mask, -kInf), -1);  // (2, 5, 5)
  const Tensor v = randn({2, 5, 5}, DType::f64, gen);
  sum(mul(weights, v)).backward();
  const Tensor& grad = scores.grad();
  ASSERT_TRUE(grad.defined());
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < 5; ++i) {
      double row_sum = 0;
      for (int64_t j = 0; j < 5; ++j) {
        row_sum += weights.at({b, i, j});
        if (j > i) {
          EXPECT_EQ(weights.at({b, i, j}), 0.0) << b << i << j;  // exactly, not approximately
          EXPECT_EQ(grad.at({b, i, j}), 0.0) << b << i << j;
        } else {
          EXPECT_GT(weights.at({b, i, j}), 0.0);
          if (i > 0) {  // row 0 has one weight, 1 whatever the score
            EXPECT_NE(grad.at({b, i, j}), 0.0);
          }
        }
      }
      EXPECT_NEAR(row_sum, 1.0, 1e-12);
    }
  }
}

TEST(MaskOps, ChangingAMaskedScoreChangesNoWeight) {
  Generator gen(4);
  const Tensor scores = randn({4, 4}, DType::f64, gen);
  const Tensor before = softmax(masked_fill(scores, causal_mask(4), -kInf), -1);
  Tensor changed = clone(scores);
  changed.set({1, 3}, 1e6);  // a future position for query 1
  const Tensor after = softmax(masked_fill(changed, causal_mask(4), -kInf), -1);
  EXPECT_EQ(before.to_vector(), after.to_vector());
}

}  // namespace
}  // namespace ag
