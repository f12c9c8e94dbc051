// layer_norm, the losses and dropout: forward values against PyTorch 1.13 (Debian's python3-torch)
// or hand-computed numbers, stability, ignore_index, reductions, masks and error messages.
// Their gradients are checked against finite differences by the registry suite (gradcheck_tests).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "engine/autograd.h"
#include "engine/kernels/dropout.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/dropout.h"
#include "engine/ops/loss.h"
#include "engine/ops/norm.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/threads.h"
#include "tests/test_util.h"

namespace ag {
namespace {

void expect_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-12) {
  const std::vector<double> got = t.to_vector();
  ASSERT_EQ(got.size(), expected.size()) << "shape " << shape_str(t.shape());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tol) << "at " << i;
}

const DType f64 = DType::f64;

// ---------------------------------------------------------------- layer_norm

TEST(LayerNorm, MatchesTorchWithWeightAndBias) {
  // torch.nn.functional.layer_norm(x, (3,), w, b) in float64, x, w, b as below.
  Tensor x = tensor({0.5, -1.0, 2.0, 3.0, 3.5, -0.25}, {2, 3}, f64);
  Tensor w = tensor({1.5, -0.5, 2.0}, {3}, f64);
  Tensor b = tensor({0.1, 0.2, -0.3}, {3}, f64);
  Tensor y = layer_norm(x, {3}, w, b);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  expect_values(
      y, {0.1, 0.8123703944645484, 2.1494815778581935, 0.9270687705397339, -0.2260657302780446, -3.107021281831822});
}

TEST(LayerNorm, MatchesTorchOverTwoTrailingDims) {
  // torch.nn.functional.layer_norm(x3, (2, 2)) in float64.
  Tensor x = tensor({1, 2, 4, -1, 0.5, 0.5, 2, -3}, {2, 2, 2}, f64);
  expect_values(layer_norm(x, {2, 2}),
                {-0.2773496714211404, 0.27734967142114075, 1.386748357105703, -1.3867483571057027, 0.27216512376861657,
                 0.27216512376861657, 1.0886604950744663, -1.6329907426116994});
}

TEST(LayerNorm, RowsHaveZeroMeanAndUnitVarianceInF32EvenAtALargeOffset) {
  // A one-pass E[x²] - E[x]² in f32 would lose every digit of the variance here.
  Tensor x = tensor({10000, 10001, 10002, 10003, -5, 5, -5, 5}, {2, 4});
  Tensor y = layer_norm(x, {4}, {}, {}, 0.0);
  EXPECT_EQ(y.dtype(), DType::f32);
  const double s = 1 / std::sqrt(1.25);  // population std of 0,1,2,3 is √1.25
  expect_values(y, {-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s, -1, 1, -1, 1}, 1e-6);
}

TEST(LayerNorm, RecordsItsNodeAndSkipsAbsentAffineInputs) {
  Tensor x = tensor({1, 2, 3, 4, 6, 9}, {2, 3}, f64).requires_grad_();
  Tensor y = layer_norm(x, {3});
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name, "LayerNormBackward");
  sum(mul(y, y)).backward();  // Σ xhat² is the constant (var / (var + eps)) · N: gradient ≈ 0
  expect_values(x.grad(), std::vector<double>(6, 0.0), 1e-4);
}

TEST(LayerNorm, SecondDerivativeMatchesTorch) {
  // x, w, b, v, u as below, float64:
  //   y = F.layer_norm(x, (3,), w, b); gx, gw = torch.autograd.grad((y * v).sum(), (x, w), create_graph=True)
  //   hx, hw = torch.autograd.grad((gx * u).sum(), (x, w))
  Tensor x = tensor({0.5, -1.0, 2.0, 3.0, 3.5, -0.25}, {2, 3}, f64).requires_grad_();
  Tensor w = tensor({1.5, -0.5, 2.0}, {3}, f64).requires_grad_();
  Tensor b = tensor({0.1, 0.2, -0.3}, {3}, f64).requires_grad_();
  Tensor v = tensor({0.3, -1.2, 0.7, 1.1, 0.4, -0.6}, {2, 3}, f64);
  Tensor u = tensor({-0.8, 0.5, 1.3, 0.2, -0.9, 0.6}, {2, 3}, f64);
  sum(mul(layer_norm(x, {3}, w, b), v)).backward({}, false, /*create_graph=*/true);
  const Tensor gx = x.grad();
  expect_values(gx, {-0.29938108173822364, 0.14968836356666904, 0.1496927181715546, 0.6744266228520588,
                     -0.5845007348357155, -0.08992588801634349});
  expect_values(w.grad(), {0.6065170983958049, 1.8105415309373516, 1.6994249367999141});
  x.set_grad({});
  w.set_grad({});
  sum(mul(gx, u)).backward();
  expect_values(x.grad(), {0.3265953664119829, 0.006352207288352792, -0.3329475737003358, -0.013150962574438416,
                           -0.15046196231168085, 0.16361292488611903});
  expect_values(w.grad(), {0.05903751089327369, -0.6613081051043204, 0.3483598575088068});
}

TEST(LayerNorm, BackwardIsAnOpOfItsOwn) {
  // The x, w, v of SecondDerivativeMatchesTorch: layer_norm_backward called with x's statistics gives
  // the same gx and w.grad, and db = Σ_rows v; under create_graph layer_norm's gradient is its node's.
  Tensor x = tensor({0.5, -1.0, 2.0, 3.0, 3.5, -0.25}, {2, 3}, f64).requires_grad_();
  Tensor w = tensor({1.5, -0.5, 2.0}, {3}, f64).requires_grad_();
  Tensor v = tensor({0.3, -1.2, 0.7, 1.1, 0.4, -0.6}, {2, 3}, f64);
  const LayerNormStatistics stats{tensor({0.5, 6.25 / 3}, {2, 1}, f64), tensor({1.5, 199.0 / 72}, {2, 1}, f64)};
  const LayerNormGradients d = layer_norm_backward(v, x, stats, w, {3});
  expect_values(d.input, {-0.29938108173822364, 0.14968836356666904, 0.1496927181715546, 0.6744266228520588,
                          -0.5845007348357155, -0.08992588801634349});
  expect_values(d.weight, {0.6065170983958049, 1.8105415309373516, 1.6994249367999141});
  expect_values(d.bias, {1.4, -0.8, 0.1});
  sum(mul(layer_norm(x, {3}, w), v)).backward({}, false, /*create_graph=*/true);
  ASSERT_NE(x.grad().grad_fn(), nullptr);
  EXPECT_EQ(x.grad().grad_fn()->name, "LayerNormBackwardBackward");
  x.set_grad({});  // a gradient with a graph holds x through its AccumulateGrad node: a cycle
  w.set_grad({});
}

// Past one block of rows the affine gradients sum in row blocks as sum does (Note [column sums in
// row blocks]): db is sum(v, {0}) bit for bit (in f64, where the order shows), and dw and db are the
// same bits at 1 and 2 threads.
TEST(LayerNorm, AffineGradientsSumAsSumDoesAtAnyThreadCount) {
  Generator gen(3);
  const Tensor x = randn({300, 70}, f64, gen), w = randn({70}, f64, gen), v = randn({300, 70}, f64, gen);
  const Tensor mean_x = mean(x, {1}, true), centred = sub(x, mean_x);
  const LayerNormStatistics stats{mean_x, mean(mul(centred, centred), {1}, true)};
  const int threads = get_num_threads();
  set_num_threads(1);
  const LayerNormGradients one = layer_norm_backward(v, x, stats, w, {70});
  set_num_threads(2);
  const LayerNormGradients two = layer_norm_backward(v, x, stats, w, {70});
  set_num_threads(threads);
  EXPECT_EQ(one.bias.to_vector(), sum(v, {0}).to_vector());
  EXPECT_EQ(two.bias.to_vector(), one.bias.to_vector());
  EXPECT_EQ(two.weight.to_vector(), one.weight.to_vector());
}

TEST(LayerNorm, BackwardRejectsBadArguments) {
  const Tensor x = zeros({2, 3}), stat = zeros({2, 1});
  expect_error(
      [&] {
        layer_norm_backward(zeros({3, 2}), x, {stat, stat}, {}, {3});
      },
      {"layer_norm_backward", "grad", "(3,2)", "(2,3)"});
  expect_error(
      [&] {
        layer_norm_backward(x, x, {zeros({2}), stat}, {}, {3});
      },
      {"layer_norm_backward", "mean", "(2)", "(2,1)"});
  expect_error(
      [&] {
        layer_norm_backward(x, x, {stat, Tensor()}, {}, {3});
      },
      {"layer_norm_backward", "variance", "undefined"});
  expect_error([&] { layer_norm_backward(x, x, {stat, stat}, {}, {2}); }, {"layer_norm_backward", "(2)", "trailing"});
}

TEST(LayerNorm, RejectsBadArguments) {
  Tensor x = zeros({2, 3, 4});
  expect_error([&] { layer_norm(x, {3}); }, {"layer_norm", "(3)", "(2,3,4)", "trailing"});
  expect_error([&] { layer_norm(x, {2, 3, 4, 1}); }, {"layer_norm", "(2,3,4,1)", "(2,3,4)"});
  expect_error([&] { layer_norm(x, {}); }, {"layer_norm", "at least one dim"});
  expect_error([&] { layer_norm(x, {3, 4}, zeros({4})); }, {"layer_norm", "weight", "(4)", "(3,4)"});
  expect_error([&] { layer_norm(x, {4}, {}, zeros({4}, f64)); }, {"layer_norm", "bias", "f64", "f32"});
  expect_error([&] { layer_norm(zeros({2, 4}, DType::i64), {4}); }, {"layer_norm", "i64", "floating"});
  expect_error([&] { layer_norm(x, {4}, {}, {}, -1.0); }, {"layer_norm", "eps"});
}

// ---------------------------------------------------------------- losses

TEST(Loss, MseReductions) {
  // Hand-computed: squared differences (1, 0, 4, 9).
  Tensor input = tensor({1, 2, 3, 4}, {2, 2}, f64);
  Tensor target = tensor({0, 2, 5, 1}, {2, 2}, f64);
  Tensor none = mse_loss(input, target, Reduction::none);
  EXPECT_EQ(none.shape(), (Shape{2, 2}));
  expect_values(none, {1, 0, 4, 9});
  Tensor mean = mse_loss(input, target);
  EXPECT_EQ(mean.shape(), Shape{});
  expect_values(mean, {3.5});
  expect_values(mse_loss(input, target, Reduction::sum), {14});
}

TEST(Loss, MseGradientsReachInputAndTarget) {
  Tensor input = tensor({1, 2, 3, 4}, {4}, f64).requires_grad_();
  Tensor target = tensor({0, 2, 5, 1}, {4}, f64).requires_grad_();
  Tensor loss = mse_loss(input, target);
  EXPECT_EQ(loss.grad_fn()->name, "MseLossBackward");
  loss.backward();
  expect_values(input.grad(), {0.5, 0, -1, 1.5});  // 2 (x - y) / 4
  expect_values(target.grad(), {-0.5, 0, 1, -1.5});
}

TEST(Loss, MseOfNothingIsNaNForMeanAndZeroForSum) {
  EXPECT_TRUE(std::isnan(mse_loss(zeros({0}), zeros({0})).item()));  // as torch
  EXPECT_EQ(mse_loss(zeros({0}), zeros({0}), Reduction::sum).item(), 0.0);
}

// A long reduced loss sums in sum's fixed chunks on every thread: in f64 its bits are sum's over the
// unreduced losses, the same at 1 and 2 threads, and within rounding of a long double sum.
TEST(Loss, LongSumsAreSumsBitsAtAnyThreadCount) {
  Generator gen(5);
  const int64_t n = 3 * (int64_t{1} << 16) + 17;  // three whole chunks and a tail
  const Tensor input = randn({n}, f64, gen), target = randn({n}, f64, gen);
  const int threads = get_num_threads();
  set_num_threads(1);
  const double one = mse_loss(input, target, Reduction::sum).item();
  set_num_threads(2);
  const double two = mse_loss(input, target, Reduction::sum).item();
  set_num_threads(threads);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, sum(mse_loss(input, target, Reduction::none)).item());
  long double reference = 0;
  const std::vector<double> x = input.to_vector(), y = target.to_vector();
  for (int64_t i = 0; i < n; ++i) reference += static_cast<long double>(x[i] - y[i]) * (x[i] - y[i]);
  EXPECT_NEAR(one, static_cast<double>(reference), 1e-12 * static_cast<double>(reference));
  EXPECT_EQ(mse_loss(input, target).item(), one / static_cast<double>(n));
}

TEST(Loss, BceWithLogitsMatchesTorch) {
  // F.binary_cross_entropy_with_logits(lg, tg, reduction=r) in float64.
  Tensor logits = tensor({0.5, -1.5, 2.0, -0.25}, {4}, f64).requires_grad_();
  Tensor target = tensor({1.0, 0.0, 0.3, 0.8}, {4}, f64).requires_grad_();
  expect_values(binary_cross_entropy_with_logits(logits, target, Reduction::none),
                {0.4740769841801067, 0.20141327798275246, 1.5269280110429726, 0.7759394198788436});
  expect_values(binary_cross_entropy_with_logits(logits, target, Reduction::sum), {2.978357693084676});
  Tensor loss = binary_cross_entropy_with_logits(logits, target);
  expect_values(loss, {0.744589423271169});
  EXPECT_EQ(loss.grad_fn()->name, "BinaryCrossEntropyWithLogitsBackward");
  loss.backward();  // and the gradients torch's backward gives
  expect_values(logits.grad(), {-0.09438516719953635, 0.04560638095158909, 0.1451992694944706, -0.09054412522144953});
  expect_values(target.grad(), {-0.125, 0.375, -0.5, 0.0625});
}

TEST(Loss, BceWithLogitsIsStableAtHugeLogits) {
  for (DType dtype : {DType::f32, f64}) {
    Tensor logits = tensor({1000, -1000, 1000, -1000}, {4}, dtype).requires_grad_();
    Tensor target = tensor({1, 0, 0, 1}, {4}, dtype);
    Tensor loss = binary_cross_entropy_with_logits(logits, target, Reduction::none);
    expect_values(loss, {0, 0, 1000, 1000});  // right: 0; confidently wrong: |x|
    sum(loss).backward();
    expect_values(logits.grad(), {0, 0, 1, -1});  // σ(x) - y
  }
}

TEST(Loss, CrossEntropyMatchesTorchWithIgnoreIndex) {
  // F.cross_entropy(cx, ct, reduction=r) in float64, ct = [1, -100, 3] (row 1 ignored).
  Tensor logits = tensor({1, 2, 0.5, -1, 0, 0, 0, 0, 3, -2, 1, 0.5}, {3, 4}, f64).requires_grad_();
  Tensor target = tensor({1, -100, 3}, {3}, DType::i64);
  Tensor none = cross_entropy(logits, target, -100, Reduction::none);
  EXPECT_EQ(none.shape(), Shape{3});
  expect_values(none, {0.49518189808585605, 0.0, 2.7022534476793516});
  expect_values(cross_entropy(logits, target, -100, Reduction::sum), {3.1974353457652076});
  Tensor loss = cross_entropy(logits, target);  // the mean over the 2 rows not ignored
  expect_values(loss, {1.5987176728826038});
  EXPECT_EQ(loss.grad_fn()->name, "CrossEntropyBackward");
  loss.backward();
  expect_values(logits.grad(),
                {0.11210390902410057, -0.19526998120056144, 0.06799445789675276, 0.015171614279708113, 0, 0, 0, 0,
                 0.4084439316850329, 0.002752073563791838, 0.055276875180869614, -0.46647288042969426});
  // ignore_index may be a real class: F.cross_entropy(cx, [1, 0, 3], ignore_index=0).
  expect_values(cross_entropy(logits, tensor({1, 0, 3}, {3}, DType::i64), 0), {1.5987176728826038});
}

TEST(Loss, CrossEntropyWithEveryRowIgnoredIsNaNForMeanWithZeroGradient) {
  // As torch 1.13: mean → nan, sum → 0, none → zeros; the gradient is zero in every case.
  Tensor logits = tensor({1, 2, 3, 4}, {2, 2}, f64).requires_grad_();
  Tensor target = tensor({-100, -100}, {2}, DType::i64);
  Tensor loss = cross_entropy(logits, target);
  EXPECT_TRUE(std::isnan(loss.item()));
  loss.backward();
  expect_values(logits.grad(), {0, 0, 0, 0});
  expect_values(cross_entropy(logits, target, -100, Reduction::sum), {0});
  expect_values(cross_entropy(logits, target, -100, Reduction::none), {0, 0});
}

TEST(Loss, CrossEntropyIsStableAtHugeLogits) {
  Tensor logits = tensor({1000, 0, -1000, 1000, 0, -1000}, {2, 3});
  expect_values(cross_entropy(logits, tensor({0, 2}, {2}, DType::i64), -100, Reduction::none), {0, 2000});
}

// f32 rows take their exponentials in f32, eight lanes at a time (engine/kernels/loss.cpp); f64 rows
// in double. Rows of 83 logits (a charlm's vocabulary: ten lanes' worth and a tail of three), spread
// over ±30, one row with masked (-inf) logits, with and without label smoothing: the f32 losses are
// the f64 losses of the same values to within f32's rounding.
TEST(Loss, CrossEntropyInF32AgreesWithF64OverWideRows) {
  Generator gen(5);
  Tensor logits = mul(randn({4, 83}, DType::f32, gen), 10.0);
  for (int64_t j : {0, 40, 81}) logits.set({2, j}, -INFINITY);  // smoothed: an infinite loss
  logits.set({2, 82}, -200.0);                                  // e^-200: below f32's exponentials
  logits.set({3, 82}, 45.0);                                    // the largest logit in the tail
  const Tensor target = tensor({82, 7, 1, 82}, {4}, DType::i64);
  for (double smoothing : {0.0, 0.1}) {
    const std::vector<double> in_f32 = cross_entropy(logits, target, -100, Reduction::none, smoothing).to_vector();
    const std::vector<double> in_f64 =
        cross_entropy(to(logits, f64), target, -100, Reduction::none, smoothing).to_vector();
    for (size_t r = 0; r < in_f64.size(); ++r) {
      if (std::isinf(in_f64[r])) {
        EXPECT_EQ(in_f32[r], in_f64[r]) << "row " << r << ", smoothing " << smoothing;
      } else {
        EXPECT_NEAR(in_f32[r], in_f64[r], 4e-7 * std::max(1.0, std::abs(in_f64[r])))
            << "row " << r << ", smoothing " << smoothing;
      }
    }
  }
}

TEST(Loss, SecondDerivativesMatchTorch) {
  // float64, x and t as in CrossEntropyMatchesTorchWithIgnoreIndex, u as below:
  //   gx, = torch.autograd.grad(F.cross_entropy(x, t), (x,), create_graph=True)
  //   torch.autograd.grad((gx * u).sum(), (x,))
  Tensor x = tensor({1, 2, 0.5, -1, 0, 0, 0, 0, 3, -2, 1, 0.5}, {3, 4}, f64).requires_grad_();
  Tensor u = tensor({-0.8, 0.5, 1.3, 0.2, -0.9, 0.6, 0.1, 0.2, 0.3, -0.4, 0.5, -0.6}, {3, 4}, f64);
  cross_entropy(x, tensor({1, -100, 3}, {3}, DType::i64)).backward({}, false, true);
  const Tensor gx = x.grad();
  x.set_grad({});
  sum(mul(gx, u)).backward();
  expect_values(x.grad(),
                {-0.1242355699186171, 0.05844173228124006, 0.06743567940066697, -0.0016418417632899334, 0, 0, 0, 0,
                 0.017191800516965092, -0.0018106140539521256, 0.01338203222848474, -0.028763218691497745});
  // lg, tg as in BceWithLogitsMatchesTorch, a as below:
  //   g1, g2 = torch.autograd.grad(F.binary_cross_entropy_with_logits(lg, tg, reduction="sum"), (lg, tg),
  //                                create_graph=True)
  //   torch.autograd.grad((g1 * a).sum() + (g2 * a).sum(), (lg, tg))
  Tensor logits = tensor({0.5, -1.5, 2.0, -0.25}, {4}, f64).requires_grad_();
  Tensor target = tensor({1.0, 0.0, 0.3, 0.8}, {4}, f64).requires_grad_();
  Tensor a = tensor({0.7, -0.2, 0.4, 1.1}, {4}, f64);
  binary_cross_entropy_with_logits(logits, target, Reduction::sum).backward({}, false, true);
  const Tensor g1 = logits.grad(), g2 = target.grad();
  logits.set_grad({});
  target.set_grad({});
  add(sum(mul(g1, a)), sum(mul(g2, a))).backward();
  expect_values(logits.grad(), {-0.5354974014588838, 0.17017070958593344, -0.35800256583859735, -0.8292525089886419});
  expect_values(target.grad(), {-0.7, 0.2, -0.4, -1.1});
}

TEST(Loss, RejectsBadArguments) {
  Tensor logits = zeros({3, 4});
  expect_error(
      [&] {
        cross_entropy(logits, tensor({0, 4, 1}, {3}, DType::i64));
      },
      {"cross_entropy", "target 4 at row 1", "[0, 4)"});
  expect_error([&] { cross_entropy(logits, tensor({0, 1, -1}, {3}, DType::i64)); }, {"target -1 at row 2"});
  expect_error([&] { cross_entropy(logits, zeros({3})); }, {"cross_entropy", "i64", "f32"});
  expect_error([&] { cross_entropy(logits, zeros({2}, DType::i64)); }, {"cross_entropy", "(3,4)", "(2)"});
  expect_error([&] { cross_entropy(zeros({4}), zeros({1}, DType::i64)); }, {"cross_entropy", "(N, C)", "(4)"});
  expect_error(
      [&] {
        cross_entropy(zeros({3, 4}, DType::i64), zeros({3}, DType::i64));
      },
      {"cross_entropy", "floating", "i64"});
  expect_error([&] { mse_loss(zeros({3}), zeros({1, 3})); }, {"mse_loss", "(3)", "(1,3)", "same shape"});
  expect_error([&] { mse_loss(zeros({3}), zeros({3}, f64)); }, {"mse_loss", "f32", "f64"});
  expect_error(
      [&] {
        binary_cross_entropy_with_logits(zeros({2, 2}), zeros({4}));
      },
      {"binary_cross_entropy_with_logits", "(2,2)", "(4)"});
  expect_error([&] { binary_cross_entropy_with_logits(zeros({2}), Tensor()); }, {"target", "undefined"});
}

// ---------------------------------------------------------------- dropout

TEST(Dropout, KeepsAboutOneMinusPAndScalesTheSurvivors) {
  const double p = 0.3;
  Tensor x = rand({100000});
  Generator gen(1);
  Tensor y = dropout(x, p, true, gen);
  const std::vector<double> xs = x.to_vector(), ys = y.to_vector();
  int64_t kept = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (ys[i] == 0 && xs[i] != 0) continue;
    ++kept;
    EXPECT_NEAR(ys[i], xs[i] / (1 - p), 1e-6 * (1 + xs[i])) << "at " << i;
  }
  EXPECT_NEAR(static_cast<double>(kept) / 100000, 1 - p, 0.01);  // σ ≈ 0.0015
}

TEST(Dropout, SameSeedSameMaskBitForBit) {
  Tensor x = randn({64, 33}, f64);
  Generator a(42), b(42), c(43);
  const std::vector<double> ya = dropout(x, 0.5, true, a).to_vector();
  const std::vector<double> yb = dropout(x, 0.5, true, b).to_vector();
  const std::vector<double> yc = dropout(x, 0.5, true, c).to_vector();
  EXPECT_EQ(ya, yb);
  EXPECT_NE(ya, yc);
  // The generator advances: the next call draws another mask.
  EXPECT_NE(dropout(x, 0.5, true, a).to_vector(), ya);
}

// The mask kernel draws many elements at once; each element must be what drawing uniform() one
// by one gives (kept when the draw is >= p), for both dtypes, lengths around the vector widths,
// and p with p·2⁵³ an integer (0.25) and half-way between two (0.25 + 2⁻⁵⁴).
TEST(Dropout, MaskIsTheOneByOneDrawsOfTheGenerator) {
  for (const DType dtype : {DType::f32, f64})
    for (const int64_t n : {1, 7, 8, 17, 1000, 5001})  // 5001: the threads split it
      for (const double p : {0.0, 0.1, 0.3, 0.5, 0.7, 1.0, 0.25, 0.25 + 0x1p-54})
        for (const uint64_t seed : {0, 9}) {
          Generator gen(seed), one_by_one(seed);
          const std::vector<double> mask = dropout_mask({n}, dtype, p, gen).to_vector();
          const double scale =
              p == 1 ? 0 : static_cast<double>(dtype == DType::f32 ? static_cast<float>(1 / (1 - p)) : 1 / (1 - p));
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(mask[i], one_by_one.uniform() >= p ? scale : 0.0)
                << dtype_name(dtype) << " n " << n << " p " << p << " seed " << seed << " at " << i;
          EXPECT_EQ(gen.state().counter, one_by_one.state().counter);
        }
}

// Data parallelism: under a BatchShardGuard, the shards' masks are the rows of the whole batch's
// mask, the generator ends where the whole batch leaves it, and a row's mask does not depend on
// the other rows' padding (the padded dimension comes first within a row).
TEST(Dropout, ShardsOfABatchDrawTheRowsOfTheWholeBatchsMask) {
  const Tensor x = ones({6, 2, 3}, f64);
  auto masked = [&](int64_t first, int64_t rows, const Tensor& input) {
    Generator gen(7);
    BatchShardGuard guard(6);
    guard.select(first, rows);
    Tensor out = dropout(input, 0.5, true, gen);
    return std::pair{out, gen.state().counter};
  };
  const auto [whole, whole_end] = masked(0, 6, x);
  for (const auto& [first, rows] : std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 3}, {1, 4}, {6, 0}}) {
    const auto [part, part_end] = masked(first, rows, narrow(x, 0, first, rows));
    EXPECT_EQ(part.to_vector(), narrow(whole, 0, first, rows).to_vector()) << "rows " << first << "+" << rows;
    EXPECT_EQ(part_end, whole_end);
  }
  const auto [longer, _] = masked(0, 6, ones({6, 5, 3}, f64));  // padded to 5 instead of 2
  EXPECT_EQ(narrow(longer, 1, 0, 2).to_vector(), whole.to_vector());
  BatchShardGuard guard(6);
  guard.select(0, 2);
  Generator gen(7);
  expect_error([&] { dropout(ones({3, 2}), 0.5, true, gen); }, {"batch-major", "2 rows", "(3,2)"});
  expect_error([&] { guard.select(4, 3); }, {"rows [4, 7)", "global batch of 6"});
}

// Micro-batches: one process runs the parts of a batch one after the other, each drawing the masks
// of one forward (two dropouts, from two generators here). Each part's masks are the rows of the
// whole batch's, whatever the split, and the generators end where the whole batch leaves them.
TEST(Dropout, MicroBatchesInOneProcessDrawTheRowsOfTheWholeBatchsMasks) {
  const Tensor x = ones({5, 2, 3}, f64);
  // The two masks of each part, concatenated over the parts, and where the generators end.
  auto forward_in_parts = [&](const std::vector<int64_t>& cuts) {
    Generator a(3), b(4);
    BatchShardGuard batch(5);
    std::vector<Tensor> first_masks, second_masks;
    for (size_t part = 0; part + 1 < cuts.size(); ++part) {
      batch.select(cuts[part], cuts[part + 1] - cuts[part]);
      const Tensor rows = narrow(x, 0, cuts[part], cuts[part + 1] - cuts[part]);
      first_masks.push_back(dropout(rows, 0.5, true, a));
      second_masks.push_back(dropout(dropout(rows, 0.3, true, b), 0.4, true, a));
    }
    return std::tuple{cat(first_masks, 0).to_vector(), cat(second_masks, 0).to_vector(), a.state().counter,
                      b.state().counter};
  };
  const auto whole = forward_in_parts({0, 5});
  for (const std::vector<int64_t>& cuts : std::vector<std::vector<int64_t>>{{0, 2, 5}, {0, 1, 2, 3, 4, 5}, {0, 4, 5}})
    EXPECT_EQ(forward_in_parts(cuts), whole) << cuts.size() - 1 << " parts, the first of " << cuts[1] << " rows";
}

// Attention weights (B, H, T, S) in a data-parallel step: weight (h, i, j) of row r is the draw at
// place shell(i, j)·H + h of row r's stream, the pairs (i, j) enumerated here shell by shell (max(i, j)
// = 0, 1, …; in each, (m, 0) … (m, m−1), then (0, m) … (m, m)); so padding T or S, or taking a shard
// of the rows, leaves every weight's mask as it was. Outside a step it is dropout's flat mask.
TEST(Dropout, AttentionWeightsDrawByTheirPlaceNotTheirPadding) {
  constexpr int64_t B = 3, H = 2, T = 4, S = 5;
  constexpr double p = 0.5;
  std::map<std::pair<int64_t, int64_t>, uint64_t> shell;
  for (int64_t m = 0, next = 0; m < 9; ++m) {
    for (int64_t j = 0; j < m; ++j) shell[{m, j}] = next++;
    for (int64_t i = 0; i <= m; ++i) shell[{i, m}] = next++;
  }
  auto mask = [&](int64_t first, int64_t rows, int64_t queries, int64_t keys, DType dtype = f64) {
    Generator gen(7);
    BatchShardGuard guard(B);
    guard.select(first, rows);
    return attention_dropout_mask({rows, H, queries, keys}, dtype, p, gen);
  };
  const Tensor whole = mask(0, B, T, S);
  EXPECT_EQ(mask(0, B, T, S, DType::f32).to_vector(), whole.to_vector());  // the f32 kernel draws the same
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < S; ++j) {
          Generator draw(7);
          draw.skip(static_cast<uint64_t>(b) * kDrawsPerRow + shell[{i, j}] * H + static_cast<uint64_t>(h));
          ASSERT_EQ(whole.at({b, h, i, j}), draw.uniform() >= p ? 2.0 : 0.0) << b << "," << h << "," << i << "," << j;
        }
  const Tensor padded = mask(0, B, T + 3, S + 4);
  EXPECT_EQ(narrow(narrow(padded, 2, 0, T), 3, 0, S).to_vector(), whole.to_vector());
  EXPECT_EQ(mask(1, 2, T, S).to_vector(), narrow(whole, 0, 1, 2).to_vector());
  Generator a(7), b(7);
  EXPECT_EQ(attention_dropout_mask({B, H, T, S}, f64, p, a).to_vector(),
            dropout_mask({B, H, T, S}, f64, p, b).to_vector());
  BatchShardGuard guard(1);
  guard.select(0, 1);
  expect_error([&] { attention_dropout_mask({1, 2, 70000, 1}, DType::f32, p, a); }, {"draws", "(1,2,70000,1)"});
  expect_error([&] { attention_dropout_mask({1, 4, 5}, DType::f32, p, a); }, {"(B, H, T, S)", "(1,4,5)"});
}

TEST(Dropout, EvalAndPZeroAreTheIdentity) {
  Tensor x = randn({4, 5}).requires_grad_();
  Generator gen(3);
  const Generator::State before = gen.state();
  Tensor eval = dropout(x, 0.5, false, gen);
  Tensor p0 = dropout(x, 0.0, true, gen);
  EXPECT_EQ(eval.impl(), x.impl());  // the same tensor, no node
  EXPECT_EQ(p0.impl(), x.impl());
  EXPECT_EQ(gen.state().counter, before.counter);  // nothing drawn
}

TEST(Dropout, GradientIsTheScaledMask) {
  Tensor x = full({1000}, 2.0, f64).requires_grad_();
  Generator gen(9);
  Tensor y = dropout(x, 0.2, true, gen);
  EXPECT_EQ(y.grad_fn()->name, "DropoutBackward");
  sum(y).backward();
  const std::vector<double> ys = y.to_vector(), gs = x.grad().to_vector();
  for (size_t i = 0; i < ys.size(); ++i) EXPECT_EQ(gs[i], ys[i] == 0 ? 0.0 : 1.25) << "at " << i;
}

TEST(Dropout, POneGivesZerosAndZeroGradient) {
  Tensor x = randn({3, 4}, f64).requires_grad_();
  Generator gen(0);
  Tensor y = dropout(x, 1.0, true, gen);
  expect_values(y, std::vector<double>(12, 0.0), 0.0);
  sum(y).backward();
  expect_values(x.grad(), std::vector<double>(12, 0.0), 0.0);
}

// add_dropout(r, x) is add(r, dropout(x)) drawn and applied in one pass: the same output,
// gradients and next draw of the generator, bit for bit, for both dtypes, on tensors small enough for one
// thread and large enough to be split between threads, inside and outside a data-parallel step, and
// with PyTorch's generator (the next draw compared, not the counter). A residual that broadcasts takes the two ops
// themselves.
TEST(Dropout, AddDropoutIsAddOfDropoutBitForBit) {
  struct Case {
    Shape residual, x;
    int64_t shard_first, shard_rows;  // shard_rows 0: no BatchShardGuard
    bool torch;
  };
  for (const DType dtype : {DType::f32, f64})
    for (const Case& c : std::vector<Case>{{{3, 4}, {3, 4}, 0, 0, false},
                                           {{4, 700, 3}, {4, 700, 3}, 0, 0, false},
                                           {{3, 900, 5}, {3, 900, 5}, 2, 3, false},
                                           {{700, 3}, {700, 3}, 0, 0, true},
                                           {{5}, {2, 5}, 0, 0, false}}) {
      const Tensor r = randn(c.residual, dtype), x = randn(c.x, dtype), g = randn(c.x, dtype);
      // One side's output, gradients and where its generator ends.
      auto run = [&](bool fused) {
        Generator gen(11, c.torch ? RngStyle::torch : RngStyle::attograd);
        std::optional<BatchShardGuard> step;
        if (c.shard_rows > 0) step.emplace(c.shard_first + c.shard_rows + 1).select(c.shard_first, c.shard_rows);
        Tensor rr = r.detach().requires_grad_(), xx = x.detach().requires_grad_();
        Tensor out = fused ? add_dropout(rr, xx, 0.3, true, gen) : add(rr, dropout(xx, 0.3, true, gen));
        out.backward(broadcast_to(g, out.shape()));
        return std::tuple{out.to_vector(), rr.grad().to_vector(), xx.grad().to_vector(), gen.next_u64()};
      };
      EXPECT_EQ(run(true), run(false)) << dtype_name(dtype) << " x " << shape_str(c.x) << " shard rows " << c.shard_rows
                                       << (c.torch ? " torch" : "");
    }
  Tensor x = randn({3, 4}).requires_grad_();
  Generator gen(0);
  Tensor fused = add_dropout(zeros({3, 4}), x, 0.5, true, gen);
  EXPECT_EQ(fused.grad_fn()->name, "AddDropoutBackward");
  expect_error([&] { add_dropout(x, x, 2.0, true, gen); }, {"dropout", "[0, 1]", "2"});
  expect_error([&] { add_dropout(x, zeros({3}, DType::i64), 0.5, true, gen); }, {"dropout", "i64", "floating"});
}

// The backward keeps a b8 mask of the kept elements (dropout_backward); its gradient is, bit for bit,
// g ⊙ the scaled mask dropout_mask draws from the same seed, in both styles (PyTorch's divides the
// scale in the dtype), with p = 1, and on a tensor the threads split.
TEST(Dropout, GradientIsGradTimesTheScaledMaskBitForBit) {
  for (const DType dtype : {DType::f32, f64})
    for (const RngStyle style : {RngStyle::attograd, RngStyle::torch})
      for (const double p : {0.1, 0.3, 1.0})
        for (const int64_t n : {17, 5001}) {
          const Tensor g = randn({n}, dtype);
          Tensor x = randn({n}, dtype).requires_grad_();
          Generator a(21, style), b(21, style);
          dropout(x, p, true, a).backward(g);
          const Tensor expected = mul(g, dropout_mask({n}, dtype, p, b));
          EXPECT_EQ(x.grad().to_vector(), expected.to_vector())
              << dtype_name(dtype) << (style == RngStyle::torch ? " torch" : "") << " p " << p << " n " << n;
        }
}

TEST(Dropout, RejectsBadArguments) {
  Tensor x = zeros({3});
  Generator gen(0);
  expect_error([&] { dropout(x, -0.1, true, gen); }, {"dropout", "[0, 1]", "-0.1"});
  expect_error([&] { dropout(x, 1.5, false, gen); }, {"dropout", "1.5"});
  expect_error([&] { dropout(x, NAN, true, gen); }, {"dropout", "nan"});
  expect_error([&] { dropout(zeros({3}, DType::i64), 0.5, true, gen); }, {"dropout", "i64", "floating"});
}

}  // namespace
}  // namespace ag
