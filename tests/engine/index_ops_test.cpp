// index_select and embedding: forward values against hand-computed numbers, gradients that
// accumulate over repeated indices, the padding row's exactly-zero gradient, double backward,
// and the errors on bad indices. Gradients are checked for every registered op by
// gradcheck_tests.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/index.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "tests/test_util.h"

namespace ag {
namespace {

using Values = std::vector<double>;

Tensor indices(std::initializer_list<double> values, const Shape& shape) { return tensor(values, shape, DType::i64); }

TEST(IndexOps, IndexSelectRows) {
  Tensor x = tensor({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor out = index_select(x, 0, indices({2, 0, 2}, {3}));
  EXPECT_EQ(out.shape(), (Shape{3, 2}));
  EXPECT_EQ(out.to_vector(), (Values{5, 6, 1, 2, 5, 6}));
  EXPECT_EQ(index_select(x, 0, indices({}, {0})).shape(), (Shape{0, 2}));
}

TEST(IndexOps, IndexSelectColumnsAndInnerDims) {
  Tensor x = tensor({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor cols = index_select(x, 1, indices({1, 1, 0}, {3}));
  EXPECT_EQ(cols.shape(), (Shape{3, 3}));
  EXPECT_EQ(cols.to_vector(), (Values{2, 2, 1, 4, 4, 3, 6, 6, 5}));
  EXPECT_EQ(index_select(x, -1, indices({1, 1, 0}, {3})).to_vector(), cols.to_vector());

  // (2,3,2) along the middle dim: out[i][k][j] = x[i][index[k]][j] = 6i + 2·index[k] + j.
  Tensor y = reshape(arange(0, 12, 1, DType::f64), {2, 3, 2});
  Tensor mid = index_select(y, 1, indices({2, 0}, {2}));
  EXPECT_EQ(mid.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(mid.to_vector(), (Values{4, 5, 0, 1, 10, 11, 6, 7}));
  EXPECT_EQ(mid.dtype(), DType::f64);
}

TEST(IndexOps, IndexSelectOfIntegers) {
  Tensor x = tensor({7, 8, 9}, {3}, DType::i64);
  Tensor out = index_select(x, 0, indices({2, 2, 1}, {3}));
  EXPECT_EQ(out.dtype(), DType::i64);
  EXPECT_EQ(out.to_vector(), (Values{9, 9, 8}));
}

TEST(IndexOps, IndexSelectGradientAccumulatesOverRepeats) {
  Tensor x = tensor({1, 2, 3, 4, 5, 6}, {3, 2}).requires_grad_();
  Tensor out = index_select(x, 0, indices({2, 0, 2}, {3}));
  EXPECT_EQ(out.grad_fn()->name, "IndexSelectBackward");
  out.backward(tensor({1, 2, 10, 20, 100, 200}, {3, 2}));
  EXPECT_EQ(x.grad().to_vector(), (Values{10, 20, 0, 0, 101, 202}));  // row 1 never selected
}

TEST(IndexOps, IndexSelectDoubleBackward) {
  Tensor x = tensor({1, 2, 3}, {3}, DType::f64).requires_grad_();
  Tensor g = tensor({1, 2, 3, 4}, {4}, DType::f64).requires_grad_();
  index_select(x, 0, indices({2, 0, 2, 2}, {4})).backward(g, false, true);
  EXPECT_EQ(x.grad().to_vector(), (Values{2, 0, 1 + 3 + 4}));
  ASSERT_TRUE(x.grad().requires_grad());
  EXPECT_EQ(x.grad().grad_fn()->name, "IndexAddBackward");
  // d/dg Σ w ⊙ x.grad = w[index]
  sum(mul(x.grad(), tensor({10, 20, 30}, {3}, DType::f64))).backward();
  EXPECT_EQ(g.grad().to_vector(), (Values{30, 10, 30, 30}));
}

TEST(IndexOps, IndexSelectErrors) {
  Tensor x = zeros({3, 2});
  EXPECT_THROW(index_select(x, 0, indices({0, 3}, {2})), Error);
  const std::string range = error_of([&] { index_select(x, 0, indices({0, 1, 3}, {3})); });
  EXPECT_NE(range.find("index_select: index 3 at position (2)"), std::string::npos) << range;
  EXPECT_NE(range.find("dim 0 of size 3"), std::string::npos) << range;
  EXPECT_NE(range.find("(3,2)"), std::string::npos) << range;
  EXPECT_NE(range.find("[0, 3)"), std::string::npos) << range;
  const std::string negative = error_of([&] { index_select(x, 1, indices({-1}, {1})); });
  EXPECT_NE(negative.find("index -1 at position (0)"), std::string::npos) << negative;
  EXPECT_NE(negative.find("[0, 2)"), std::string::npos) << negative;

  const std::string dtype = error_of([&] { index_select(x, 0, tensor({0, 1}, {2})); });
  EXPECT_NE(dtype.find("index_select: expected i64 indices, got f32"), std::string::npos) << dtype;
  const std::string rank = error_of([&] { index_select(x, 0, indices({0, 1}, {1, 2})); });
  EXPECT_NE(rank.find("expected a 1-D index, got shape (1,2)"), std::string::npos) << rank;
  EXPECT_NE(error_of([&] { index_select(x, 2, indices({0}, {1})); }).find("dim 2 is out of range"), std::string::npos);
  EXPECT_NE(error_of([] { index_select(scalar(1), 0, indices({0}, {1})); }).find("0-d"), std::string::npos);
}

TEST(EmbeddingOps, GathersRowsIntoIndicesShape) {
  Tensor weight = tensor({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2});
  Tensor out = embedding(weight, indices({3, 0, 1, 3}, {2, 2}));
  EXPECT_EQ(out.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(out.to_vector(), (Values{30, 31, 0, 1, 10, 11, 30, 31}));
  Tensor one = embedding(weight, indices({2}, {}));  // a 0-d index gives one row
  EXPECT_EQ(one.shape(), (Shape{2}));
  EXPECT_EQ(one.to_vector(), (Values{20, 21}));
  EXPECT_EQ(embedding(weight, indices({1, 2}, {2, 1})).shape(), (Shape{2, 1, 2}));
}

TEST(EmbeddingOps, PaddingRowIsReadAsItIs) {
  // As in PyTorch: the padding row's values come through (nn::Embedding keeps them at zero);
  // only its gradient is withheld.
  Tensor weight = tensor({5, 6, 7, 8}, {2, 2});
  EXPECT_EQ(embedding(weight, indices({0, 1}, {2}), 0).to_vector(), (Values{5, 6, 7, 8}));
}

TEST(EmbeddingOps, RepeatedIndicesAccumulateAndPaddingGetsExactlyZero) {
  Tensor weight = tensor({0.5, -1, 2, 3, 4, 5, 6, 7, 8, 9}, {5, 2}).requires_grad_();
  Tensor ids = indices({1, 0, 1, 2, 0, 1}, {2, 3});  // padding index 0 appears twice, 1 three times
  Tensor out = embedding(weight, ids, 0);
  EXPECT_EQ(out.grad_fn()->name, "EmbeddingBackward");
  out.backward(tensor({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2}));
  const Tensor& grad = weight.grad();
  ASSERT_EQ(grad.shape(), (Shape{5, 2}));
  EXPECT_EQ(grad.at({0, 0}), 0.0);  // padding: exactly zero, though used twice
  EXPECT_EQ(grad.at({0, 1}), 0.0);
  EXPECT_EQ(grad.at({1, 0}), 1 + 5 + 11);  // positions 0, 2 and 5
  EXPECT_EQ(grad.at({1, 1}), 2 + 6 + 12);
  EXPECT_EQ(grad.at({2, 0}), 7);
  EXPECT_EQ(grad.at({2, 1}), 8);
  EXPECT_EQ(grad.to_vector(), (Values{0, 0, 17, 20, 7, 8, 0, 0, 0, 0}));  // rows 3, 4 unused
}

TEST(EmbeddingOps, WithoutPaddingEveryRowGetsItsGradient) {
  Tensor weight = zeros({3, 2}).requires_grad_();
  embedding(weight, indices({0, 0, 2}, {3})).backward(ones({3, 2}));
  EXPECT_EQ(weight.grad().to_vector(), (Values{2, 2, 0, 0, 1, 1}));
}

// Rows wider than the scatter kernel's column block (256), and enough work to run in parallel.
TEST(EmbeddingOps, WideRowsAccumulateInEveryColumnBlock) {
  const int64_t width = 600;
  Tensor weight = zeros({4, width}).requires_grad_();
  std::vector<double> ids;
  for (int64_t p = 0; p < 200; ++p) ids.push_back(static_cast<double>(p % 3));  // rows 0, 1, 2; 67/67/66 times
  Tensor out = embedding(weight, tensor(ids, {200}, DType::i64), 2);
  out.backward(ones({200, width}));
  const std::vector<double> grad = weight.grad().to_vector();
  for (int64_t j = 0; j < width; ++j) {
    ASSERT_EQ(grad[0 * width + j], 67) << j;
    ASSERT_EQ(grad[1 * width + j], 67) << j;
    ASSERT_EQ(grad[2 * width + j], 0) << j;  // padding
    ASSERT_EQ(grad[3 * width + j], 0) << j;
  }
}

TEST(EmbeddingOps, DoubleBackwardKeepsThePaddingRule) {
  Tensor weight = zeros({3, 2}, DType::f64).requires_grad_();
  Tensor g = tensor({1, 2, 3, 4, 5, 6}, {3, 2}, DType::f64).requires_grad_();
  embedding(weight, indices({2, 1, 2}, {3}), 1).backward(g, false, true);
  EXPECT_EQ(weight.grad().to_vector(), (Values{0, 0, 0, 0, 6, 8}));
  // d/dg Σ w ⊙ weight.grad = w[ids], and zero where the index is the padding index.
  sum(mul(weight.grad(), tensor({1, 2, 3, 4, 5, 6}, {3, 2}, DType::f64))).backward();
  EXPECT_EQ(g.grad().to_vector(), (Values{5, 6, 0, 0, 5, 6}));
}

TEST(EmbeddingOps, Errors) {
  Tensor weight = zeros({4, 3});
  EXPECT_THROW(embedding(weight, indices({0, 4}, {2})), Error);
  const std::string range = error_of([&] { embedding(weight, indices({0, 1, 2, 7}, {2, 2})); });
  EXPECT_NE(range.find("embedding: index 7 at position (1,1)"), std::string::npos) << range;
  EXPECT_NE(range.find("(4,3)"), std::string::npos) << range;
  EXPECT_NE(range.find("[0, 4)"), std::string::npos) << range;
  EXPECT_NE(error_of([&] { embedding(weight, indices({-2}, {1})); }).find("index -2 at position (0)"),
            std::string::npos);

  const std::string dtype = error_of([&] { embedding(weight, tensor({0, 1}, {2})); });
  EXPECT_NE(dtype.find("embedding: expected i64 indices, got f32"), std::string::npos) << dtype;
  const std::string rank = error_of([] { embedding(zeros({4}), indices({0}, {1})); });
  EXPECT_NE(rank.find("embedding: expected a 2-D weight"), std::string::npos) << rank;
  EXPECT_NE(rank.find("got shape (4)"), std::string::npos) << rank;
  const std::string pad = error_of([&] { embedding(weight, indices({0}, {1}), 4); });
  EXPECT_NE(pad.find("embedding: padding_idx 4 is out of range"), std::string::npos) << pad;
  const std::string floating = error_of([] { embedding(zeros({2, 2}, DType::i64), indices({0}, {1})); });
  EXPECT_NE(floating.find("expected a floating weight"), std::string::npos) << floating;
}

}  // namespace
}  // namespace ag
