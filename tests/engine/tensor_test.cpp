// Tensor basics: factories, element access, printing, the generator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/threads.h"
#include "tests/test_util.h"

namespace ag {
namespace {

TEST(Tensor, FactoriesFillAsAsked) {
  EXPECT_EQ(zeros({2, 3}).to_vector(), std::vector<double>(6, 0.0));
  EXPECT_EQ(ones({2}, DType::f64).dtype(), DType::f64);
  EXPECT_EQ(full({2}, 7.5).to_vector(), (std::vector<double>{7.5, 7.5}));
  EXPECT_EQ(arange(0, 5).to_vector(), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(1, 2, 0.25).numel(), 4);
  EXPECT_EQ(scalar(3).dim(), 0);
  EXPECT_EQ(scalar(3).item(), 3.0);
  Tensor t = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.at({1, 0}), 4.0);
  EXPECT_EQ(t.at({-1, -1}), 6.0);
  EXPECT_EQ(t.size(-1), 3);
  t.set({0, 1}, 9);
  EXPECT_EQ(t.at({0, 1}), 9.0);
  EXPECT_EQ(t.version(), 1u);
}

TEST(Tensor, StorageIs64ByteAligned) {
  for (int64_t n : {1, 3, 17, 1000}) EXPECT_EQ(reinterpret_cast<uintptr_t>(zeros({n}).raw_data()) % 64, 0u);
}

TEST(Tensor, PrintsLikePyTorch) {
  EXPECT_EQ(tensor({0.15, 0.2264}, {1, 2}).str(), "tensor([[0.1500, 0.2264]])");
  EXPECT_EQ(tensor({1, 2, 3}, {3}).str(), "tensor([1., 2., 3.])");
  EXPECT_EQ(tensor({1, -2.5, 3, 4}, {2, 2}).str(), "tensor([[ 1.0000, -2.5000],\n        [ 3.0000,  4.0000]])");
  EXPECT_EQ(scalar(1.8524).str(), "tensor(1.8524)");
  EXPECT_EQ(tensor({0.5}, {1}).requires_grad_().str(), "tensor([0.5000], requires_grad=True)");
  Tensor x = tensor({0.25, 1.0}, {2}).requires_grad_();
  EXPECT_EQ(mul(x, 2.0).str(), "tensor([0.5000, 2.0000], grad_fn=<MulScalarBackward>)");
  EXPECT_EQ(tensor({1.5}, {1}, DType::f64).str(), "tensor([1.5000], dtype=f64)");
  EXPECT_EQ(randint(3, 4, {2}).str(), "tensor([3, 3], dtype=i64)");
  EXPECT_EQ(gt(tensor({1, -1}, {2}), 0).str(), "tensor([ True, False], dtype=b8)");
  EXPECT_EQ(tensor({1e-6, 2e-6}, {2}).str(), "tensor([1.0000e-06, 2.0000e-06])");
  std::ostringstream os;
  os << tensor({2, 3, 4, 5, 6, 7, 8, 9}, {2, 2, 2});
  EXPECT_EQ(os.str(), "tensor([[[2., 3.],\n         [4., 5.]],\n\n        [[6., 7.],\n         [8., 9.]]])");
}

TEST(Generator, IsSplitMix64) {
  // Reference values of splitmix64 from seed 0 (Vigna's splitmix64.c).
  Generator gen(0);
  EXPECT_EQ(gen.next_u64(), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(gen.next_u64(), 0x6E789E6AA1B965F4ULL);
  EXPECT_EQ(gen.next_u64(), 0x06C45D188009454FULL);
}

TEST(Generator, SameSeedSameNumbers) {
  Generator a(42), b(42);
  EXPECT_EQ(randn({100}, DType::f32, a).to_vector(), randn({100}, DType::f32, b).to_vector());
  Generator::State state = a.state();
  const double next = a.normal();
  a.set_state(state);
  EXPECT_EQ(a.normal(), next);
}

TEST(Generator, DistributionsHaveTheRightMoments) {
  Generator gen(1);
  Tensor u = rand({100000}, DType::f64, gen);
  Tensor n = randn({100000}, DType::f64, gen);
  EXPECT_NEAR(mean(u).item(), 0.5, 0.005);
  EXPECT_GE(min(u).item(), 0.0);
  EXPECT_LT(max(u).item(), 1.0);
  EXPECT_NEAR(mean(n).item(), 0.0, 0.01);
  EXPECT_NEAR(mean(mul(n, n)).item(), 1.0, 0.02);
  Tensor k = randint(-2, 3, {10000}, gen);
  std::vector<int> counts(5);
  for (double v : k.to_vector()) {
    ASSERT_GE(v, -2);
    ASSERT_LT(v, 3);
    ++counts[static_cast<int>(v) + 2];
  }
  for (int c : counts) EXPECT_NEAR(c, 2000, 200);
}

// A bias repeating along the leading dims (the binary ops' row loop), either side, against the
// definition; sub is not symmetric, so a swapped operand would show.
TEST(Arithmetic, AnOperandRepeatingAlongLeadingDimsMatchesTheDefinition) {
  const Tensor a = reshape(arange(0, 24, 1, DType::f64), {2, 3, 4});
  for (const Shape& bias_shape : {Shape{4}, Shape{1, 4}, Shape{3, 4}, Shape{1, 1, 4}, Shape{}}) {
    const Tensor b = reshape(add(mul(arange(0, numel(bias_shape), 1, DType::f64), 0.5), 100), bias_shape);
    const std::vector<double> va = a.to_vector(), vb = b.to_vector();
    std::vector<double> a_minus_b(24), b_minus_a(24);
    for (int64_t i = 0; i < 24; ++i) {
      const double bi = vb[i % vb.size()];  // b's elements repeat every numel(b)
      a_minus_b[i] = va[i] - bi;
      b_minus_a[i] = bi - va[i];
    }
    SCOPED_TRACE(shape_str(bias_shape));
    EXPECT_EQ(sub(a, b).to_vector(), a_minus_b);
    EXPECT_EQ(sub(b, a).to_vector(), b_minus_a);
    EXPECT_EQ(sub(b, a).shape(), Shape({2, 3, 4}));
  }
}

// A long contiguous row sums in parallel chunks: exact where double is exact, close to a
// sequential double sum otherwise, and the same bits on 1 and 2 threads.
TEST(Sum, ALongRowIsExactAndAlikeOnAnyThreadCount) {
  const int64_t n = 300001;
  EXPECT_EQ(sum(arange(0, n, 1, DType::f64)).item(), double(n) * (n - 1) / 2);
  Generator gen(5);
  const Tensor x = randn({2, n}, DType::f32, gen);
  const std::vector<double> v = x.to_vector();
  const int threads = get_num_threads();
  set_num_threads(1);
  const std::vector<double> one = sum(x, {1}).to_vector();
  set_num_threads(2);
  const std::vector<double> two = sum(x, {1}).to_vector();
  set_num_threads(threads);
  EXPECT_EQ(one, two);
  for (int64_t row = 0; row < 2; ++row) {
    double sequential = 0;
    for (int64_t i = 0; i < n; ++i) sequential += v[row * n + i];
    EXPECT_NEAR(one[row], sequential, 1e-6 * std::abs(sequential) + 1e-3);
  }
}

// A sum down the rows takes them in blocks of 64 (Note [column sums in row blocks]): each block's
// rows in order in double, then the blocks in order; the test's own loop in that order gives the
// same bits, and 1 and 2 threads too, for one group of 1,000 rows, for groups (a middle dim
// reduced), and for rows too wide for one column chunk.
TEST(Sum, DownTheRowsInRowBlocksAlikeOnAnyThreadCount) {
  struct Case {
    Shape shape;
    int64_t dim;
  };
  for (const Case& c : {Case{{1000, 37}, 0}, Case{{3, 130, 5}, 1}, Case{{100, 5000}, 0}}) {
    Generator gen(7);
    const Tensor x = randn(c.shape, DType::f64, gen);  // f64: an f32 result would hide the order
    const std::vector<double> v = x.to_vector();
    const int64_t groups = c.dim == 0 ? 1 : c.shape[0], rows = c.shape[c.dim], cols = x.numel() / groups / rows;
    std::vector<double> expected;
    for (int64_t group = 0; group < groups; ++group)
      for (int64_t j = 0; j < cols; ++j) {
        double total = 0;
        for (int64_t first = 0; first < rows; first += 64) {
          double block = 0;
          for (int64_t r = first; r < std::min(rows, first + 64); ++r) block += v[(group * rows + r) * cols + j];
          total += block;
        }
        expected.push_back(total);
      }
    const int threads = get_num_threads();
    set_num_threads(1);
    const std::vector<double> one = sum(x, {c.dim}).to_vector();
    set_num_threads(2);
    const std::vector<double> two = sum(x, {c.dim}).to_vector();
    set_num_threads(threads);
    SCOPED_TRACE(shape_str(c.shape));
    EXPECT_EQ(one, expected);
    EXPECT_EQ(two, expected);
  }
}

TEST(Tensor, InPlaceOpsBumpTheVersion) {
  Tensor t = zeros({3});
  t.fill_(2).add_(ones({3}), 0.5).mul_(2);
  EXPECT_EQ(t.to_vector(), (std::vector<double>{5, 5, 5}));
  EXPECT_EQ(t.version(), 3u);
  t.copy_(tensor({1, 2, 3}, {3}, DType::f64));
  EXPECT_EQ(t.to_vector(), (std::vector<double>{1, 2, 3}));
}

}  // namespace
}  // namespace ag
