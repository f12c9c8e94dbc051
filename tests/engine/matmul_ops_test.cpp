// matmul: hand-computed products, seed 003's attention scores, 1-D promotion, broadcast batch
// dims, the four transpose-flag combinations against a naive reference, the parallel path,
// gradient shapes, and error messages. Gradients are checked numerically for every registered
// op by gradcheck_tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/kernels/bf16.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/dropout.h"
#include "engine/ops/matmul.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/threads.h"
#include "tests/test_util.h"

namespace ag {
namespace {

// Naive reference for 3-D operands with equal batch: out[b] = op(a[b]) @ op(b[b]), written
// directly from the definition with the transposes resolved by index arithmetic.
std::vector<double> naive_batched(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const std::vector<double> va = a.to_vector(), vb = b.to_vector();
  const int64_t batch = a.size(0);
  const int64_t ra = a.size(1), ca = a.size(2), rb = b.size(1), cb = b.size(2);
  const int64_t m = ta ? ca : ra, k = ta ? ra : ca, n = tb ? rb : cb;
  std::vector<double> out(batch * m * n, 0.0);
  for (int64_t s = 0; s < batch; ++s)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double x = ta ? va[s * ra * ca + p * ca + i] : va[s * ra * ca + i * ca + p];
          const double y = tb ? vb[s * rb * cb + j * cb + p] : vb[s * rb * cb + p * cb + j];
          acc += x * y;
        }
        out[s * m * n + i * n + j] = acc;
      }
  return out;
}

TEST(MatmulOps, TwoByThreeTimesThreeByTwo) {
  const Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = tensor({7, 8, 9, 10, 11, 12}, {3, 2});
  const Tensor out = matmul(a, b);
  EXPECT_EQ(out.shape(), Shape({2, 2}));
  EXPECT_EQ(out.to_vector(), std::vector<double>({58, 64, 139, 154}));
}

TEST(MatmulOps, TransposeFlagsReadTheStoredOperandSwapped) {
  const Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor a_t = tensor({1, 4, 2, 5, 3, 6}, {3, 2});  // aᵀ stored
  const Tensor b = tensor({7, 8, 9, 10, 11, 12}, {3, 2});
  const Tensor b_t = tensor({7, 9, 11, 8, 10, 12}, {2, 3});  // bᵀ stored
  const std::vector<double> expected = {58, 64, 139, 154};
  EXPECT_EQ(matmul(a_t, b, true, false).to_vector(), expected);
  EXPECT_EQ(matmul(a, b_t, false, true).to_vector(), expected);
  EXPECT_EQ(matmul(a_t, b_t, true, true).to_vector(), expected);
  EXPECT_EQ(matmul(a_t, b_t, true, true).shape(), Shape({2, 2}));
  // aᵀ @ aᵀᵀ: (3,2) stored read as (2,3)... and (3,3) = aᵀ @ a
  EXPECT_EQ(matmul(a, a, true, false).to_vector(), std::vector<double>({17, 22, 27, 22, 29, 36, 27, 36, 45}));
}

TEST(MatmulOps, VectorOperandsArePromotedAndTheAddedDimRemoved) {
  const Tensor v = tensor({1, 2, 3}, {3});
  const Tensor w = tensor({4, 5, 6}, {3});
  const Tensor dot = matmul(v, w);
  EXPECT_EQ(dot.shape(), Shape({}));
  EXPECT_EQ(dot.item(), 32);

  const Tensor m = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor row = matmul(tensor({1, 2}, {2}), m);  // (2) @ (2,3) → (3)
  EXPECT_EQ(row.shape(), Shape({3}));
  EXPECT_EQ(row.to_vector(), std::vector<double>({9, 12, 15}));

  const Tensor column = matmul(m, tensor({1, 0, -1}, {3}));  // (2,3) @ (3) → (2)
  EXPECT_EQ(column.shape(), Shape({2}));
  EXPECT_EQ(column.to_vector(), std::vector<double>({-2, -2}));

  // A vector is its own transpose: the flag of a 1-D operand changes nothing.
  EXPECT_EQ(matmul(v, w, true, true).item(), 32);
  // (3) @ (2,3)ᵀ → (2)
  EXPECT_EQ(matmul(v, m, false, true).to_vector(), std::vector<double>({14, 32}));

  // A batched matrix times a vector, and a vector times a batch of matrices.
  const Tensor batch = reshape(arange(0, 12), {2, 2, 3});
  EXPECT_EQ(matmul(batch, tensor({1, 1, 1}, {3})).shape(), Shape({2, 2}));
  EXPECT_EQ(matmul(batch, tensor({1, 1, 1}, {3})).to_vector(), std::vector<double>({3, 12, 21, 30}));
  EXPECT_EQ(matmul(tensor({1, -1}, {2}), batch).shape(), Shape({2, 3}));
  EXPECT_EQ(matmul(tensor({1, -1}, {2}), batch).to_vector(), std::vector<double>({-3, -3, -3, -3, -3, -3}));
}

TEST(MatmulOps, BatchDimsBroadcast) {
  // a (2,1,2,2): the identity and twice the identity; b (3,2,2): three matrices.
  const Tensor a = tensor({1, 0, 0, 1, 2, 0, 0, 2}, {2, 1, 2, 2});
  const Tensor b = reshape(arange(0, 12), {3, 2, 2});
  const Tensor out = matmul(a, b);
  EXPECT_EQ(out.shape(), Shape({2, 3, 2, 2}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t c = 0; c < 2; ++c) EXPECT_EQ(out.at({i, k, r, c}), (i + 1) * b.at({k, r, c}));
  // The brief's example: (2,1,3,4) @ (5,4,6) → (2,5,3,6).
  EXPECT_EQ(matmul(ones({2, 1, 3, 4}), ones({5, 4, 6})).shape(), Shape({2, 5, 3, 6}));
  EXPECT_EQ(matmul(ones({2, 1, 3, 4}), ones({5, 4, 6})).to_vector(), std::vector<double>(2 * 5 * 3 * 6, 4.0));
  // A 2-D operand broadcasts against a batch on either side.
  EXPECT_EQ(matmul(ones({3, 4}), ones({2, 4, 5})).shape(), Shape({2, 3, 5}));
  EXPECT_EQ(matmul(ones({2, 3, 4}), ones({4, 5})).shape(), Shape({2, 3, 5}));
}

TEST(MatmulOps, AllFourTransposeCombinationsMatchANaiveReference) {
  Generator gen(11);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Tensor a = randn(ta ? Shape{3, 4, 5} : Shape{3, 5, 4}, DType::f64, gen);  // A (3, 5, 4)
      const Tensor b = randn(tb ? Shape{3, 6, 4} : Shape{3, 4, 6}, DType::f64, gen);  // B (3, 4, 6)
      const Tensor out = matmul(a, b, ta, tb);
      EXPECT_EQ(out.shape(), Shape({3, 5, 6}));
      SCOPED_TRACE(testing::Message() << "ta=" << ta << " tb=" << tb);
      expect_near(out, naive_batched(a, b, ta, tb), 1e-12);
    }
  }
}

TEST(MatmulOps, BigProductTakesTheParallelPathAndMatchesTheReference) {
  Generator gen(12);
  for (bool tb : {false, true}) {
    const Tensor a = randn({2, 64, 80}, DType::f64, gen);
    const Tensor b = randn(tb ? Shape{2, 48, 80} : Shape{2, 80, 48}, DType::f64, gen);
    expect_near(matmul(a, b, false, tb), naive_batched(a, b, false, tb), 1e-10);
    // f32 accumulates in f32: agreement to f32 precision over 80-term sums.
    expect_near(matmul(to(a, DType::f32), to(b, DType::f32), false, tb), naive_batched(a, b, false, tb), 1e-4);
  }
}

// The loops' tiles (64 rows × 16 columns, B's columns packed per k, four rows at once): partial
// row and column tiles, sums longer than the on-stack packing (64), every transposition, in f64
// and f32 below oneDNN's threshold, against the definition.
TEST(MatmulOps, TiledLoopsMatchTheDefinitionAtEveryTileEdge) {
  Generator gen(21);
  const std::vector<std::array<int64_t, 4>> shapes = {
      // batch, M, K, N
      {1, 70, 3, 21}, {3, 5, 97, 17}, {2, 67, 1, 33}, {48, 4, 2, 4}, {1, 1, 1, 1}, {1, 129, 2, 16}};
  for (const auto& [batch, m, k, n] : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const Tensor a = randn(ta ? Shape{batch, k, m} : Shape{batch, m, k}, DType::f64, gen);
        const Tensor b = randn(tb ? Shape{batch, n, k} : Shape{batch, k, n}, DType::f64, gen);
        SCOPED_TRACE(testing::Message() << "batch " << batch << " M " << m << " K " << k << " N " << n << " ta " << ta
                                        << " tb " << tb);
        const std::vector<double> expected = naive_batched(a, b, ta, tb);
        expect_near(matmul(a, b, ta, tb), expected, 1e-12);
        if (batch * m * k * n < 8192)  // the loops in f32 too (above, oneDNN)
          expect_near(matmul(to(a, DType::f32), to(b, DType::f32), ta, tb), expected, 1e-5 * std::sqrt(k));
      }
}

// One matrix under a batch (a Linear layer: the batch folds into the rows) and a batch broadcast
// against another: each output matrix from the right operand matrices, as the 3-D definition.
TEST(MatmulOps, TiledLoopsFoldAndBroadcastTheBatch) {
  Generator gen(22);
  const Tensor x = randn({5, 13, 7}, DType::f64, gen), w = randn({9, 7}, DType::f64, gen);
  const Tensor folded = matmul(x, w, false, true);  // (5, 13, 9)
  const Tensor w_batch = broadcast_to(reshape(w, {1, 9, 7}), {5, 9, 7});
  expect_near(folded, naive_batched(x, w_batch, false, true), 1e-12);
  const Tensor a = randn({2, 1, 6, 4}, DType::f64, gen), b = randn({3, 4, 5}, DType::f64, gen);
  const Tensor out = matmul(a, b);  // (2, 3, 6, 5): a's matrix i with b's matrix j
  const Tensor a_batch = reshape(broadcast_to(a, {2, 3, 6, 4}), {6, 6, 4});
  const Tensor b_batch = reshape(broadcast_to(b, {2, 3, 4, 5}), {6, 4, 5});
  expect_near(out, naive_batched(a_batch, b_batch, false, false), 1e-12);
}

TEST(MatmulOps, TiledLoopsGiveTheSameBitsOnOneAndTwoThreads) {
  Generator gen(23);
  const Tensor a = randn({4, 300, 50}, DType::f64, gen), b = randn({4, 50, 40}, DType::f64, gen);
  const int threads = get_num_threads();
  set_num_threads(1);
  const std::vector<double> one = matmul(a, b).to_vector();
  set_num_threads(2);
  const std::vector<double> two = matmul(a, b).to_vector();
  set_num_threads(threads);
  EXPECT_EQ(one, two);
}

TEST(MatmulOps, EmptyInnerDimensionGivesZeros) {
  const Tensor out = matmul(zeros({2, 0}), zeros({0, 3}));
  EXPECT_EQ(out.shape(), Shape({2, 3}));
  EXPECT_EQ(out.to_vector(), std::vector<double>(6, 0.0));
  EXPECT_EQ(matmul(zeros({0, 2}), zeros({2, 3})).shape(), Shape({0, 3}));
}

// Seed 003: queries = inputs @ W_q, keys = inputs @ W_k, attn_scores = queries @ keys.T, from the
// printed inputs and (4-decimal) weights. The notebook's printed results agree to ~1e-4.
TEST(MatmulOps, Seed003AttentionScores) {
  const Tensor inputs = tensor({0.43, 0.15, 0.89,   // Your
                                0.55, 0.87, 0.66,   // Journey
                                0.57, 0.85, 0.64,   // starts
                                0.22, 0.58, 0.33,   // with
                                0.77, 0.25, 0.10,   // one
                                0.05, 0.80, 0.55},  // step
                               {6, 3});
  const Tensor w_query = tensor({0.2961, 0.5166, 0.2517, 0.6886, 0.0740, 0.8665}, {3, 2});
  const Tensor w_key = tensor({0.1366, 0.1025, 0.1841, 0.7264, 0.3153, 0.6871}, {3, 2});
  const Tensor queries = matmul(inputs, w_query);            // (6, 2)
  const Tensor keys = matmul(inputs, w_key);                 // (6, 2)
  const Tensor scores = matmul(queries, keys, false, true);  // (6, 6) = queries @ keys.T
  EXPECT_EQ(scores.shape(), Shape({6, 6}));
  expect_near(scores, {0.9231, 1.3545, 1.3241, 0.7910, 0.4032, 1.1330,  //
                       1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440,  //
                       1.2544, 1.8284, 1.7877, 1.0654, 0.5508, 1.5238,  //
                       0.6973, 1.0167, 0.9941, 0.5925, 0.3061, 0.8475,  //
                       0.6114, 0.8819, 0.8626, 0.5121, 0.2707, 0.7307,  //
                       0.8995, 1.3165, 1.2871, 0.7682, 0.3937, 1.0996},
              5e-4);

  // The single-query path: x_2 (3) @ W_q → query_2 (2); query_2 @ keys.T → (6); query_2 · key_2.
  const Tensor x_2 = tensor({0.55, 0.87, 0.66}, {3});
  const Tensor query_2 = matmul(x_2, w_query);
  expect_near(query_2, {0.4306, 1.4551}, 2e-4);
  expect_near(matmul(x_2, w_key), {0.4433, 1.1419}, 2e-4);
  expect_near(matmul(query_2, keys, false, true), {1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440}, 5e-4);
  const Tensor score_22 = matmul(query_2, matmul(x_2, w_key));  // 1-D · 1-D
  EXPECT_EQ(score_22.shape(), Shape({}));
  EXPECT_NEAR(score_22.item(), 1.8524, 5e-4);
}

TEST(MatmulOps, GradientsHaveTheOperandsShapes) {
  // L = Σ a @ b with a (2,3,4) batched and b (4,5) shared: dL/da = row sums of b (5 each),
  // dL/db = Σ over the batch and rows of a (6 each).
  Tensor a = ones({2, 3, 4}, DType::f64).requires_grad_();
  Tensor b = ones({4, 5}, DType::f64).requires_grad_();
  sum(matmul(a, b)).backward();
  EXPECT_EQ(a.grad().shape(), Shape({2, 3, 4}));
  EXPECT_EQ(a.grad().to_vector(), std::vector<double>(24, 5.0));
  EXPECT_EQ(b.grad().shape(), Shape({4, 5}));
  EXPECT_EQ(b.grad().to_vector(), std::vector<double>(20, 6.0));

  // A vector on the left: (2) @ (2,3). dL/dv = row sums of m; dL/dm = v repeated across columns.
  Tensor v = tensor({1, 2}, {2}, DType::f64).requires_grad_();
  Tensor m = tensor({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64).requires_grad_();
  sum(matmul(v, m)).backward();
  EXPECT_EQ(v.grad().to_vector(), std::vector<double>({6, 15}));
  EXPECT_EQ(m.grad().to_vector(), std::vector<double>({1, 1, 1, 2, 2, 2}));

  // Transposed and broadcast: a stored (1,4,3) read as (1,3,4); b stored (2,5,4) read as (2,4,5).
  Tensor at = ones({1, 4, 3}, DType::f64).requires_grad_();
  Tensor bt = ones({2, 5, 4}, DType::f64).requires_grad_();
  sum(matmul(at, bt, true, true)).backward();
  EXPECT_EQ(at.grad().shape(), Shape({1, 4, 3}));
  EXPECT_EQ(at.grad().to_vector(), std::vector<double>(12, 10.0));  // 5 columns × 2 batches
  EXPECT_EQ(bt.grad().shape(), Shape({2, 5, 4}));
  EXPECT_EQ(bt.grad().to_vector(), std::vector<double>(40, 3.0));  // 3 rows of a
}

TEST(MatmulOps, Errors) {
  expect_error([] { matmul(zeros({2, 3}), zeros({4, 5})); }, {"matmul: inner dimensions differ: (2,3) @ (4,5)"});
  expect_error(
      [] {
        matmul(zeros({3, 2}), zeros({4, 5}), true, false);
      },
      {"inner dimensions differ", "(3,2)ᵀ @ (4,5)"});
  expect_error([] { matmul(zeros({3}), zeros({4})); }, {"inner dimensions differ", "(3) @ (4)"});
  expect_error([] { matmul(scalar(2), zeros({3, 4})); }, {"matmul", "at least 1 dim", "() @ (3,4)"});
  expect_error([] { matmul(zeros({3, 4}), scalar(2)); }, {"matmul", "at least 1 dim", "(3,4) @ ()"});
  expect_error([] { matmul(zeros({2, 3}), zeros({3, 4}, DType::f64)); }, {"matmul", "dtypes differ", "f32", "f64"});
  expect_error([] { matmul(zeros({2, 3}, DType::i64), zeros({3, 4}, DType::i64)); }, {"matmul", "floating", "i64"});
  expect_error(
      [] {
        matmul(zeros({2, 3, 4}), zeros({3, 4, 5}));
      },
      {"matmul", "batch", "(2)", "(3)", "(2,3,4) @ (3,4,5)"});
}

// linear's forward and its three gradients against its reference, the composition it fuses
// (matmul, add, relu or gelu): the same numbers, bit for bit, on the oneDNN path (rows·in·out ≥ 8192) and
// on the loops, with and without bias and activation, the input 2-D or 3-D; the backward's one pass
// over the output gradient (linear_output_gradient, after a ReLU or a GELU or under autocast) against
// threshold_backward or gelu's backward, to(bf16) and sum.
void expect_linear_equals_composition(const Shape& x_shape, int64_t out_features, bool with_bias, Activation activation,
                                      bool bf16 = false) {
  const AutocastGuard autocast(bf16);
  Generator gen(5);
  const int64_t in = x_shape.back();
  Tensor x = randn(x_shape, DType::f32, gen).requires_grad_();
  Tensor w = randn({out_features, in}, DType::f32, gen).requires_grad_();
  Tensor b = with_bias ? randn({out_features}, DType::f32, gen).requires_grad_() : Tensor();
  Shape out_shape = x_shape;
  out_shape.back() = out_features;
  const Tensor u = randn(out_shape, DType::f32, gen);  // the gradient arriving at the output
  const Tensor fused = linear(x, w, b, activation);
  sum(mul(fused, u)).backward();
  const std::vector<Tensor> fused_grads = {x.grad(), w.grad(), with_bias ? b.grad() : Tensor()};
  for (Tensor* t : {&x, &w, &b})
    if (t->defined()) t->set_grad({});
  Tensor composed = matmul(x, w, false, true);
  if (with_bias) composed = add(composed, b);
  if (activation == Activation::relu) composed = relu(composed);
  if (activation == Activation::gelu) composed = gelu(composed);
  sum(mul(composed, u)).backward();
  SCOPED_TRACE(fmt::format("x {} out {} bias {} activation {} bf16 {}", shape_str(x_shape), out_features, with_bias,
                           static_cast<int>(activation), bf16));
  EXPECT_EQ(fused.to_vector(), composed.to_vector());
  EXPECT_EQ(fused_grads[0].to_vector(), x.grad().to_vector());
  EXPECT_EQ(fused_grads[1].to_vector(), w.grad().to_vector());
  if (with_bias) {
    EXPECT_EQ(fused_grads[2].to_vector(), b.grad().to_vector());
  }
}

TEST(LinearOps, FusedEqualsTheCompositionBitForBit) {
  for (const Shape& x_shape : {Shape{3, 4}, Shape{2, 64, 48}, Shape{300, 40}})
    for (const bool with_bias : {true, false})
      for (const Activation activation : {Activation::none, Activation::relu, Activation::gelu})
        expect_linear_equals_composition(x_shape, x_shape.back() == 4 ? 5 : 72, with_bias, activation);
}

TEST(LinearOps, FusedEqualsTheCompositionUnderAutocast) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512_BF16 (lscpu flag avx512_bf16)";
  for (const Shape& x_shape : {Shape{3, 4}, Shape{2, 64, 48}, Shape{300, 40}})
    for (const bool with_bias : {true, false})
      for (const Activation activation : {Activation::none, Activation::relu, Activation::gelu})
        expect_linear_equals_composition(x_shape, x_shape.back() == 4 ? 5 : 72, with_bias, activation, true);
}

// linear_relu_dropout against its reference, dropout(linear(…, relu)), from generators seeded alike:
// the same output, the same gradients of x, W and b (through a second Linear reading the output, as a
// feed-forward's does: under autocast it reads the bf16 copy written in the dropout's pass), the same
// draws taken; f64, f32 on the loops and on oneDNN, and autocast, p = 0.3 and p = 1.
void expect_relu_dropout_equals_composition(const Shape& x_shape, bool with_bias, double p, DType dtype,
                                            bool bf16 = false) {
  const AutocastGuard autocast(bf16);
  Generator gen(5);
  const int64_t in = x_shape.back(), hidden = 72;
  Tensor x = randn(x_shape, dtype, gen).requires_grad_();
  Tensor w = randn({hidden, in}, dtype, gen).requires_grad_();
  Tensor b = with_bias ? randn({hidden}, dtype, gen).requires_grad_() : Tensor();
  const Tensor w2 = randn({5, hidden}, dtype, gen);
  Shape out_shape = x_shape;
  out_shape.back() = 5;
  const Tensor u = randn(out_shape, dtype, gen);
  std::vector<std::vector<double>> results[2];
  for (const bool fused : {true, false}) {
    Generator drops(11);
    const Tensor h = fused ? linear_relu_dropout(x, w, b, p, true, drops)
                           : dropout(linear(x, w, b, Activation::relu), p, true, drops);
    sum(mul(linear(h, w2), u)).backward();
    results[fused] = {h.to_vector(),
                      x.grad().to_vector(),
                      w.grad().to_vector(),
                      with_bias ? b.grad().to_vector() : std::vector<double>(),
                      {static_cast<double>(drops.state().counter)}};
    for (Tensor* t : {&x, &w, &b})
      if (t->defined()) t->set_grad({});
  }
  SCOPED_TRACE(fmt::format("x {} bias {} p {} {} bf16 {}", shape_str(x_shape), with_bias, p, dtype_name(dtype), bf16));
  for (size_t t = 0; t < results[0].size(); ++t) EXPECT_EQ(results[1][t], results[0][t]) << "result " << t;
}

TEST(LinearOps, ReluDropoutEqualsTheComposition) {
  for (const Shape& x_shape : {Shape{3, 4}, Shape{2, 64, 48}})
    for (const bool with_bias : {true, false})
      for (const double p : {0.3, 1.0})
        for (const DType dtype : {DType::f32, DType::f64})
          expect_relu_dropout_equals_composition(x_shape, with_bias, p, dtype);
  {  // bf16 operands give an f32 output, which dropout scales by its f32 1/(1 − p)
    Generator gen(2), a(3), b(3);
    const Tensor x = to(randn({4, 8}, DType::f32, gen), DType::bf16),
                 w = to(randn({6, 8}, DType::f32, gen), DType::bf16);
    EXPECT_EQ(linear_relu_dropout(x, w, {}, 0.3, true, a).to_vector(),
              dropout(linear(x, w, {}, Activation::relu), 0.3, true, b).to_vector());
  }
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512_BF16 (lscpu flag avx512_bf16): no autocast case";
  for (const bool with_bias : {true, false})
    expect_relu_dropout_equals_composition({2, 64, 48}, with_bias, 0.3, DType::f32, true);
}

// linear_add against its reference, add(residual, linear(x, W, b)): the same output and the same
// gradients of x, W, b and the residual; f64 (the loops), f32 on the loops and on oneDNN (at 1 and 2
// threads: the product's shares each add their rows), and under autocast.
TEST(LinearOps, AddEqualsTheComposition) {
  const int threads = get_num_threads();
  for (const Shape& x_shape : {Shape{3, 4}, Shape{2, 64, 48}})
    for (const bool with_bias : {true, false})
      for (const DType dtype : {DType::f32, DType::f64})
        for (const bool bf16 : {false, true})
          for (const int t : {1, 2}) {
            if (bf16 && (dtype != DType::f32 || !cpu_has_avx512_bf16())) continue;
            set_num_threads(t);
            const AutocastGuard autocast(bf16);
            Generator gen(8);
            Shape out_shape = x_shape;
            out_shape.back() = 40;
            Tensor x = randn(x_shape, dtype, gen).requires_grad_();
            Tensor w = randn({40, x_shape.back()}, dtype, gen).requires_grad_();
            Tensor b = with_bias ? randn({40}, dtype, gen).requires_grad_() : Tensor();
            Tensor r = randn(out_shape, dtype, gen).requires_grad_();
            const Tensor u = randn(out_shape, dtype, gen);
            std::vector<std::vector<double>> results[2];
            for (const bool fused : {true, false}) {
              const Tensor out = fused ? linear_add(x, w, b, r) : add(r, linear(x, w, b));
              if (fused) {
                EXPECT_EQ(out.grad_fn()->name, "LinearAddBackward");
              }
              sum(mul(out, u)).backward();
              results[fused] = {out.to_vector(), x.grad().to_vector(), w.grad().to_vector(),
                                with_bias ? b.grad().to_vector() : std::vector<double>(), r.grad().to_vector()};
              for (Tensor* g : {&x, &w, &b, &r})
                if (g->defined()) g->set_grad({});
            }
            SCOPED_TRACE(fmt::format("x {} bias {} {} bf16 {} threads {}", shape_str(x_shape), with_bias,
                                     dtype_name(dtype), bf16, t));
            for (size_t k = 0; k < results[0].size(); ++k) EXPECT_EQ(results[1][k], results[0][k]) << "result " << k;
          }
  set_num_threads(threads);
  expect_error(
      [] {
        linear_add(zeros({2, 3}), zeros({4, 3}), {}, zeros({2, 3}));
      },
      {"linear_add", "residual", "(2,4)", "(2,3)"});
  expect_error(
      [] {
        linear_add(zeros({2, 3}), zeros({4, 3}), {}, zeros({2, 4}, DType::f64));
      },
      {"linear_add", "f32", "f64"});
  {  // bf16 operands give an f32 output: the residual is f32 too
    Generator gen(3);
    const Tensor x = to(randn({4, 8}, DType::f32, gen), DType::bf16),
                 w = to(randn({6, 8}, DType::f32, gen), DType::bf16);
    const Tensor r = randn({4, 6}, DType::f32, gen);
    EXPECT_EQ(linear_add(x, w, {}, r).to_vector(), add(r, linear(x, w)).to_vector());
    expect_error([&] { linear_add(x, w, {}, to(r, DType::bf16)); }, {"linear_add", "dtype f32", "bf16"});
  }
}

TEST(LinearOps, ReluDropoutErrors) {
  Generator gen(1);
  expect_error(
      [&] {
        linear_relu_dropout(zeros({2, 3}), zeros({4, 3}), {}, 1.5, true, gen);
      },
      {"linear_relu_dropout", "probability p in [0, 1]", "1.5"});
  expect_error(
      [&] {
        linear_relu_dropout(zeros({2, 3}), zeros({4, 5}), {}, 0.5, true, gen);
      },
      {"linear", "(2,3)", "(4,5)"});
}

// No input features (in = 0): every output is the bias, as F.linear gives, and the gradients flow.
TEST(LinearOps, NoInputFeaturesGiveTheBias) {
  Tensor x = zeros({3, 0}).requires_grad_(), w = zeros({4, 0}).requires_grad_();
  Tensor b = tensor({1.0, 2.0, 3.0, 4.0}, {4}).requires_grad_();
  const Tensor out = linear(x, w, b);
  ASSERT_EQ(out.shape(), Shape({3, 4}));
  EXPECT_EQ(out.to_vector(), std::vector<double>({1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4}));
  sum(out).backward();
  EXPECT_EQ(b.grad().to_vector(), std::vector<double>(4, 3.0));
  EXPECT_EQ(x.grad().shape(), Shape({3, 0}));
}

TEST(LinearOps, Errors) {
  expect_error(
      [] {
        linear(zeros({2, 3}), zeros({4, 5}));
      },
      {"linear", "x (..., in) and weight (out, in)", "(2,3)", "(4,5)"});
  expect_error([] { linear(zeros({2, 3}), zeros({4, 3}), zeros({3})); }, {"linear", "bias of shape (4)", "(3)"});
  expect_error([] { linear(zeros({2, 3}), zeros({4, 3}, DType::f64)); }, {"linear", "dtypes differ", "f32", "f64"});
  expect_error([] { linear(zeros({2, 3}), zeros({3})); }, {"linear", "weight (out, in)", "(3)"});
}

}  // namespace
}  // namespace ag
