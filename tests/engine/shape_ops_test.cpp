// Shape ops: forward values against hand-computed numbers, which ops share storage and which
// copy, split/chunk piece sizes, Python slice arithmetic, and the errors on bad arguments.
// Gradients are checked for every registered op by gradcheck_tests.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "tests/test_util.h"

namespace ag {
namespace {

using Values = std::vector<double>;

// 0, 1, ..., numel-1 in the given shape.
Tensor iota(const Shape& shape, DType dtype = DType::f32) {
  return reshape(arange(0, static_cast<double>(numel(shape)), 1, dtype), shape);
}

std::vector<int64_t> sizes_along(const std::vector<Tensor>& pieces, int64_t dim) {
  std::vector<int64_t> sizes;
  for (const Tensor& p : pieces) sizes.push_back(p.size(dim));
  return sizes;
}

TEST(ShapeOps, ReshapeFamilySharesStorage) {
  Tensor x = iota({2, 3});
  const Tensor views[] = {reshape(x, {3, 2}), flatten(x), unsqueeze(x, 1), squeeze(unsqueeze(x, 0)), reshape(x, {-1})};
  for (const Tensor& v : views) EXPECT_EQ(v.raw_data(), x.raw_data()) << shape_str(v.shape());
  Tensor u = unsqueeze(x, -1);
  EXPECT_EQ(u.shape(), (Shape{2, 3, 1}));
  u.set({1, 2, 0}, 42);  // a write through the view is seen by x, and bumps the shared version
  EXPECT_EQ(x.at({1, 2}), 42);
  EXPECT_EQ(x.version(), u.version());
}

TEST(ShapeOps, CopyingOpsDoNotShareStorage) {
  Tensor x = iota({2, 3});
  const Tensor copies[] = {transpose(x, 0, 1), permute(x, {1, 0}), cat({x}, 0),       stack({x}, 0),
                           slice(x, 1, 0, 3),  narrow(x, 0, 0, 2), split(x, 1, 0)[0], chunk(x, 1, 1)[0]};
  for (const Tensor& c : copies) EXPECT_NE(c.raw_data(), x.raw_data()) << shape_str(c.shape());
}

TEST(ShapeOps, TransposeValues) {
  Tensor x = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t = transpose(x, 0, 1);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.to_vector(), (Values{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(transpose(x, -1, -2).to_vector(), t.to_vector());
  EXPECT_EQ(transpose(t, 0, 1).to_vector(), x.to_vector());

  // 3-D, swapping the outer and inner dims: out[k][j][i] = x[i][j][k] = 12i + 4j + k.
  Tensor y = transpose(iota({2, 3, 4}, DType::f64), 0, 2);
  EXPECT_EQ(y.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(y.at({0, 0, 1}), 12);
  EXPECT_EQ(y.at({3, 1, 0}), 7);
  EXPECT_EQ(y.at({2, 2, 1}), 22);
  EXPECT_EQ(y.dtype(), DType::f64);
}

TEST(ShapeOps, TransposeOfIntegersAndMasks) {
  Tensor i = tensor({1, 2, 3, 4, 5, 6}, {3, 2}, DType::i64);
  EXPECT_EQ(transpose(i, 0, 1).to_vector(), (Values{1, 3, 5, 2, 4, 6}));
  EXPECT_EQ(transpose(i, 0, 1).dtype(), DType::i64);
  Tensor m = tensor({1, 0, 0, 1, 1, 0}, {2, 3}, DType::b8);
  EXPECT_EQ(transpose(m, 0, 1).to_vector(), (Values{1, 1, 0, 1, 0, 0}));
}

TEST(ShapeOps, TransposeOfSizeOneAndSameDims) {
  Tensor x = iota({1, 4});
  EXPECT_EQ(transpose(x, 0, 1).shape(), (Shape{4, 1}));
  EXPECT_EQ(transpose(x, 0, 1).to_vector(), (Values{0, 1, 2, 3}));
  EXPECT_EQ(transpose(x, 1, -1).to_vector(), x.to_vector());
}

TEST(ShapeOps, PermuteValues) {
  Tensor x = iota({2, 3, 4});
  Tensor p = permute(x, {2, 0, 1});  // out[k][i][j] = x[i][j][k]
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(p.at({k, i, j}), x.at({i, j, k}));
  EXPECT_EQ(p.at({1, 0, 2}), 9);
  EXPECT_EQ(p.at({3, 1, 0}), 15);
  EXPECT_EQ(permute(x, {-1, 0, 1}).to_vector(), p.to_vector());
  // The inverse permutation brings it back.
  EXPECT_EQ(permute(p, {1, 2, 0}).to_vector(), x.to_vector());
  // Keeping the last dim in place (the contiguous-row path).
  Tensor q = permute(x, {1, 0, 2});
  EXPECT_EQ(q.shape(), (Shape{3, 2, 4}));
  EXPECT_EQ(q.at({2, 1, 3}), 23);
  EXPECT_EQ(q.at({1, 0, 2}), 6);
}

// Big enough for the copy kernel to run in parallel: every element must land where the serial
// formula puts it.
TEST(ShapeOps, LargeCopiesMatchTheIndexFormula) {
  Tensor x = iota({3, 200, 170}, DType::f64);
  Tensor t = transpose(x, 0, 2);  // (170, 200, 3)
  const double* pt = t.data<double>();
  for (int64_t k = 0; k < 170; ++k)
    for (int64_t j = 0; j < 200; ++j)
      for (int64_t i = 0; i < 3; ++i) ASSERT_EQ(pt[(k * 200 + j) * 3 + i], (i * 200 + j) * 170 + k);
  Tensor c = cat({x, x}, 1);  // (3, 400, 170)
  EXPECT_EQ(c.at({2, 399, 169}), x.at({2, 199, 169}));
  EXPECT_EQ(c.at({1, 200, 5}), x.at({1, 0, 5}));
  Tensor s = slice(x, 1, 1, 200, 3);  // (3, 67, 170)
  EXPECT_EQ(s.shape(), (Shape{3, 67, 170}));
  EXPECT_EQ(s.at({2, 66, 7}), x.at({2, 199, 7}));
}

TEST(ShapeOps, PermuteErrors) {
  Tensor x = iota({2, 3, 4});
  EXPECT_THROW(permute(x, {0, 1}), Error);
  const std::string count = error_of([&] { permute(x, {0, 1}); });
  EXPECT_NE(count.find("permute"), std::string::npos) << count;
  EXPECT_NE(count.find("2 dims"), std::string::npos) << count;
  EXPECT_NE(count.find("(2,3,4)"), std::string::npos) << count;
  const std::string twice = error_of([&] { permute(x, {0, 2, -1}); });
  EXPECT_NE(twice.find("dim 2 appears twice"), std::string::npos) << twice;
  const std::string range = error_of([&] { permute(x, {0, 1, 3}); });
  EXPECT_NE(range.find("out of range"), std::string::npos) << range;
  const std::string transposed = error_of([&] { transpose(x, 0, 3); });
  EXPECT_NE(transposed.find("transpose: dim 3 is out of range"), std::string::npos) << transposed;
}

TEST(ShapeOps, CatValues) {
  Tensor a = tensor({1, 2, 3, 4}, {2, 2});
  Tensor b = tensor({5, 6}, {1, 2});
  Tensor rows = cat({a, b}, 0);
  EXPECT_EQ(rows.shape(), (Shape{3, 2}));
  EXPECT_EQ(rows.to_vector(), (Values{1, 2, 3, 4, 5, 6}));

  Tensor c = tensor({10, 20}, {2, 1});
  Tensor cols = cat({a, c, a}, -1);
  EXPECT_EQ(cols.shape(), (Shape{2, 5}));
  EXPECT_EQ(cols.to_vector(), (Values{1, 2, 10, 1, 2, 3, 4, 20, 3, 4}));

  // 3-D along the middle dim: (2,1,2) and (2,2,2) → (2,3,2).
  Tensor d = tensor({1, 2, 3, 4}, {2, 1, 2});
  Tensor e = tensor({5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 2});
  Tensor mid = cat({d, e}, 1);
  EXPECT_EQ(mid.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(mid.to_vector(), (Values{1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12}));

  // Empty pieces add nothing; a single tensor is copied as it is.
  EXPECT_EQ(cat({a, zeros({0, 2})}, 0).to_vector(), a.to_vector());
  EXPECT_EQ(cat({b}, 1).to_vector(), b.to_vector());
  EXPECT_EQ(cat({tensor({1, 2}, {2}, DType::i64), tensor({3}, {1}, DType::i64)}, 0).to_vector(), (Values{1, 2, 3}));
}

TEST(ShapeOps, CatErrors) {
  Tensor a = zeros({2, 2});
  Tensor b = zeros({2, 3});
  EXPECT_THROW(cat({a, b}, 0), Error);
  const std::string sizes = error_of([&] { cat({a, b}, 0); });
  EXPECT_NE(sizes.find("cat: tensor 1 has shape (2,3), but tensor 0 has shape (2,2)"), std::string::npos) << sizes;
  EXPECT_NE(sizes.find("except in dim 0"), std::string::npos) << sizes;
  EXPECT_NE(error_of([&] { cat({a, zeros({2})}, 0); }).find("tensor 1 has shape (2)"), std::string::npos);
  EXPECT_NE(error_of([&] { cat({}, 0); }).find("non-empty"), std::string::npos);
  const std::string dtypes = error_of([&] { cat({a, zeros({2, 2}, DType::f64)}, 0); });
  EXPECT_NE(dtypes.find("f64"), std::string::npos) << dtypes;
  EXPECT_NE(dtypes.find("dtypes must match"), std::string::npos) << dtypes;
  EXPECT_NE(error_of([&] { cat({scalar(1), scalar(2)}, 0); }).find("0-d"), std::string::npos);
  EXPECT_NE(error_of([&] { cat({a, a}, 2); }).find("out of range"), std::string::npos);
}

TEST(ShapeOps, StackValues) {
  Tensor a = tensor({1, 2, 3}, {3});
  Tensor b = tensor({4, 5, 6}, {3});
  Tensor s0 = stack({a, b}, 0);
  EXPECT_EQ(s0.shape(), (Shape{2, 3}));
  EXPECT_EQ(s0.to_vector(), (Values{1, 2, 3, 4, 5, 6}));
  Tensor s1 = stack({a, b}, 1);
  EXPECT_EQ(s1.shape(), (Shape{3, 2}));
  EXPECT_EQ(s1.to_vector(), (Values{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(stack({a, b}, -1).to_vector(), s1.to_vector());

  // (2,2) pieces stacked in the middle: out[i][k][j] = t_k[i][j].
  Tensor c = tensor({1, 2, 3, 4}, {2, 2});
  Tensor d = tensor({5, 6, 7, 8}, {2, 2});
  Tensor e = tensor({9, 10, 11, 12}, {2, 2});
  Tensor m = stack({c, d, e}, 1);
  EXPECT_EQ(m.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(m.to_vector(), (Values{1, 2, 5, 6, 9, 10, 3, 4, 7, 8, 11, 12}));

  Tensor scalars = stack({scalar(7), scalar(8)}, 0);
  EXPECT_EQ(scalars.shape(), (Shape{2}));
  EXPECT_EQ(scalars.to_vector(), (Values{7, 8}));
}

TEST(ShapeOps, StackErrors) {
  const std::string shapes = error_of([] { stack({zeros({2, 3}), zeros({3, 2})}, 0); });
  EXPECT_NE(shapes.find("stack: tensor 1 has shape (3,2), but tensor 0 has shape (2,3)"), std::string::npos) << shapes;
  EXPECT_NE(error_of([] { stack({}, 0); }).find("non-empty"), std::string::npos);
  EXPECT_NE(error_of([] { stack({zeros({2}), zeros({2})}, 2); }).find("out of range"), std::string::npos);
}

TEST(ShapeOps, SplitPieceSizes) {
  Tensor x = iota({7, 2});
  std::vector<Tensor> pieces = split(x, 3, 0);
  EXPECT_EQ(sizes_along(pieces, 0), (std::vector<int64_t>{3, 3, 1}));
  EXPECT_EQ(pieces[1].to_vector(), (Values{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(pieces[2].to_vector(), (Values{12, 13}));
  EXPECT_EQ(pieces[2].shape(), (Shape{1, 2}));

  EXPECT_EQ(sizes_along(split(x, 7, 0), 0), (std::vector<int64_t>{7}));
  EXPECT_EQ(sizes_along(split(x, 100, 0), 0), (std::vector<int64_t>{7}));
  EXPECT_EQ(sizes_along(split(x, 1, -1), 1), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(split(x, 1, -1)[1].to_vector(), (Values{1, 3, 5, 7, 9, 11, 13}));

  Tensor y = iota({2, 5, 3});
  std::vector<Tensor> mid = split(y, 2, 1);
  EXPECT_EQ(sizes_along(mid, 1), (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(mid[2].shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(mid[2].to_vector(), (Values{12, 13, 14, 27, 28, 29}));
}

TEST(ShapeOps, ChunkPieceSizes) {
  Tensor x = iota({7});
  EXPECT_EQ(sizes_along(chunk(x, 3, 0), 0), (std::vector<int64_t>{3, 3, 1}));
  EXPECT_EQ(chunk(x, 3, 0)[2].to_vector(), (Values{6}));
  // As in PyTorch: pieces of ceil(6/4) = 2, so only 3 chunks.
  EXPECT_EQ(sizes_along(chunk(iota({6}), 4, 0), 0), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(sizes_along(chunk(iota({6}), 3, 0), 0), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(sizes_along(chunk(iota({2}), 5, 0), 0), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(sizes_along(chunk(iota({1, 3}), 3, 0), 0), (std::vector<int64_t>{1}));
  std::vector<Tensor> heads = chunk(iota({2, 6}), 2, -1);  // like splitting attention heads
  EXPECT_EQ(heads.size(), 2u);
  EXPECT_EQ(heads[1].to_vector(), (Values{3, 4, 5, 9, 10, 11}));
}

TEST(ShapeOps, SplitAndChunkErrors) {
  Tensor x = iota({4, 2});
  EXPECT_THROW(split(x, 0, 0), Error);
  EXPECT_NE(error_of([&] { split(x, 0, 0); }).find("split: expected split_size >= 1, got 0"), std::string::npos);
  EXPECT_NE(error_of([&] { chunk(x, 0, 0); }).find("chunk: expected chunks >= 1, got 0"), std::string::npos);
  EXPECT_NE(error_of([&] { split(x, 1, 2); }).find("split: dim 2 is out of range"), std::string::npos);
  EXPECT_NE(error_of([] { split(scalar(1), 1, 0); }).find("0-d"), std::string::npos);
}

TEST(ShapeOps, SliceFollowsPythonArithmetic) {
  Tensor x = iota({10});
  EXPECT_EQ(slice(x, 0, 2, 5).to_vector(), (Values{2, 3, 4}));                  // x[2:5]
  EXPECT_EQ(slice(x, 0, -4, 100, 2).to_vector(), (Values{6, 8}));               // x[-4::2]
  EXPECT_EQ(slice(x, 0, 1, -1).to_vector(), (Values{1, 2, 3, 4, 5, 6, 7, 8}));  // x[1:-1]
  EXPECT_EQ(slice(x, 0, -100, 3).to_vector(), (Values{0, 1, 2}));               // x[-100:3]
  EXPECT_EQ(slice(x, 0, 0, 10, 3).to_vector(), (Values{0, 3, 6, 9}));           // x[::3]
  EXPECT_EQ(slice(x, 0, 1, 10, 4).to_vector(), (Values{1, 5, 9}));              // x[1::4]
  EXPECT_EQ(slice(x, 0, 5, 2).shape(), (Shape{0}));                             // x[5:2] is empty
  EXPECT_EQ(slice(x, 0, 12, 20).shape(), (Shape{0}));                           // past the end
  EXPECT_EQ(slice(x, 0, -3, -1).to_vector(), (Values{7, 8}));                   // x[-3:-1]
}

TEST(ShapeOps, SliceAlongInnerDims) {
  Tensor x = iota({2, 3, 4});
  Tensor s = slice(x, 2, 1, 4, 2);  // x[:, :, 1::2]
  EXPECT_EQ(s.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(s.to_vector(), (Values{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}));
  Tensor m = slice(x, -2, -1, 3);  // x[:, -1:, :]
  EXPECT_EQ(m.shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(m.to_vector(), (Values{8, 9, 10, 11, 20, 21, 22, 23}));
}

TEST(ShapeOps, SliceErrors) {
  Tensor x = iota({3, 4});
  EXPECT_THROW(slice(x, 1, 0, 4, 0), Error);
  const std::string step = error_of([&] { slice(x, 1, 0, 4, 0); });
  EXPECT_NE(step.find("slice: expected step >= 1, got 0"), std::string::npos) << step;
  EXPECT_NE(step.find("(3,4)"), std::string::npos) << step;
  EXPECT_NE(error_of([&] { slice(x, 0, 0, 3, -1); }).find("step >= 1, got -1"), std::string::npos);
  EXPECT_NE(error_of([&] { slice(x, 2, 0, 1); }).find("slice: dim 2 is out of range"), std::string::npos);
  EXPECT_NE(error_of([] { slice(scalar(1), 0, 0, 1); }).find("0-d"), std::string::npos);
}

TEST(ShapeOps, NarrowValues) {
  Tensor x = iota({3, 4});
  Tensor n = narrow(x, 1, 1, 2);
  EXPECT_EQ(n.shape(), (Shape{3, 2}));
  EXPECT_EQ(n.to_vector(), (Values{1, 2, 5, 6, 9, 10}));
  EXPECT_EQ(narrow(x, 1, -2, 2).to_vector(), (Values{2, 3, 6, 7, 10, 11}));  // start counts from the end
  EXPECT_EQ(narrow(x, 0, 2, 1).to_vector(), (Values{8, 9, 10, 11}));
  EXPECT_EQ(narrow(x, 0, 3, 0).shape(), (Shape{0, 4}));
}

TEST(ShapeOps, NarrowErrors) {
  Tensor x = iota({3, 4});
  EXPECT_THROW(narrow(x, 1, 3, 2), Error);
  const std::string past = error_of([&] { narrow(x, 1, 3, 2); });
  EXPECT_NE(past.find("narrow: start 3 + length 2 exceeds dim 1 of size 4"), std::string::npos) << past;
  EXPECT_NE(past.find("(3,4)"), std::string::npos) << past;
  EXPECT_NE(error_of([&] { narrow(x, 0, -4, 1); }).find("start -4 is out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { narrow(x, 0, 0, -1); }).find("length -1"), std::string::npos);
}

// Gradients are routed to the right places (exact values; gradcheck_tests covers the rest).
TEST(ShapeOps, CatAndStackRouteGradientsToTheirInputs) {
  Tensor a = tensor({1, 2}, {1, 2}).requires_grad_();
  Tensor b = tensor({3, 4, 5, 6}, {2, 2}).requires_grad_();
  cat({a, b}, 0).backward(tensor({10, 20, 30, 40, 50, 60}, {3, 2}));
  EXPECT_EQ(a.grad().to_vector(), (Values{10, 20}));
  EXPECT_EQ(b.grad().to_vector(), (Values{30, 40, 50, 60}));

  Tensor c = tensor({1, 2}, {2}).requires_grad_();
  Tensor d = tensor({3, 4}, {2});  // needs no gradient
  stack({c, d, c}, 1).backward(tensor({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_EQ(c.grad().to_vector(), (Values{1 + 3, 4 + 6}));  // c is used twice: gradients sum
  EXPECT_FALSE(d.grad().defined());
}

// slice's backward is an op of its own, so a gradient of a gradient flows through it.
TEST(ShapeOps, SliceDoubleBackward) {
  Tensor x = iota({5}, DType::f64).requires_grad_();
  Tensor g = tensor({1, 2}, {2}, DType::f64).requires_grad_();
  Tensor y = slice(x, 0, 1, 5, 2);  // x[1::2] = {x1, x3}
  EXPECT_EQ(y.grad_fn()->name, "SliceBackward");
  y.backward(g, false, true);
  EXPECT_EQ(x.grad().to_vector(), (Values{0, 1, 0, 2, 0}));
  ASSERT_TRUE(x.grad().requires_grad());
  // d/dg Σ w ⊙ x.grad = w[1::2]
  sum(mul(x.grad(), tensor({10, 20, 30, 40, 50}, {5}, DType::f64))).backward();
  EXPECT_EQ(g.grad().to_vector(), (Values{20, 40}));
}

TEST(ShapeOps, NodesAreNamed) {
  Tensor x = iota({2, 3}).requires_grad_();
  EXPECT_EQ(transpose(x, 0, 1).grad_fn()->name, "TransposeBackward");
  EXPECT_EQ(permute(x, {1, 0}).grad_fn()->name, "PermuteBackward");
  EXPECT_EQ(cat({x, x}, 0).grad_fn()->name, "CatBackward");
  EXPECT_EQ(stack({x, x}, 0).grad_fn()->name, "StackBackward");
  EXPECT_EQ(narrow(x, 1, 0, 2).grad_fn()->name, "SliceBackward");
  EXPECT_EQ(split(x, 2, 1)[1].grad_fn()->name, "SliceBackward");
  NoGradGuard no_grad;
  EXPECT_EQ(transpose(x, 0, 1).grad_fn(), nullptr);
}

}  // namespace
}  // namespace ag
