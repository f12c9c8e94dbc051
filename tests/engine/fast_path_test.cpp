// The f32 fast path (oneDNN above the size thresholds, vectorised loops below) against the f64
// reference kernels on the same inputs: matmul in every transposition and batch layout, softmax
// and log_softmax, the fused softmax backward, layer_norm forward and backward; odd sizes, size
// 1 and large. Plus the primitive cache: no primitive is created in the steady state.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <vector>

#include "engine/autograd.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/linear.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/onednn.h"
#include "engine/kernels/softmax.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/mask.h"
#include "engine/ops/matmul.h"
#include "engine/ops/norm.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/softmax.h"
#include "engine/threads.h"

namespace ag {
namespace {

// Max |f32 − f64| over the elements, scaled by `scale`, must stay under tol; prints OK / NOT OK.
void expect_close(const Tensor& f32, const Tensor& f64, double tol, const std::string& what) {
  ASSERT_EQ(f32.shape(), f64.shape()) << what;
  const std::vector<double> a = f32.to_vector(), b = f64.to_vector();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(b[i]) || std::isinf(b[i])) {
      EXPECT_TRUE(std::isnan(b[i]) ? std::isnan(a[i]) : a[i] == b[i]) << what << " at " << i;
      continue;
    }
    worst = std::max(worst, std::abs(a[i] - b[i]) / (1 + std::abs(b[i])));
  }
  std::printf("%s %s max rel diff %.3g\n", worst <= tol ? "OK" : "NOT OK", what.c_str(), worst);
  EXPECT_LE(worst, tol) << what;
}

// The same random f64 values as an f64 tensor and an f32 copy.
std::pair<Tensor, Tensor> random_pair(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  Tensor x64 = randn(shape, DType::f64, gen);
  return {x64, to(x64, DType::f32)};
}

struct MatmulCase {
  Shape a, b;
  bool ta, tb;
};

TEST(FastPath, MatmulAgreesWithF64) {
  const std::vector<MatmulCase> cases = {{{64, 64}, {64, 64}, false, false},
                                         {{33, 65}, {65, 17}, false, false},
                                         {{65, 33}, {65, 17}, true, false},
                                         {{33, 65}, {17, 65}, false, true},
                                         {{65, 33}, {17, 65}, true, true},
                                         {{300, 1}, {1, 300}, false, false},
                                         {{1, 4096}, {4096, 3}, false, false},
                                         {{4096}, {4096, 5}, false, false},
                                         {{4, 33, 65}, {4, 65, 17}, false, false},
                                         {{4, 65, 33}, {4, 17, 65}, true, true},
                                         {{2, 1, 40, 30}, {3, 30, 50}, false, false},
                                         {{5, 40, 30}, {50, 30}, false, true},
                                         {{5, 30, 40}, {30, 50}, true, false},
                                         {{30, 50}, {5, 40, 50}, false, true},
                                         {{2, 3, 1, 1}, {2, 3, 1, 1}, false, false},
                                         {{257, 129}, {129, 255}, false, false}};
  for (const MatmulCase& c : cases) {
    auto [a64, a32] = random_pair(c.a, 1);
    auto [b64, b32] = random_pair(c.b, 2);
    const int64_t k = c.ta ? c.a[c.a.size() - 2] : c.a.back();
    expect_close(matmul(a32, b32, c.ta, c.tb), matmul(a64, b64, c.ta, c.tb), 2e-6 * std::sqrt(k) + 1e-6,
                 "matmul " + shape_str(c.a) + (c.ta ? "ᵀ" : "") + " @ " + shape_str(c.b) + (c.tb ? "ᵀ" : ""));
  }
}

// Note [products split by thread] (engine/kernels/matmul.h): a batch of 15 matrices (7 and 8 to
// the two threads) and 200 rows (96 and 104), every transposition, f32 and bf16 operands, against
// f64, and the same bits on one thread as on two.
TEST(FastPath, ProductsSplitByThreadAgreeWithF64AndWithOneThread) {
  const int threads = get_num_threads();
  const auto on_one_and_two_threads = [threads](const std::function<Tensor()>& run) {
    set_num_threads(2);
    const Tensor two = run();
    set_num_threads(1);
    const Tensor one = run();
    set_num_threads(threads);
    return std::pair{two, one};
  };
  for (const DType dtype : {DType::f32, DType::bf16}) {
    if (dtype == DType::bf16 && !cpu_has_avx512_bf16())  // the last dtype: the f32 half has run
      GTEST_SKIP() << "the f32 half ran; the bf16 half needs AVX512_BF16 (lscpu flag avx512_bf16), which this CPU "
                      "lacks";
    for (const Shape& batch : {Shape{3, 5}, Shape{}})
      for (const bool ta : {false, true})
        for (const bool tb : {false, true}) {
          const int64_t m = batch.empty() ? 200 : 64;
          Shape a_shape = batch, b_shape = batch;
          a_shape.insert(a_shape.end(), {ta ? 32 : m, ta ? m : 32});
          b_shape.insert(b_shape.end(), {tb ? 48 : 32, tb ? 32 : 48});
          auto [a64, a32] = random_pair(a_shape, 17);
          auto [b64, b32] = random_pair(b_shape, 18);
          const Tensor a = to(a32, dtype), b = to(b32, dtype);
          const auto [two, one] =
              on_one_and_two_threads([&] { return run_matmul(a, b, plan_matmul(a, b, ta, tb), 0.5); });
          const std::string what = std::string(dtype_name(dtype)) + " " + shape_str(a_shape) + (ta ? "ᵀ" : "") + " @ " +
                                   shape_str(b_shape) + (tb ? "ᵀ" : "");
          expect_close(two, mul(matmul(to(a, DType::f64), to(b, DType::f64), ta, tb), 0.5), 1e-5, what);
          EXPECT_EQ(two.to_vector(), one.to_vector()) << what;
        }
    // A Linear's product with its epilogue (bias, ReLU), 200 rows.
    auto [x64, x32] = random_pair({200, 64}, 19);
    auto [w64, w32] = random_pair({96, 64}, 20);
    auto [bias64, bias32] = random_pair({96}, 21);
    const Tensor x = to(x32, dtype), w = to(w32, dtype);
    const auto [two, one] = on_one_and_two_threads([&] { return linear_forward(x, w, bias32, Activation::relu); });
    const Tensor expected = relu(add(matmul(to(x, DType::f64), to(w, DType::f64), false, true), bias64));
    expect_close(two, expected, 1e-5, std::string(dtype_name(dtype)) + " relu(x Wᵀ + b), 200 rows");
    EXPECT_EQ(two.to_vector(), one.to_vector()) << dtype_name(dtype) << " linear";
  }
}

// A share that throws (oneDNN failing inside a split product) reaches the caller as the exception,
// after the other shares have run, instead of ending the process from inside the OpenMP region.
TEST(FastPath, AShareThatThrowsReachesTheCaller) {
  const int threads = get_num_threads();
  set_num_threads(2);
  std::atomic<int> shares_run = 0;
  const auto throwing_second_share = [&](int64_t first, int64_t) {
    ++shares_run;
    if (first > 0) throw Error("share failed");
    return true;
  };
  EXPECT_THROW(shares_by_thread(256, 16, throwing_second_share), Error);
  EXPECT_EQ(shares_run, 2);
  EXPECT_FALSE(shares_by_thread(256, 16, [](int64_t first, int64_t) { return first == 0; }));
  EXPECT_TRUE(shares_by_thread(256, 16, [](int64_t, int64_t) { return true; }));
  set_num_threads(threads);
}

TEST(FastPath, ScaledMatmulAgreesWithF64) {
  auto [q64, q32] = random_pair({6, 50, 16}, 3);
  auto [k64, k32] = random_pair({6, 50, 16}, 4);
  expect_close(matmul_forward(q32, k32, false, true, 0.25), mul(matmul(q64, k64, false, true), 0.25), 1e-5,
               "0.25 · Q Kᵀ");
}

TEST(FastPath, SoftmaxAgreesWithF64) {
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{8192, 128}, -1}, {{37, 129}, -1}, {{1, 5000}, -1}, {{5000, 1}, -1},  {{3, 2000}, 0}, {{4, 50, 33}, 1},
      {{12, 6}, -1},     {{1}, 0},        {{192, 4}, -1},  {{8192, 16}, -1}, {{300, 7}, -1}, {{5, 17}, -1}};
  for (const auto& [shape, dim] : cases) {
    auto [x64, x32] = random_pair(shape, 5);
    for (bool log : {false, true})
      expect_close(softmax_forward(x32, dim, log), softmax_forward(x64, dim, log), 1e-5,
                   std::string(log ? "log_softmax " : "softmax ") + shape_str(shape) + " dim " + std::to_string(dim));
  }
}

TEST(FastPath, SoftmaxMaskedRowsAgreeWithF64) {
  // A causal mask over (64, 128, 128) scores: -inf gets weight 0 (log-weight -inf), as in f64.
  auto [x64, x32] = random_pair({64, 128, 128}, 6);
  const Tensor mask = causal_mask(128);
  for (bool log : {false, true})
    expect_close(softmax_forward(masked_fill(x32, mask, -INFINITY), -1, log),
                 softmax_forward(masked_fill(x64, mask, -INFINITY), -1, log), 1e-5,
                 log ? "masked log_softmax" : "masked softmax");
}

// The short rows (16 or fewer, the seeds' attention heads): -inf gets exactly weight 0, a row all
// -inf or holding a NaN is NaN, as in f64 (and PyTorch).
TEST(FastPath, SoftmaxShortMaskedRowsAgreeWithF64) {
  auto [x64, x32] = random_pair({48, 16, 16}, 7);
  const Tensor mask = causal_mask(16);  // true above the diagonal: masked
  for (Tensor* x : {&x32, &x64}) {
    *x = masked_fill(*x, mask, -INFINITY);
    x->set({0, 0, 0}, -INFINITY);  // row (0, 0), causal, had only this key: now all -inf
    x->set({1, 5, 2}, NAN);        // row (1, 5) holds a NaN
  }
  const Tensor y32 = softmax_forward(x32, -1, false), y64 = softmax_forward(x64, -1, false);
  expect_close(y32, y64, 1e-5, "short masked softmax");
  EXPECT_EQ(y32.at({2, 0, 1}), 0.0);  // masked: exactly 0
  EXPECT_TRUE(std::isnan(y32.at({0, 0, 0})) && std::isnan(y32.at({1, 5, 0})));
  EXPECT_FALSE(std::isnan(y32.at({1, 4, 0})));
}

TEST(FastPath, SoftmaxBackwardAgreesWithComposition) {
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{8192, 128}, -1}, {{37, 129}, -1}, {{2, 64}, -1}, {{3, 1}, -1}, {{3, 200}, 0}, {{4, 50, 33}, 1}, {{1}, 0}};
  for (const auto& [shape, dim] : cases) {
    auto [x64, x32] = random_pair(shape, 7);
    auto [g64, g32] = random_pair(shape, 8);
    const Tensor y64 = softmax(x64, dim), y32 = to(y64, DType::f32);
    const Tensor composed = mul(y64, sub(g64, sum(mul(g64, y64), {dim}, true)));
    expect_close(softmax_backward_data(y32, g32, dim), composed, 1e-5, "softmax backward " + shape_str(shape));
    expect_close(softmax_backward_data(y64, g64, dim), composed, 1e-12, "softmax backward f64 " + shape_str(shape));
  }
}

struct NormCase {
  Shape x, normalized;
  bool weight, bias;
};

// layer_norm's output and every gradient, f32 against f64.
void check_layer_norm(const NormCase& c) {
  auto [x64, x32] = random_pair(c.x, 9);
  auto [w64, w32] = random_pair(c.normalized, 10);
  auto [b64, b32] = random_pair(c.normalized, 11);
  auto [g64, g32] = random_pair(c.x, 12);
  std::vector<Tensor> results;
  for (auto [x, w, b, g] : {std::tuple{x64, w64, b64, g64}, std::tuple{x32, w32, b32, g32}}) {
    x.requires_grad_();
    if (c.weight) w.requires_grad_();
    if (c.bias) b.requires_grad_();
    const Tensor out = layer_norm(x, c.normalized, c.weight ? w : Tensor(), c.bias ? b : Tensor());
    out.backward(g);
    results.insert(results.end(), {out, x.grad(), c.weight ? w.grad() : Tensor(), c.bias ? b.grad() : Tensor()});
  }
  const std::string name = "layer_norm " + shape_str(c.x) + " over " + shape_str(c.normalized);
  const int64_t rows = numel(c.x) / numel(c.normalized);
  const double sum_tol = 2e-6 * std::sqrt(rows);  // dw, db sum over the rows
  expect_close(results[4], results[0], 1e-5, name + " out");
  expect_close(results[5], results[1], 1e-4, name + " dx");
  if (c.weight) expect_close(results[6], results[2], 1e-5 + sum_tol, name + " dw");
  if (c.bias) expect_close(results[7], results[3], 1e-5 + sum_tol, name + " db");
}

TEST(FastPath, LayerNormAgreesWithF64) {
  for (const NormCase& c : std::vector<NormCase>{{{64, 128}, {128}, true, true},
                                                 {{33, 129}, {129}, false, false},
                                                 {{7, 3, 300}, {3, 300}, true, false},
                                                 {{5000, 1}, {1}, false, true},
                                                 {{1, 8192}, {8192}, true, true},
                                                 {{16, 64, 256}, {256}, true, true},
                                                 {{3, 5}, {5}, true, true}})
    check_layer_norm(c);
}

// The vectorised f32 GELU (erf) and its derivative against the f64 reference: over the normal
// range, odd sizes (the vector loop's tail) and the far tails, where 1 + erf must not cancel.
TEST(FastPath, GeluAgreesWithF64) {
  for (const int64_t n : {int64_t{1}, int64_t{17}, int64_t{100003}}) {
    auto [x64, x32] = random_pair({n}, 40 + static_cast<uint64_t>(n));
    x64 = to(mul(x32, 3.0), DType::f64);  // values the f32 input holds exactly, spread to ±12
    x32 = to(x64, DType::f32);
    expect_close(gelu(x32), gelu(x64), 3e-7, fmt::format("gelu ({})", n));
    Tensor g32 = x32.detach().requires_grad_(), g64 = x64.detach().requires_grad_();
    sum(gelu(g32)).backward();
    sum(gelu(g64)).backward();
    expect_close(g32.grad(), g64.grad(), 3e-7, fmt::format("gelu' ({})", n));
  }
  // The left tail: gelu(x) is tiny and keeps a relative accuracy of 4e-3 down to −6 (no
  // 1 + (−1 + ε)); further out, where gelu < 1e-13, A&S's erfc drifts to a few % relative.
  // PyTorch 1.13's f32 gelu there, against f64: 2.7e-4 at −4, 4% at −5, and 0 (all lost) from −6.
  const Tensor tail64 = tensor({-4, -5, -6, -8, -9.5}, {5}, DType::f64);
  const std::vector<double> exact = gelu(tail64).to_vector(), fast = gelu(to(tail64, DType::f32)).to_vector();
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(fast[i] / exact[i], 1.0, 4e-3) << "gelu(" << tail64.to_vector()[i] << ")";
  for (size_t i = 3; i < exact.size(); ++i)
    EXPECT_NEAR(fast[i], exact[i], 1e-14) << "gelu(" << tail64.to_vector()[i] << ")";
}

// gelu's backward in one pass (a plain backward) is, bit for bit, g · gelu′(x) as the two recorded
// ops compute it (the backward of a create_graph grad, which must stay differentiable).
TEST(FastPath, GeluBackwardIsTheComposition) {
  for (const int64_t n : {int64_t{1}, int64_t{17}, int64_t{100003}}) {
    auto [x64, x32] = random_pair({n}, 60 + static_cast<uint64_t>(n));
    auto [g64, g32] = random_pair({n}, 61 + static_cast<uint64_t>(n));
    x32 = mul(x32, 3.0).detach().requires_grad_();
    const Tensor fused = grad({gelu(x32)}, {x32}, {g32})[0];
    const Tensor composed = grad({gelu(x32)}, {x32}, {g32}, /*create_graph=*/true)[0];
    ASSERT_TRUE(composed.grad_fn() != nullptr);  // the recorded ops ran
    EXPECT_EQ(fused.to_vector(), composed.to_vector()) << "n " << n;
  }
}

// One step of a small training loop over every dispatched kernel, above the thresholds.
void training_step(const Tensor& x, const Tensor& w, const Tensor& gamma) {
  const Tensor h = layer_norm(matmul(x, w, false, true), {128}, gamma);  // (64, 128)
  const Tensor p = softmax(h, -1);
  const Tensor l = log_softmax(matmul(p, w), -1);  // (64, 128)
  sum(mul(p, l)).backward();
}

TEST(FastPath, NoPrimitiveIsCreatedInTheSteadyState) {
  Generator gen(13);
  const Tensor x = randn({64, 128}, DType::f32, gen);
  const Tensor w = randn({128, 128}, DType::f32, gen).requires_grad_();
  const Tensor gamma = randn({128}, DType::f32, gen).requires_grad_();
  training_step(x, w, gamma);
  const int64_t after_first = onednn::primitives_created();
  EXPECT_GT(after_first, 0);
  for (int step = 0; step < 10; ++step) training_step(x, w, gamma);
  EXPECT_EQ(onednn::primitives_created(), after_first);
}

TEST(FastPath, APrimitiveIsRebuiltForANewThreadCountAndSmallOnesLeaveTheCountAlone) {
  Generator gen(15);
  const Tensor a = randn({256, 256}, DType::f32, gen);     // 16.7M multiply-adds: parallel
  const Tensor s = randn({16, 3, 4, 4}, DType::f32, gen);  // 768 elements: on the calling thread
  const int threads = get_num_threads();
  set_num_threads(1);
  matmul(a, a);
  const int64_t built_for_one = onednn::primitives_created();
  matmul(a, a);
  EXPECT_EQ(onednn::primitives_created(), built_for_one);
  set_num_threads(2);
  matmul(a, a);  // oneDNN fixed the first one's thread count when it was built: new ones (a share a thread)
  const int64_t built_for_two = onednn::primitives_created();
  EXPECT_GT(built_for_two, built_for_one);
  matmul(a, a);
  EXPECT_EQ(onednn::primitives_created(), built_for_two);
  softmax(s, -1);
  EXPECT_EQ(get_num_threads(), 2);  // the small problem's single thread does not leak out
  set_num_threads(threads);
}

TEST(FastPath, ResultsDoNotDependOnTheThreadCount) {
  auto [a64, a32] = random_pair({8192, 128}, 14);
  const int threads = get_num_threads();
  set_num_threads(1);
  const std::vector<double> one = softmax_backward_data(softmax(a32, -1), a32, -1).to_vector();
  set_num_threads(2);
  const std::vector<double> two = softmax_backward_data(softmax(a32, -1), a32, -1).to_vector();
  set_num_threads(threads);
  EXPECT_EQ(one, two);
  EXPECT_THROW(set_num_threads(0), Error);
}

}  // namespace
}  // namespace ag
