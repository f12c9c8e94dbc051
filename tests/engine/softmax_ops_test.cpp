// softmax and log_softmax: seed 003's printed weights, hand-computed values, every dim against a
// naive reference, numerical stability, -inf entries and all -inf rows, a second-order gradient,
// and error messages. First-order gradients are checked numerically for every registered op by
// gradcheck_tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/mask.h"
#include "engine/ops/reduce.h"
#include "engine/ops/softmax.h"
#include "tests/test_util.h"

namespace ag {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// softmax (or log_softmax) of x over dim, straight from the definition: exp(x_k) / Σ_j exp(x_j),
// shifted by the max only for range.
std::vector<double> naive_softmax(const Tensor& x, int64_t dim, bool log) {
  const std::vector<double> v = x.to_vector();
  const Shape& shape = x.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= shape[d];
  const int64_t size = shape[dim];
  std::vector<double> out(v.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return o * size * inner + k * inner + i; };
      double max = -kInf, total = 0;
      for (int64_t k = 0; k < size; ++k) max = std::max(max, v[at(k)]);
      for (int64_t k = 0; k < size; ++k) total += std::exp(v[at(k)] - max);
      for (int64_t k = 0; k < size; ++k)
        out[at(k)] = log ? v[at(k)] - max - std::log(total) : std::exp(v[at(k)] - max) / total;
    }
  return out;
}

TEST(SoftmaxOps, Seed003AttentionWeightsOfQuery2) {
  // attn_weights_2 = torch.softmax(attn_scores_2 / d_k**0.5, dim=-1), d_k = 2
  const Tensor scores = tensor({1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440}, {6});
  expect_near(softmax(scores / std::sqrt(2.0), -1), {0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820}, 1e-4);
}

TEST(SoftmaxOps, Seed003ScalingMakesSoftmaxPeaky) {
  const Tensor x = tensor({0.1, -0.2, 0.3, -0.2, 0.5}, {5});
  expect_near(softmax(x, -1), {0.1925, 0.1426, 0.2351, 0.1426, 0.2872}, 1e-4);
  expect_near(softmax(x * 8.0, -1), {0.0326, 0.0030, 0.1615, 0.0030, 0.8000}, 1e-4);
}

// Seed 003, "hiding future words": masked = attn_scores.masked_fill(triu(ones, 1).bool(), -inf);
// softmax(masked / sqrt(2), dim=1), from the printed (4-decimal) scores.
TEST(SoftmaxOps, Seed003CausalAttentionWeights) {
  const Tensor scores = tensor({0.2899, 0.0716, 0.0760, -0.0138, 0.1344, -0.0511,  //
                                0.4656, 0.1723, 0.1751, 0.0259,  0.1771, 0.0085,   //
                                0.4594, 0.1703, 0.1731, 0.0259,  0.1745, 0.0090,   //
                                0.2642, 0.1024, 0.1036, 0.0186,  0.0973, 0.0122,   //
                                0.2183, 0.0874, 0.0882, 0.0177,  0.0786, 0.0144,   //
                                0.3408, 0.1270, 0.1290, 0.0198,  0.1290, 0.0078},
                               {6, 6});
  const Tensor masked = masked_fill(scores, causal_mask(6), -kInf);
  const Tensor weights = softmax(masked / std::sqrt(2.0), 1);
  expect_near(weights, {1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000,  //
                        0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000,  //
                        0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000,  //
                        0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000,  //
                        0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000,  //
                        0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529},
              2e-4);
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = i + 1; j < 6; ++j) EXPECT_EQ(weights.at({i, j}), 0.0);  // exactly
}

TEST(SoftmaxOps, HandComputedValues) {
  const Tensor x = tensor({1, 2, 3}, {3}, DType::f64);
  expect_near(softmax(x, 0), {0.09003057317038046, 0.24472847105479764, 0.6652409557748218}, 1e-15);
  expect_near(log_softmax(x, -1), {-2.40760596444438, -1.4076059644443804, -0.40760596444438046}, 1e-14);
  // Over dim 0 of a (2,3) matrix: each column is normalised.
  const Tensor m = tensor({1, 2, 3, 1, 1, 1}, {2, 3}, DType::f64);
  expect_near(softmax(m, 0),
              {0.5, 0.7310585786300049, 0.8807970779778823, 0.5, 0.2689414213699951, 0.11920292202211755}, 1e-15);
  expect_near(softmax(m, 1), {0.09003057317038046, 0.24472847105479764, 0.6652409557748218, 1 / 3.0, 1 / 3.0, 1 / 3.0},
              1e-15);
}

TEST(SoftmaxOps, LargeInputsDoNotOverflow) {
  // exp(1000) overflows even f64; subtracting the max keeps it exact, in f32 too.
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor big = tensor({1000, 1001}, {2}, dtype);
    expect_near(softmax(big, 0), {0.2689414213699951, 0.7310585786300049}, 1e-6);
    expect_near(log_softmax(big, 0), {-1.3132616875182228, -0.3132616875182228}, 1e-5);
    const Tensor small = tensor({-1000, -1001}, {2}, dtype);
    expect_near(softmax(small, 0), {0.7310585786300049, 0.2689414213699951}, 1e-6);
    expect_near(log_softmax(small, 0), {-0.3132616875182228, -1.3132616875182228}, 1e-5);
  }
}

TEST(SoftmaxOps, EveryDimMatchesTheDefinition) {
  Generator gen(21);
  const Tensor x = randn({2, 3, 4}, DType::f64, gen);
  for (int64_t dim = 0; dim < 3; ++dim) {
    SCOPED_TRACE(testing::Message() << "dim " << dim);
    expect_near(softmax(x, dim), naive_softmax(x, dim, false), 1e-15);
    expect_near(log_softmax(x, dim), naive_softmax(x, dim, true), 1e-14);
    expect_near(softmax(x, dim - 3), naive_softmax(x, dim, false), 1e-15);  // negative dims
  }
}

TEST(SoftmaxOps, BigInputTakesTheParallelPathAndMatchesTheDefinition) {
  Generator gen(22);
  const Tensor x = randn({64, 33, 40}, DType::f64, gen);
  for (int64_t dim : {1, 2}) {
    expect_near(softmax(x, dim), naive_softmax(x, dim, false), 1e-14);
    expect_near(log_softmax(x, dim), naive_softmax(x, dim, true), 1e-13);
    expect_near(softmax(to(x, DType::f32), dim), naive_softmax(x, dim, false), 1e-6);
  }
}

TEST(SoftmaxOps, SizeOneDimsAndScalars) {
  EXPECT_EQ(softmax(tensor({3, -2}, {2, 1}), 1).to_vector(), std::vector<double>({1, 1}));
  EXPECT_EQ(log_softmax(tensor({3, -2}, {2, 1}), -1).to_vector(), std::vector<double>({0, 0}));
  EXPECT_EQ(softmax(scalar(5), 0).item(), 1);
  EXPECT_EQ(softmax(scalar(5), -1).shape(), Shape({}));
  EXPECT_EQ(log_softmax(scalar(5), 0).item(), 0);
}

TEST(SoftmaxOps, MinusInfinityGetsExactlyZeroWeight) {
  const Tensor x = tensor({-kInf, 0.3, -kInf, 0.3}, {4}, DType::f64);
  EXPECT_EQ(softmax(x, 0).to_vector(), std::vector<double>({0, 0.5, 0, 0.5}));
  const std::vector<double> log_weights = log_softmax(x, 0).to_vector();
  EXPECT_EQ(log_weights[0], -kInf);
  EXPECT_EQ(log_weights[2], -kInf);
  EXPECT_NEAR(log_weights[1], std::log(0.5), 1e-15);
}

TEST(SoftmaxOps, AllMinusInfinityRowGivesNaNLikePyTorch) {
  const Tensor x = tensor({-kInf, -kInf, 1, 2}, {2, 2});
  const std::vector<double> y = softmax(x, 1).to_vector();
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));
  EXPECT_NEAR(y[2], 0.2689414213699951, 1e-6);  // the other row is untouched
  const std::vector<double> z = log_softmax(x, 1).to_vector();
  EXPECT_TRUE(std::isnan(z[0]) && std::isnan(z[1]));
  EXPECT_NEAR(z[3], -0.3132616875182228, 1e-6);
}

// A NaN in a row (or +inf, whose shift by the row's max is inf - inf) makes the row NaN, as in
// PyTorch, on attograd's short-row and long-row kernels (below oneDNN's 256 elements), without
// converting a NaN exponent to an integer (undefined behaviour the sanitizer build reports; a
// fuzzed squares checkpoint found it).
TEST(SoftmaxOps, NaNOrInfinityInARowGivesANaNRow) {
  for (const int64_t size : {3, 80}) {
    Tensor x = zeros({3, size});
    x.set({0, 1}, std::nan(""));
    x.set({1, size - 1}, kInf);
    const std::vector<double> y = softmax(x, 1).to_vector();
    for (int64_t j = 0; j < size; ++j) {
      EXPECT_TRUE(std::isnan(y[j])) << size << " NaN row, element " << j;
      EXPECT_TRUE(std::isnan(y[size + j])) << size << " +inf row, element " << j;
      EXPECT_NEAR(y[2 * size + j], 1.0 / static_cast<double>(size), 1e-7) << "the other row is untouched";
    }
  }
}

TEST(SoftmaxOps, BackwardHandValues) {
  // Two logits (0.5, 0): y0 = sigmoid(0.5). L = y0 → dL/dx = (y0(1-y0), -y0(1-y0)).
  Tensor x = tensor({0.5, 0}, {2}, DType::f64).requires_grad_();
  const Tensor pick = tensor({1, 0}, {2}, DType::f64);
  sum(mul(softmax(x, 0), pick)).backward();
  expect_near(x.grad(), {0.2350037122015945, -0.2350037122015945}, 1e-14);
  // L = log y0 → dL/dx = (1 - y0, -y1).
  Tensor x2 = tensor({0.5, 0}, {2}, DType::f64).requires_grad_();
  sum(mul(log_softmax(x2, 0), pick)).backward();
  expect_near(x2.grad(), {0.3775406687981454, -0.3775406687981454}, 1e-14);
}

TEST(SoftmaxOps, SecondOrderGradientThroughTheSavedOutput) {
  // y0 = sigmoid(x0 - x1); g = dy0/dx0 = y0(1-y0); dg/dx0 = y0(1-y0)(1-2y0). At (0.5, 0):
  // -0.05755679485232076. The backward uses the saved output y, which must carry its graph.
  Tensor x = tensor({0.5, 0}, {2}, DType::f64).requires_grad_();
  const Tensor pick = tensor({1, 0}, {2}, DType::f64);
  sum(mul(softmax(x, 0), pick)).backward({}, false, /*create_graph=*/true);
  const Tensor g = x.grad();
  ASSERT_TRUE(g.requires_grad());
  x.set_grad({});
  sum(mul(g, pick)).backward();
  expect_near(x.grad(), {-0.05755679485232076, 0.05755679485232076}, 1e-14);
}

TEST(SoftmaxOps, Errors) {
  expect_error([] { softmax(zeros({2, 3}), 2); }, {"softmax", "dim 2", "out of range"});
  expect_error([] { log_softmax(zeros({2, 3}), -3); }, {"log_softmax", "dim -3", "out of range"});
  expect_error([] { softmax(zeros({2}, DType::i64), 0); }, {"softmax", "floating", "i64", "(2)"});
  expect_error([] { log_softmax(Tensor(), 0); }, {"log_softmax", "undefined"});
}

}  // namespace
}  // namespace ag
