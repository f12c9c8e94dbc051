// Issue 15: the places where attograd disagreed with PyTorch 1.13, each pinned by a test that
// failed before its fix, and the edge-value conventions (NaN, ±inf, empty dims) as PyTorch's. The
// expected values are PyTorch's (printed by /usr/bin/python3 with torch 1.13.1).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/attention.h"
#include "engine/ops/index.h"
#include "engine/ops/loss.h"
#include "engine/ops/mask.h"
#include "engine/ops/matmul.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/ops/softmax.h"
#include "tests/test_util.h"

namespace ag {
namespace {

using Values = std::vector<double>;
constexpr double kInf = std::numeric_limits<double>::infinity();

// a and b agree: NaN where the other is NaN, else within tol (relative to 1 + |b|).
void expect_same_with_nan(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  const Values x = a.to_vector(), y = b.to_vector();
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(std::isnan(x[i]), std::isnan(y[i])) << what << " at " << i << ": " << x[i] << " vs " << y[i];
    if (!std::isnan(y[i])) {
      EXPECT_NEAR(x[i], y[i], tol * (1 + std::abs(y[i]))) << what << " at " << i;
    }
  }
}

bool any_nan(const Tensor& t) {
  for (double v : t.to_vector())
    if (std::isnan(v)) return true;
  return false;
}

TEST(PyTorchDivergence, CrossEntropyKeepsItsPrecisionAtHugeLogits) {
  // torch: cross_entropy([[1e300, 1e300, 0]], [0]) = log 2.
  const Tensor huge = tensor({1e300, 1e300, 0}, {1, 3}, DType::f64);
  EXPECT_NEAR(cross_entropy(huge, tensor({0}, {1}, DType::i64)).item(), std::log(2.0), 1e-15);
  // Logits near 1e12: the loss is log(1 + e⁻¹ + e⁻²) whatever the offset.
  const Tensor big = tensor({1e12, 1e12 - 1, 1e12 - 2}, {1, 3}, DType::f64);
  const double exact = std::log(1 + std::exp(-1.0) + std::exp(-2.0));
  EXPECT_NEAR(cross_entropy(big, tensor({0}, {1}, DType::i64)).item(), exact, 1e-15);
}

TEST(PyTorchDivergence, SoftplusStaysFiniteAndKeepsItsTailPastTorchsThreshold) {
  // The naive log(1 + e^x) is inf from x ≈ 89 in f32; torch returns x itself past x = 20 (its
  // threshold), dropping log1p(e^-x). Ours: max(x, 0) + log1p(e^-|x|), finite and exact in both.
  const Tensor x32 = tensor({100, -100, 0, 89, -89}, {5}, DType::f32).requires_grad_();
  const Tensor y32 = softplus(x32);
  const Values y = y32.to_vector();
  EXPECT_EQ(y[0], 100.0f);
  EXPECT_EQ(y[3], 89.0f);
  EXPECT_NEAR(y[2], std::log(2.0), 1e-7);
  EXPECT_GT(y[4], 0.0);  // e^-89 ≈ 2.2e-39, a subnormal in f32
  EXPECT_LT(y[1], 1e-40);
  sum(y32).backward();
  const Values g = x32.grad().to_vector();  // sigmoid(x)
  EXPECT_EQ(g[0], 1.0);
  EXPECT_NEAR(g[2], 0.5, 1e-7);
  EXPECT_LT(g[1], 1e-40);
  // f64 past torch's threshold: 30 + log1p(e^-30), where torch gives exactly 30.
  const double at30 = softplus(tensor({30}, {1}, DType::f64)).item();
  EXPECT_EQ(at30, 30 + std::log1p(std::exp(-30.0)));
  EXPECT_GT(at30, 30.0);
}

TEST(PyTorchDivergence, LogSoftmaxF32IsAsAccurateAsPyTorchOnLongRows) {
  // 4 rows of 300 (1,200 elements: past the size where softmax goes to oneDNN), each with one
  // dominant logit whose log-probability is about -0.01. PyTorch f32 gets it to ~4e-8 relative;
  // oneDNN's logsoftmax (max + log Σ subtracted in one step) to ~1e-4.
  Generator gen(3);
  Tensor x = randn({4, 300}, DType::f64, gen);
  for (int64_t r = 0; r < 4; ++r) x.set({r, 7 * r}, 10.0);
  const Values exact = log_softmax(x, -1).to_vector();
  const Values f32 = log_softmax(to(x, DType::f32), -1).to_vector();
  double worst = 0;
  for (size_t i = 0; i < exact.size(); ++i) worst = std::max(worst, std::abs(f32[i] - exact[i]) / std::abs(exact[i]));
  EXPECT_LT(worst, 1e-6) << "worst relative error of f32 log_softmax against f64";
}

// q (1, 2, 3, 4), k and v (1, 2, 4, 4), f64; query 1 sees no key at all.
struct MaskedRowCase {
  Tensor q, k, v;
  Tensor hidden = tensor({0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 0}, {3, 4}, DType::b8);  // true = hidden
  MaskedRowCase() {
    Generator gen(8);
    q = randn({1, 2, 3, 4}, DType::f64, gen).requires_grad_();
    k = randn({1, 2, 4, 4}, DType::f64, gen).requires_grad_();
    v = randn({1, 2, 4, 4}, DType::f64, gen).requires_grad_();
  }
  // {out, dq, dk, dv} of f under the upstream gradient ones.
  std::vector<Tensor> run(const std::function<Tensor()>& f) const {
    for (const Tensor* t : {&q, &k, &v}) t->set_grad({});
    const Tensor out = f();
    out.backward(ones(out.shape(), DType::f64));
    return {out.detach(), q.grad(), k.grad(), v.grad()};
  }
  // {dq, dk, dv} of ⟨f(), u⟩ under create_graph for a random u, then the gradients of
  // ⟨(dq, dk, dv), w⟩ for a random w with respect to q, k, v and u: the second order.
  std::vector<Tensor> second_order(const std::function<Tensor()>& f) const {
    const Tensor out = f();
    Generator gen(9);
    const Tensor u = randn(out.shape(), DType::f64, gen).requires_grad_();
    const std::vector<Tensor> first = grad({out}, {q, k, v}, {u}, /*create_graph=*/true);
    Tensor projected = zeros({}, DType::f64);
    for (const Tensor& g : first) projected = add(projected, sum(mul(g, randn(g.shape(), DType::f64, gen))));
    std::vector<Tensor> all = grad({projected}, {q, k, v, u});
    all.insert(all.begin(), first.begin(), first.end());
    return all;
  }
  // PyTorch's way: softmax(masked_fill(q kᵀ / 2, hidden, -inf)) v.
  Tensor composed() const { return matmul(weights(), v); }
  // The same with the weights of the query that sees no key set to zero (MaskedRows::zero).
  Tensor composed_zero() const { return matmul(masked_fill(weights(), tensor({0, 1, 0}, {3, 1}, DType::b8), 0.0), v); }
  Tensor weights() const { return softmax(masked_fill(mul(matmul(q, k, false, true), 0.5), hidden, -kInf), -1); }
};

TEST(PyTorchDivergence, FullyMaskedAttentionRowKeepsNaNOutOfDkAndTheOtherQueries) {
  const MaskedRowCase c;
  const std::vector<Tensor> fused =
      c.run([&] { return scaled_dot_product_attention(c.q, c.k, c.v, {.attn_mask = logical_not(c.hidden)}).output; });
  const std::vector<Tensor> composed = c.run([&] { return c.composed(); });
  const char* names[] = {"output", "dq", "dk", "dv"};
  for (int i = 0; i < 4; ++i) expect_same_with_nan(fused[i], composed[i], 1e-12, names[i]);
  EXPECT_FALSE(any_nan(fused[1])) << "dq";  // the masked query's row is 0, as masked_fill's backward gives
  EXPECT_FALSE(any_nan(fused[2])) << "dk";
  EXPECT_TRUE(any_nan(fused[0])) << "MaskedRows::nan gives NaN for the masked query, as PyTorch";
}

TEST(PyTorchDivergence, MaskedRowsZeroGivesZerosAndNoNaNAnywhere) {
  const MaskedRowCase c;
  const std::vector<Tensor> zero = c.run([&] {
    return scaled_dot_product_attention(c.q, c.k, c.v,
                                        {.attn_mask = logical_not(c.hidden), .masked_rows = MaskedRows::zero})
        .output;
  });
  const std::vector<Tensor> composed = c.run([&] { return c.composed_zero(); });
  for (int i = 0; i < 4; ++i) {
    EXPECT_FALSE(any_nan(zero[i])) << i;
    expect_same_with_nan(zero[i], composed[i], 1e-12, "zero policy " + std::to_string(i));
  }
  for (double v : slice(zero[0], 2, 1, 2).to_vector()) EXPECT_EQ(v, 0.0);
}

// create_graph through the query that sees no key: both kernels, both policies, give what the
// composition gives at the second order too. dq and dk stay finite (zero in that query's row: the
// composition's masked_fill passes no gradient to a hidden score); under MaskedRows::zero nothing is
// NaN; under nan, dv's NaN reaches v's and u's second order, as in PyTorch (tools/golden/parity.py's
// second-order cases replay this against PyTorch).
TEST(PyTorchDivergence, SecondOrderThroughAFullyMaskedRowIsTheCompositions) {
  const MaskedRowCase c;
  const char* names[] = {"dq", "dk", "dv", "d(dq, dk, dv)/dq", "d/dk", "d/dv", "d/du"};
  const bool finite_under_nan[] = {true, true, false, true, true, false, false};  // what q and k get
  for (const MaskedRows policy : {MaskedRows::zero, MaskedRows::nan})
    for (const AttentionKernel kernel : {AttentionKernel::materialising, AttentionKernel::streaming}) {
      const AttentionOptions o{.attn_mask = logical_not(c.hidden), .masked_rows = policy, .kernel = kernel};
      const std::vector<Tensor> fused =
          c.second_order([&] { return scaled_dot_product_attention(c.q, c.k, c.v, o).output; });
      const bool zero = policy == MaskedRows::zero;
      const std::vector<Tensor> composed = c.second_order([&] { return zero ? c.composed_zero() : c.composed(); });
      const std::string what = std::string(zero ? "zero" : "nan") +
                               (kernel == AttentionKernel::streaming ? " streaming " : " materialising ");
      for (size_t i = 0; i < fused.size(); ++i) {
        expect_same_with_nan(fused[i], composed[i], 1e-12, what + names[i]);
        if (zero || finite_under_nan[i]) {
          EXPECT_FALSE(any_nan(fused[i])) << what << names[i];
        }
      }
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(fused[3].at({0, h, 1, j}), 0.0) << what << "the hidden query's row";
    }
}

TEST(PyTorchDivergence, AttnMaskTrueMeansTakesPartAsInPyTorch) {
  // torch.nn.functional.scaled_dot_product_attention: a b8 attn_mask is true where the key takes
  // part. Only key 2 takes part, so every query's output is v's row 2.
  Generator gen(4);
  const Tensor q = randn({1, 1, 3, 2}, DType::f64, gen), k = randn({1, 1, 4, 2}, DType::f64, gen);
  const Tensor v = randn({1, 1, 4, 2}, DType::f64, gen);
  const Tensor only_key_2 = tensor({0, 0, 1, 0}, {4}, DType::b8);
  const Tensor out = scaled_dot_product_attention(q, k, v, {.attn_mask = only_key_2}).output;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j) EXPECT_NEAR(out.at({0, 0, i, j}), v.at({0, 0, 2, j}), 1e-15);
  // key_padding_mask keeps nn.MultiheadAttention's sense: true = ignored.
  const Tensor padded =
      scaled_dot_product_attention(q, k, v, {.key_padding_mask = reshape(logical_not(only_key_2), {1, 4})}).output;
  expect_same_with_nan(padded, out, 1e-15, "key_padding_mask true = ignored");
}

TEST(PyTorchDivergence, WholeTensorMaxAndMinSplitTheGradientAmongTies) {
  // torch: x = [1, 3, 3, 2]; x.max().backward() → [0, 0.5, 0.5, 0]; x.min() → [1, 0, 0, 0].
  const Tensor x = tensor({1, 3, 3, 2, 1, 3}, {2, 3}, DType::f64).requires_grad_();
  max(x).backward();
  EXPECT_EQ(x.grad().to_vector(), (Values{0, 1.0 / 3, 1.0 / 3, 0, 0, 1.0 / 3}));
  x.set_grad({});
  min(x).backward();
  EXPECT_EQ(x.grad().to_vector(), (Values{0.5, 0, 0, 0, 0.5, 0}));
  x.set_grad({});
  max(x, 1).backward(ones({2}, DType::f64));  // per dim: the first arg-max, as torch.max(x, 1)
  EXPECT_EQ(x.grad().to_vector(), (Values{0, 1, 0, 0, 0, 1}));
  // NaN propagates, and the NaNs share the gradient (torch: max([1, nan, nan]) → nan, grad [0, .5, .5]).
  const Tensor n = tensor({1, NAN, NAN}, {3}, DType::f64).requires_grad_();
  const Tensor m = max(n);
  EXPECT_TRUE(std::isnan(m.item()));
  m.backward();
  EXPECT_EQ(n.grad().to_vector(), (Values{0, 0.5, 0.5}));
}

TEST(PyTorchDivergence, EmbeddingNegativePaddingIdxCountsFromTheEnd) {
  // torch: embedding([3, 1, 3], w (4, 2), padding_idx=-1).sum().backward() → rows 1: [1, 1], others 0.
  const Tensor w = tensor({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}, DType::f64).requires_grad_();
  const Tensor ids = tensor({3, 1, 3}, {3}, DType::i64);
  sum(embedding(w, ids, -1)).backward();
  EXPECT_EQ(w.grad().to_vector(), (Values{0, 0, 1, 1, 0, 0, 0, 0}));
  for (int64_t bad : {-5, 4}) {
    try {
      embedding(w, ids, bad);
      ADD_FAILURE() << "padding_idx " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("padding_idx"), std::string::npos) << e.what();
    }
  }
}

TEST(PyTorchDivergence, ChunkOfAnEmptyDimGivesTheRequestedCount) {
  // torch.chunk(torch.zeros(0, 3), 3, 0) → three (0, 3) pieces.
  const std::vector<Tensor> pieces = chunk(zeros({0, 3}), 3, 0);
  ASSERT_EQ(pieces.size(), 3u);
  for (const Tensor& p : pieces) EXPECT_EQ(p.shape(), (Shape{0, 3}));
  EXPECT_EQ(chunk(zeros({2, 0}), 4, 1).size(), 4u);
}

TEST(PyTorchDivergence, ScalarOnTheLeft) {
  const Tensor t = tensor({2, -4, 0.5}, {3}, DType::f64).requires_grad_();
  const Tensor q = 10.0 / t;
  EXPECT_EQ(q.to_vector(), (Values{5, -2.5, 20}));
  q.backward(ones({3}, DType::f64));
  EXPECT_EQ(t.grad().to_vector(), (Values{-2.5, -0.625, -40}));  // -10 / t²
  t.set_grad({});
  const Tensor r = 1.0 - t;
  EXPECT_EQ(r.to_vector(), (Values{-1, 5, 0.5}));
  r.backward(ones({3}, DType::f64));
  EXPECT_EQ(t.grad().to_vector(), (Values{-1, -1, -1}));
}

// ---- Edge values, as PyTorch 1.13 gives them.

TEST(EdgeValues, SoftmaxOfAllMinusInfOrAPlusInfIsNaN) {
  // torch.softmax([-inf, -inf, -inf]) → nan ×3; softmax([1, inf]) → [nan, nan]; log_softmax too.
  for (const Tensor& row : {tensor({-kInf, -kInf, -kInf}, {3}, DType::f64), tensor({1, kInf}, {2}, DType::f64)})
    for (const Tensor& y : {softmax(row, 0), log_softmax(row, 0), softmax(to(row, DType::f32), 0)})
      for (double v : y.to_vector()) EXPECT_TRUE(std::isnan(v));
  // A -inf beside finite values gets weight 0 (log-weight -inf).
  const Tensor some = tensor({0, -kInf}, {2}, DType::f64);
  EXPECT_EQ(softmax(some, 0).to_vector(), (Values{1, 0}));
  EXPECT_EQ(log_softmax(some, 0).to_vector(), (Values{0, -kInf}));
}

TEST(EdgeValues, ZeroOverZeroIsNaNAndNaNPropagatesThroughMaxMinClamp) {
  EXPECT_TRUE(std::isnan(div(zeros({}, DType::f64), zeros({}, DType::f64)).item()));
  const Tensor x = tensor({1, NAN, 2}, {3}, DType::f64);
  EXPECT_TRUE(std::isnan(max(x).item()));
  EXPECT_TRUE(std::isnan(min(x).item()));
  EXPECT_TRUE(std::isnan(max(x, 0).item()));
  EXPECT_TRUE(std::isnan(clamp(x, 0, 1).to_vector()[1]));
}

TEST(EdgeValues, ClampWithMinAboveMaxGivesMaxAndNoGradient) {
  // torch.clamp([0, 1, 2], min=1.5, max=0.5) → [0.5, 0.5, 0.5]; its gradient is 0.
  const Tensor x = tensor({0, 1, 2}, {3}, DType::f64).requires_grad_();
  const Tensor y = clamp(x, 1.5, 0.5);
  EXPECT_EQ(y.to_vector(), (Values{0.5, 0.5, 0.5}));
  y.backward(ones({3}, DType::f64));
  EXPECT_EQ(x.grad().to_vector(), (Values{0, 0, 0}));
}

// A mean over no elements is NaN (0/0, as PyTorch), and its gradient an empty tensor; differentiated
// again, Σ over no elements is 0, so the gradient with respect to the incoming gradient u is 0, not
// 0 · (1/0). torch: mse_loss(zeros(0, 3), zeros(0, 3)) → nan; grad(out, (x, t), u, create_graph=True)
// → two (0, 3) tensors; grad(their sum, u) → tensor(0.) (binary_cross_entropy_with_logits the same).
TEST(EdgeValues, MeanLossOverNoElementsHasAZeroSecondOrderGradient) {
  using Loss = Tensor (*)(const Tensor&, const Tensor&, Reduction);
  for (const Loss loss : {Loss(mse_loss), Loss(binary_cross_entropy_with_logits)}) {
    const Tensor x = zeros({0, 3}, DType::f64).requires_grad_(), t = zeros({0, 3}, DType::f64).requires_grad_();
    const Tensor u = full({}, 1.5, DType::f64).requires_grad_();
    const Tensor out = loss(x, t, Reduction::mean);
    EXPECT_TRUE(std::isnan(out.item()));
    const std::vector<Tensor> first = grad({out}, {x, t}, {u}, /*create_graph=*/true);
    EXPECT_EQ(first[0].shape(), Shape({0, 3}));
    EXPECT_EQ(first[1].shape(), Shape({0, 3}));
    const std::vector<Tensor> second = grad({add(sum(first[0]), sum(first[1]))}, {x, t, u});
    EXPECT_EQ(second[0].shape(), Shape({0, 3}));
    EXPECT_EQ(second[2].item(), 0.0);
  }
}

TEST(EdgeValues, ReductionsOverAnEmptyDim) {
  // torch: zeros(0, 3).sum(0) → [0, 0, 0]; .mean(0) → [nan ×3]; .max(0) raises.
  const Tensor e = zeros({0, 3}, DType::f64);
  EXPECT_EQ(sum(e, {0}).to_vector(), (Values{0, 0, 0}));
  for (double v : mean(e, {0}).to_vector()) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(sum(e).item(), 0.0);
  EXPECT_TRUE(std::isnan(mean(e).item()));
  EXPECT_THROW(max(e, 0), Error);
  EXPECT_THROW(max(e), Error);
}

}  // namespace
}  // namespace ag
